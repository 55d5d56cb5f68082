"""Read vcrpy cassettes (YAML or JSON, vcrpy 1+, Ruby VCR, ``.gz``) into format-v1 entries.
Every problem is ``file:line: message``; a body casstore cannot read is refused, never dropped."""

from __future__ import annotations

import bisect
import gzip
import io
import json
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CassetteFormatError
from ..model.canonical import loads_bounded
from ..model.cassette import FORMAT_V1
from ..model.numerals import ascii_int
from ..model.yaml_load import load_yaml, yaml_module
from .build import file_mtime, format_error, http_entry, iso_timestamp, response_record
from .proof import ReplayProbe
from .vcr_bodies import LayoutError, request_body, response_body

__all__ = ["ParsedFile", "read_vcr_file", "parse_vcr_text", "is_casstore_file", "interaction_entry", "MAX_VCR_BYTES"]

MAX_VCR_BYTES = 256 * 1024 * 1024
_BAD_HEADER = re.compile(r"[\r\n\x00]")


@dataclass
class ParsedFile:
    """Entries read from one vcrpy file, not yet redacted."""

    entries: list[dict[str, Any]]
    recorder: str
    notes: list[str] = field(default_factory=list)
    fallback_recorded_at: str | None = None
    # each interaction as its client sends it, for the replay check (same order as entries)
    probes: list[ReplayProbe] = field(default_factory=list)


# -- loading with line numbers ---------------------------------------------------------------


def _key_lines(yaml: Any, item: Any) -> dict[str, int]:
    """Lines of an interaction's keys, by dotted key (``request.body.string``: 14)."""
    out: dict[str, int] = {}
    stack: list[tuple[str, Any, int]] = [("", item, 0)]
    while stack:
        prefix, node, depth = stack.pop()
        if not isinstance(node, yaml.MappingNode) or depth > 3:
            continue
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode):
                key = f"{prefix}{k.value}"
                out.setdefault(key, k.start_mark.line + 1)
                stack.append((key + ".", v, depth + 1))
    return out


