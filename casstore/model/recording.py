"""HTTP requests and responses as cassette records and back (pure; the format: docs/replay.md).
A JSON body is stored parsed only when writing it back gives the received bytes, else as
``body_text``; bodies are stored decoded (no ``content-encoding``)."""

from __future__ import annotations

import base64
import gzip
import json
import re
import zlib
from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import Any

from . import eventstream
from .jsonvalues import parse_body

__all__ = [
    "encode_headers",
    "decode_headers",
    "encode_request",
    "request_body_bytes",
    "encode_response",
    "decode_response",
    "response_json_values",
    "decode_content",
    "is_event_stream",
    "reason_phrase",
]

_HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})
_HOP_AND_CODING = _HOP_HEADERS | {"content-encoding"}
# Not kept in recorded requests: transport details and SDK telemetry that churn with every
# library upgrade (they never count towards identity either).
_UNRECORDED_REQUEST_HEADERS = _HOP_HEADERS | {"host", "accept-encoding"}


def encode_headers(items: Iterable[tuple[str, str]], *, drop: Iterable[str] = ()) -> dict[str, Any]:
    """Lower-cased name -> value; a name sent several times keeps a list of values."""
    dropped = {d.lower() for d in drop}
    out: dict[str, Any] = {}
    for k, v in items:
        name = (k.decode("latin-1") if isinstance(k, bytes) else str(k)).lower()
        value = v.decode("latin-1") if isinstance(v, bytes) else str(v)
        if name in dropped:
            continue
        if name in out:
            prev = out[name]
            out[name] = [*prev, value] if isinstance(prev, list) else [prev, value]
        else:
            out[name] = value
    return out


def decode_headers(headers: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for k, v in (headers or {}).items():
        if isinstance(v, list):
            out.extend((str(k), str(x)) for x in v)
        else:
            out.append((str(k), str(v)))
    return out


def _header(headers: Mapping[str, Any] | None, name: str) -> str:
    for k, v in (headers or {}).items():
        if str(k).lower() == name:
            return ", ".join(v) if isinstance(v, list) else str(v)
    return ""


def is_event_stream(headers: Mapping[str, Any] | Iterable[tuple[str, str]]) -> bool:
    items = headers.items() if isinstance(headers, Mapping) else headers
    for k, v in items:
        if str(k).lower() == "content-type":
            return str(v).lower().startswith("text/event-stream")
    return False


def reason_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


# -- requests -------------------------------------------------------------------------


def encode_request(method: str, url: str, headers: Iterable[tuple[str, str]], body: bytes | str | None) -> dict[str, Any]:
    items = [(str(k).lower(), str(v)) for k, v in headers]
    hdrs = encode_headers([(k, v) for k, v in items
                           if k not in _UNRECORDED_REQUEST_HEADERS and not k.startswith("x-stainless-")])
    raw = body.encode("utf-8") if isinstance(body, str) else (body or b"")
    kind, value = parse_body(raw, _header(hdrs, "content-type"))
    if kind == "empty":
        stored: Any = None
    elif kind == "json":
        stored = value
    elif kind == "bytes":
        stored = {"base64": base64.b64encode(raw).decode("ascii")}
    else:  # text and forms keep their exact text
        stored = raw.decode("utf-8")
    return {"method": method.upper(), "url": str(url), "headers": hdrs, "body": stored}


def request_body_bytes(request: Mapping[str, Any]) -> bytes:
    """Rebuild request body bytes from a request record (for explaining a near miss)."""
    body = request.get("body")
    if body is None:
        return b""
    json_ct = "json" in _header(request.get("headers"), "content-type").lower()
    if isinstance(body, dict) and set(body) == {"base64"} and not json_ct:
        try:
            return base64.b64decode(body["base64"])
        except (ValueError, TypeError):
            return b""
    if isinstance(body, str) and not json_ct:
        return body.encode("utf-8")
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


# -- content decoding -------------------------------------------------------------------


def decode_content(raw: bytes, content_encoding: str) -> bytes | None:
    """``raw`` with ``content-encoding`` undone (gzip, deflate, zstd, br when brotli is
    installed); None when an encoding is unknown or the data does not decode."""
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    data = raw
    try:
        for coding in reversed(codings):
            if coding == "identity":
                continue
            if coding in ("gzip", "x-gzip"):
                data = gzip.decompress(data)
            elif coding == "deflate":
                try:
                    data = zlib.decompress(data)
                except zlib.error:
                    data = zlib.decompress(data, -zlib.MAX_WBITS)
            elif coding == "zstd":
                import zstandard

                data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
            elif coding == "br":
                try:
                    import brotli
                except ImportError:
                    return None
                data = brotli.decompress(data)
            else:
                return None
    except Exception:  # noqa: BLE001 - any codec failure means "keep the raw bytes"
        return None
    return data


# -- responses ------------------------------------------------------------------------

_SSE_EVENT = re.compile(r".*?(?:\r\n\r\n|\n\n|\r\r)|.+\Z", re.S)  # one Server-Sent Event, terminator included


_JSON_FORMATS = ("compact", "spaced", "indent2", "compact+ascii", "spaced+ascii", "indent2+ascii")


def _dump_json(value: Any, fmt: str) -> str:
    base, *flags = fmt.split("+")
    ascii_ = "ascii" in flags
    if base == "spaced":
        text = json.dumps(value, sort_keys=True, ensure_ascii=ascii_)
    elif base == "indent2":
        text = json.dumps(value, sort_keys=True, indent=2, ensure_ascii=ascii_)
    else:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=ascii_)
    return text + ("\n" if "nl" in flags else "")


