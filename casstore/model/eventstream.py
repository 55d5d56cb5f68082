"""AWS event streams in cassettes (pure): one chunk per binary message, readable as
``{"eventstream": {"headers": [[name, value], ...], "payload": "<text>"}}`` when it is written
back byte for byte (CRCs computed again), else ``{"base64": ...}``."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

__all__ = ["CONTENT_TYPE", "is_event_stream", "split_messages", "encode_chunk", "decode_chunk", "encode_chunks", "chunk_payload"]

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_PRELUDE = struct.Struct(">III")
_STRING = 7


def is_event_stream(content_type: str) -> bool:
    return content_type.strip().lower().startswith(CONTENT_TYPE)


def split_messages(data: bytes) -> list[bytes]:
    """One item per message; an incomplete tail (a stream cut short) is the last item."""
    out: list[bytes] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < 12:
            out.append(data[pos:])
            break
        total = struct.unpack_from(">I", data, pos)[0]
        if total < 16:  # not a message: keep the rest as it is
            out.append(data[pos:])
            break
        out.append(data[pos : pos + total])
        pos += total
    return out


def _encode_message(headers: list[tuple[str, str]], payload: bytes) -> bytes:
    raw_headers = b"".join(
        struct.pack(">B", len(n := name.encode("utf-8"))) + n + struct.pack(">BH", _STRING, len(v := value.encode("utf-8"))) + v
        for name, value in headers
    )
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(raw_headers))
    prelude += struct.pack(">I", zlib.crc32(prelude) & 0xFFFFFFFF)
    body = prelude + raw_headers + payload
    return body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def _readable(message: bytes) -> dict[str, Any] | None:
    try:
        total, headers_len, _ = _PRELUDE.unpack_from(message, 0)
    except struct.error:
        return None
    if total != len(message) or 12 + headers_len + 4 > total:
        return None
    raw, pos, headers = message[12 : 12 + headers_len], 0, []
    try:
        while pos < len(raw):
            n = raw[pos]
            name = raw[pos + 1 : pos + 1 + n].decode("utf-8")
            pos += 1 + n
            if raw[pos] != _STRING:
                return None
            (size,) = struct.unpack_from(">H", raw, pos + 1)
            value = raw[pos + 3 : pos + 3 + size].decode("utf-8")
            pos += 3 + size
            headers.append((name, value))
        payload = message[12 + headers_len : total - 4].decode("utf-8")
    except (IndexError, UnicodeDecodeError, struct.error):
        return None
    if _encode_message(headers, payload.encode("utf-8")) != message:  # CRCs or framing not as we write them
        return None
    return {"eventstream": {"headers": [list(h) for h in headers], "payload": payload}}


def encode_chunk(message: bytes) -> dict[str, Any]:
    """A message as a cassette chunk: readable when it writes back byte for byte."""
    return _readable(message) or {"base64": base64.b64encode(message).decode("ascii")}


def encode_chunks(data: bytes) -> list[dict[str, Any]]:
    return [encode_chunk(m) for m in split_messages(data)]


def decode_chunk(chunk: Any) -> bytes:
    """The bytes of a cassette chunk (see :func:`encode_chunk`)."""
    if isinstance(chunk, dict):
        if "eventstream" in chunk:
            ev = chunk["eventstream"]
            headers = [(str(k), str(v)) for k, v in ev.get("headers") or []]
            return _encode_message(headers, str(ev.get("payload") or "").encode("utf-8"))
        if "base64" in chunk:
            return base64.b64decode(chunk["base64"])
    if isinstance(chunk, str):
        return chunk.encode("utf-8")
    raise ValueError(f"not a stream chunk: {type(chunk).__name__}")


def chunk_payload(chunk: Any) -> Any:
    """A readable chunk's event type and payload (JSON parsed when it is JSON), for drift."""
    if not (isinstance(chunk, dict) and "eventstream" in chunk):
        return chunk
    ev = chunk["eventstream"]
    payload: Any = ev.get("payload")
    try:
        payload = json.loads(payload)
    except (TypeError, ValueError):
        pass
    event = dict((str(k), str(v)) for k, v in ev.get("headers") or []).get(":event-type")
    return {"event": event, "payload": payload}