def _load_yaml(text: str, source: str) -> tuple[Any, list[int], list[dict[str, int]]]:
    yaml = yaml_module()
    try:
        data, node = load_yaml(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        raise format_error(source, mark.line + 1 if mark else None, f"not valid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise format_error(source, None, f"not valid YAML: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise format_error(source, None, f"not a readable cassette: {exc or 'nested too deeply'}") from None
    if node is None:
        return None, [], []
    lines: list[int] = []
    items: list[Any] = []
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value in ("interactions", "http_interactions"):
                if isinstance(v, yaml.SequenceNode):
                    items = v.value
    elif isinstance(node, yaml.SequenceNode):
        items = node.value
    lines = [item.start_mark.line + 1 for item in items]
    return data, lines, [_key_lines(yaml, item) for item in items]


_WS = re.compile(r"[ \t\n\r]*")


def _json_item_offsets(text: str) -> list[int]:
    """Offsets of the items of the top-level ``interactions`` array (best effort)."""
    dec = json.JSONDecoder()

    def ws(i: int) -> int:
        m = _WS.match(text, i)
        return m.end() if m else i

    try:
        i = ws(0)
        if text[i : i + 1] != "{":
            return []  # (a bare list, vcrpy's before 1.0, is refused as a whole)
        i += 1
        while True:
            i = ws(i)
            if text[i : i + 1] in ("}", ""):
                return []
            key, i = dec.raw_decode(text, i)
            i = ws(i)
            if text[i : i + 1] != ":":
                return []
            i = ws(i + 1)
            if key in ("interactions", "http_interactions") and text[i : i + 1] == "[":
                return _array_offsets(text, i + 1, dec, ws)
            _, i = dec.raw_decode(text, i)
            i = ws(i)
            if text[i : i + 1] == ",":
                i += 1
    except (ValueError, IndexError, RecursionError):
        return []


def _array_offsets(text: str, i: int, dec: json.JSONDecoder, ws: Any) -> list[int]:
    offsets: list[int] = []
    while True:
        i = ws(i)
        if text[i : i + 1] in ("]", ""):
            return offsets
        offsets.append(i)
        _, i = dec.raw_decode(text, i)
        i = ws(i)
        if text[i : i + 1] == ",":
            i += 1


def _load_json(text: str, source: str) -> tuple[Any, list[int], list[dict[str, int]]]:
    try:
        data = loads_bounded(text, what="JSON")
    except ValueError as exc:
        msg = str(exc)
        m = re.search(r"line (\d+) column (\d+): (.*)$", msg)
        if m:
            raise format_error(source, int(m.group(1)), f"not valid JSON: column {m.group(2)}: {m.group(3)}") from None
        raise format_error(source, None, msg) from None
    newlines = [m.start() for m in re.finditer("\n", text)]
    lines = [bisect.bisect_left(newlines, off) + 1 for off in _json_item_offsets(text)]
    return data, lines, []


def _looks_json(path: Path, text: str) -> bool:
    suffix = path.suffix.lower()
    if suffix == ".json":
        return True
    if suffix in (".yaml", ".yml"):
        return False
    return text.lstrip()[:1] in ("{", "[")


def is_casstore_file(path: Path) -> bool:
    """True for a casstore format-v1 working copy (skipped when importing a folder)."""
    if path.suffix.lower() != ".json":
        return False
    try:
        if path.stat().st_size > MAX_VCR_BYTES:
            return False
        data = loads_bounded(path.read_bytes(), what=path.name)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT_V1


# -- values ----------------------------------------------------------------------------------


class _Bad(Exception):
    """A problem inside one interaction (turned into ``file:line: interaction N: ...``);
    ``key`` is the dotted key it sits under, for a more precise line."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        raise _Bad(f"expected a string, got {type(value).__name__}")
    return str(value)


def _header_pairs(value: Any, what: str) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    if value is None:
        return pairs
    if isinstance(value, dict):
        for k, v in value.items():
            values = v if isinstance(v, list) else [v]
            for item in values:
                if isinstance(item, list):  # HeadersDict keeps the first of a nested list
                    item = item[0] if item else ""
                if item is None:
                    continue
                pairs.append((_text(k), _text(item)))
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, list) and len(item) == 2:
                pairs.append((_text(item[0]), _text(item[1])))
            elif isinstance(item, str) and ":" in item:  # "Name: value\r\n" (pre-1.0)
                k, _, v = item.partition(":")
                pairs.append((k.strip(), v.strip()))
            else:
                raise _Bad(f"{what}: cannot read header {item!r}")
    else:
        raise _Bad(f"{what} must be a mapping of name to values, got {type(value).__name__}")
    for k, v in pairs:
        if not k or _BAD_HEADER.search(k) or _BAD_HEADER.search(v):
            raise _Bad(f"{what}: header {k!r} has a line break or NUL in its name or value")
    return pairs


def _status(response: dict[str, Any]) -> int:
    status = response.get("status", response.get("status_code"))
    if isinstance(status, dict):
        status = status.get("code")
    if isinstance(status, str) and (n := ascii_int(status.strip())) is not None:  # not "²", "٢٠٠", 5000 digits
        status = n
    if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 999:
        raise _Bad(f"response.status: expected an HTTP status code, got {status!r}")
    return status


def _uri(request: dict[str, Any]) -> str:
    uri = request.get("uri", request.get("url"))
    if uri is None and all(k in request for k in ("protocol", "host", "port", "path")):
        scheme, port = str(request["protocol"]), request["port"]
        default = {"http": 80, "https": 443}.get(scheme)
        uri = f"{scheme}://{request['host']}{'' if port == default else f':{port}'}{request['path']}"
    if not isinstance(uri, str):
        raise _Bad(f"request.uri: expected a URL string, got {type(uri).__name__ if uri is not None else 'nothing'}")
    if not re.match(r"^https?://[^/\s]+", uri, re.IGNORECASE) or any(c in uri for c in "\r\n\x00 "):
        raise _Bad(f"request.uri: expected an http(s) URL, got {uri[:80]!r}")
    return uri


@dataclass
class _Read:
    """One interaction read: its entry, the request as sent (for the replay check), and
    how many of its bodies were in the file only as parsed JSON."""

    entry: dict[str, Any]
    dated: bool
    request: tuple[str, str, list[tuple[str, str]], bytes | None]
    parsed: int


def _interaction(item: Any) -> _Read:
    """One interaction as an entry (raises :class:`_Bad` or :class:`LayoutError`)."""
    if not isinstance(item, dict):
        raise _Bad(f"expected a mapping with request and response, got {type(item).__name__}")
    request, response = item.get("request"), item.get("response")
    if not isinstance(request, dict):
        raise _Bad("'request' is missing or not a mapping")
    if not isinstance(response, dict):
        raise _Bad("'response' is missing or not a mapping")
    method = request.get("method")
    if not isinstance(method, str) or not re.fullmatch(r"[A-Za-z]+", method):
        raise _Bad(f"request.method: expected an HTTP method, got {method!r}")
    uri = _uri(request)
    req_headers = _header_pairs(request.get("headers"), "request.headers")
    sent_type = next((v for k, v in req_headers if k.lower() == "content-type"), "")
    sent, received = request_body(request, sent_type), response_body(response)
    if sent.content_type and not any(k.lower() == "content-type" for k, _ in req_headers):
        req_headers.append(("Content-Type", sent.content_type))
    status = _status(response)
    resp_headers = _header_pairs(response.get("headers"), "response.headers")
    raw = received.data or b""
    # a parsed body is plain JSON, whatever content-encoding the file kept
    record = response_record(status, resp_headers, raw, decoded=received.parsed)
    recorded_at = iso_timestamp(item.get("recorded_at")) or next(
        (iso_timestamp(v) for k, v in resp_headers if k.lower() == "date"), None)
    entry = http_entry(method, uri, req_headers, sent.data, record, recorded_at=recorded_at)
    return _Read(entry, recorded_at is not None, (method, uri, req_headers, sent.data), int(sent.parsed) + int(received.parsed))


# -- the file --------------------------------------------------------------------------------


def _paired_layout(data: Any, source: str) -> Any:
    """``{"requests": [...], "responses": [...]}`` (what a serializer handed vcrpy's
    ``cassette_dict`` as is, e.g. langchain's gzipped YAML) as vcrpy's ``interactions``."""
    if not (isinstance(data, dict) and "interactions" not in data and isinstance(data.get("requests"), list)):
        return data
    requests, responses = data["requests"], data.get("responses")
    if not isinstance(responses, list) or len(responses) != len(requests):
        raise format_error(source, 1, "a 'requests' list needs a 'responses' list of the same length")
    return {"interactions": [{"request": q, "response": r} for q, r in zip(requests, responses, strict=True)],
            "version": 1}


def interaction_entry(item: Any) -> dict[str, Any]:
    """One vcrpy interaction (``{"request": ..., "response": ...}``) as an un-redacted entry
    (raises :class:`CassetteFormatError`)."""
    try:
        return _interaction(item).entry
    except (_Bad, LayoutError) as exc:
        raise format_error("vcrpy cassette", None, str(exc)) from None


def parse_vcr_text(text: str, source: str, *, as_json: bool, fallback_recorded_at: str | None = None) -> ParsedFile:
    """Entries of one vcrpy cassette's text; raises CassetteFormatError ``source:line: ...``."""
    data, lines, key_lines = _load_json(text, source) if as_json else _load_yaml(text, source)
    if isinstance(data, list) and data and isinstance(data[0], dict) and "request" in data[0]:
        raise format_error(
            source, 1,
            "a cassette from vcrpy before 1.0 (no 'version'); run `python -m vcr.migration FILE` "
            "with vcrpy installed, then import it",
        )
    if isinstance(data, dict) and data.get("format") == FORMAT_V1:
        raise format_error(source, 1, "already a casstore cassette; pin it with `casstore add`")
    data = _paired_layout(data, source)
    if not isinstance(data, dict) or not (
        isinstance(data.get("interactions"), list) or isinstance(data.get("http_interactions"), list)
    ):
        raise format_error(
            source, 1,
            "not a vcrpy cassette: expected a mapping with an 'interactions' list "
            "(or Ruby VCR's 'http_interactions')",
        )
    ruby = "interactions" not in data
    version = data.get("version")
    if not ruby and version is not None and (
        isinstance(version, bool) or not isinstance(version, int) or version < 1
    ):
        raise format_error(source, 1, f"unsupported vcrpy cassette version {version!r} (expected 1 or later)")
    items = data["http_interactions"] if ruby else data["interactions"]
    entries: list[dict[str, Any]] = []
    probes: list[ReplayProbe] = []
    undated = parsed = 0
    for i, item in enumerate(items):
        line = lines[i] if i < len(lines) else None
        try:
            read = _interaction(item)
        except (_Bad, LayoutError) as exc:
            at = key_lines[i].get(exc.key or "", line) if i < len(key_lines) else line
            raise format_error(source, at, f"interaction {i + 1}: {exc}") from None
        except CassetteFormatError:
            raise
        except (ValueError, TypeError, RecursionError) as exc:
            raise format_error(source, line, f"interaction {i + 1}: cannot be read ({exc})") from None
        entry = read.entry
        if not read.dated:
            undated += 1
            if fallback_recorded_at:
                entry["recorded_at"] = fallback_recorded_at
        method, uri, headers, body = read.request
        probes.append(ReplayProbe(f"{source}:{line}" if line else source, i + 1, method, uri, tuple(headers), body, len(entries)))
        entries.append(entry)
        parsed += read.parsed
    notes = []
    if parsed:
        notes.append(
            f"{parsed} bod{'y' if parsed == 1 else 'ies'} held only as parsed JSON (parsed_body), not as the bytes "
            "sent: stored as canonical JSON (same JSON value; key order and spacing are casstore's)"
        )
    if undated:
        notes.append(
            f"{undated} interaction(s) carry no time (no Date header): recorded_at is the file's modification time"
        )
    recorder = f"Ruby VCR {data.get('recorded_with', '')}".strip() if ruby else "vcrpy"
    return ParsedFile(entries=entries, recorder=recorder, notes=notes, fallback_recorded_at=fallback_recorded_at,
                      probes=probes)


def _gunzip(raw: bytes, source: str) -> bytes:
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as f:
            data = f.read(MAX_VCR_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise format_error(source, None, f"not a readable gzip file ({exc})") from None
    if len(data) > MAX_VCR_BYTES:
        raise format_error(source, None, f"inflates to more than {MAX_VCR_BYTES} bytes")
    return data


def read_vcr_file(path: Path) -> ParsedFile:
    """Read and convert one vcrpy cassette file (YAML or JSON, by suffix, else by content)."""
    source = path.name
    try:
        size = path.stat().st_size
        if size > MAX_VCR_BYTES:
            raise format_error(source, None, f"larger than {MAX_VCR_BYTES} bytes")
        raw = path.read_bytes()
        mtime = file_mtime(path)
    except OSError as exc:
        raise format_error(str(path), None, f"cannot read ({exc.strerror or exc})") from None
    if path.suffix.lower() == ".gz":  # a gzipped cassette (a custom serializer's): read bounded
        raw = _gunzip(raw, source)
        path = path.with_suffix("")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise format_error(source, line, "not valid UTF-8 text") from None
    return parse_vcr_text(text, source, as_json=_looks_json(path, text), fallback_recorded_at=mtime)