def _encode_body(raw: bytes, content_type: str) -> dict[str, Any]:
    if not raw:
        return {"body": None}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        key = "body_base64" if "json" in content_type else "body"
        b64 = base64.b64encode(raw).decode("ascii")
        return {key: b64} if key == "body_base64" else {"body": {"base64": b64}}
    if "json" not in content_type:
        return {"body": text}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {"body_text": text}
    stripped, nl = (text[:-1], "+nl") if text.endswith("\n") else (text, "")
    for fmt in _JSON_FORMATS:
        if _dump_json(value, fmt) == stripped:
            fmt = fmt + nl
            return {"body": value} if fmt == "compact" else {"body": value, "body_format": fmt}
    return {"body_text": text}


def encode_response(
    status: int,
    headers: Iterable[tuple[str, str]],
    raw: bytes,
    *,
    decoded: bool = False,
) -> dict[str, Any]:
    """A response record. ``decoded`` says ``raw`` is already free of content-encoding."""
    items = [
        ((k.decode("latin-1") if isinstance(k, bytes) else str(k)).lower(), v.decode("latin-1") if isinstance(v, bytes) else str(v))
        for k, v in headers
    ]
    encoding = ", ".join(v for k, v in items if k == "content-encoding")
    drop = set(_HOP_HEADERS)
    body = raw
    if decoded:
        drop.add("content-encoding")
    elif encoding:
        plain = decode_content(raw, encoding)
        if plain is not None:
            body = plain
            drop.add("content-encoding")
    hdrs = encode_headers(items, drop=drop)
    record: dict[str, Any] = {"status": int(status), "headers": hdrs}
    if "content-encoding" in hdrs:  # could not decode: keep the exact bytes
        record["body_base64"] = base64.b64encode(body).decode("ascii")
        return record
    if eventstream.is_event_stream(_header(hdrs, "content-type")):
        record["stream"] = True
        record["chunks"] = eventstream.encode_chunks(body)
        return record
    if is_event_stream(items):
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            record["body_base64"] = base64.b64encode(body).decode("ascii")
            return record
        record["stream"] = True
        record["chunks"] = [m.group(0) for m in _SSE_EVENT.finditer(text) if m.group(0)]
        return record
    record.update(_encode_body(body, _header(hdrs, "content-type").lower()))
    return record


def decode_response(record: Mapping[str, Any]) -> tuple[int, list[tuple[str, str]], bytes | None, list[bytes] | None]:
    """``(status, headers, body, chunks)`` to serve, exactly one of body and chunks set; a body
    is served with its ``content-length``, a stream with none."""
    status = int(record.get("status", 200))
    stream = record.get("stream") and isinstance(record.get("chunks"), list)
    # a stream and base64 bytes keep their content-encoding; decoded bodies are served without
    drop = _HOP_HEADERS if stream or "body_base64" in record else _HOP_AND_CODING
    headers = [(k, v) for k, v in decode_headers(record.get("headers")) if k.lower() not in drop]
    if stream:
        chunks = [c.encode("utf-8") if isinstance(c, str) else eventstream.decode_chunk(c) for c in record["chunks"]]
        return status, headers, None, chunks
    body: bytes
    if "body_base64" in record:
        body = base64.b64decode(record["body_base64"])
    elif "body_text" in record:
        body = str(record["body_text"]).encode("utf-8")
    else:
        value = record.get("body")
        if value is None:
            body = b""
        elif "json" in _header(record.get("headers"), "content-type").lower():
            body = _dump_json(value, str(record.get("body_format") or "compact")).encode("utf-8")
        elif isinstance(value, str):
            body = value.encode("utf-8")
        elif isinstance(value, dict) and set(value) == {"base64"}:
            body = base64.b64decode(value["base64"])
        else:
            body = json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")
    headers.append(("content-length", str(len(body))))
    return status, headers, body, None


def response_json_values(record: Mapping[str, Any]) -> Any:
    """The JSON content of a response record, for drift: a stream's ``data:`` payloads as a
    list (JSON parsed where possible)."""
    if record.get("stream") and isinstance(record.get("chunks"), list):
        values: list[Any] = []
        for chunk in record["chunks"]:
            if isinstance(chunk, dict):
                values.append(eventstream.chunk_payload(chunk))
                continue
            for line in str(chunk).splitlines():
                if line.startswith("data:"):
                    data = line[5:].strip()
                    try:
                        values.append(json.loads(data))
                    except ValueError:
                        values.append(data)
        return values
    if "body_text" in record:
        try:
            return json.loads(record["body_text"])
        except ValueError:
            return record["body_text"]
    if "body_base64" in record:
        return {"base64": record["body_base64"]}
    return record.get("body")
