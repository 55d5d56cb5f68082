"""Read JSONL call logs (one JSON object a line) into format-v1 entries; each field is read
from its first :data:`DEFAULT_PATHS` present, or ``--map FIELD=PATH`` (docs/migrating.md)."""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..model.canonical import loads_bounded
from ..model.identity import llm_api
from ..model.numerals import ascii_int
from .build import format_error, http_entry, iso_timestamp, response_record, tool_entry

__all__ = ["FIELDS", "DEFAULT_PATHS", "read_jsonl_files", "parse_record", "parse_mapping", "parse_base_urls"]

DEFAULT_PATHS: dict[str, tuple[str, ...]] = {
    "kind": ("kind",),
    "request": ("request", "input"),
    "response": ("response", "output"),
    "model": ("model",),
    "tool": ("tool", "tool_name"),
    "error": ("error",),
    "timestamp": ("timestamp", "ts", "time", "recorded_at", "created_at"),
    "api": ("api", "provider"),
    "url": ("url", "endpoint"),
    "headers": ("headers",),
    "status": ("status", "status_code"),
    "duration": ("duration_ms", "latency_ms"),
}
FIELDS = tuple(DEFAULT_PATHS)

OPENAI_BASE = "https://api.openai.com/v1"
ANTHROPIC_BASE = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
_OPENAI_SUFFIX = {
    "openai.chat": "/chat/completions",
    "openai.responses": "/responses",
    "openai.embeddings": "/embeddings",
    "openai.completions": "/completions",
}
_APIS = (*_OPENAI_SUFFIX, "anthropic.messages")
_MISSING = object()


class _Bad(Exception):
    pass


def parse_mapping(items: Sequence[str]) -> dict[str, str]:
    """``["request=input.payload", ...]`` → ``{"request": "input.payload"}``; bad items raise UsageError."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, path = item.partition("=")
        key, path = key.strip(), path.strip()
        if not sep or not key or not path:
            raise UsageError(f"--map {item!r}: expected FIELD=PATH, e.g. request=input.payload")
        if key not in DEFAULT_PATHS:
            raise UsageError(f"--map {item!r}: unknown field {key!r} (fields: {', '.join(FIELDS)})")
        out[key] = path
    return out


def _get(record: Any, path: str) -> Any:
    value = record
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and (i := ascii_int(part)) is not None and i < len(value):
            value = value[i]
        else:
            return _MISSING
    return value


def _field(record: dict[str, Any], name: str, mapping: Mapping[str, str]) -> Any:
    if name in mapping:
        return _get(record, mapping[name])
    for path in DEFAULT_PATHS[name]:
        value = _get(record, path)
        if value is not _MISSING:
            return value
    return _MISSING


def _one_outcome(record: dict[str, Any], mapping: Mapping[str, str]) -> tuple[Any, Any]:
    """``(response, error)`` of a record; both set is refused: an entry keeps one outcome of a
    call, and keeping one would lose the other without a word."""
    response, error = _field(record, "response", mapping), _field(record, "error", mapping)
    if response not in (_MISSING, None) and error not in (_MISSING, None):
        raise _Bad(f"has both a response ({_where('response', mapping)}) and an error ({_where('error', mapping)}); "
                   "an entry keeps one, and casstore never drops the other silently: remove one, or point "
                   "its --map at another field (e.g. --map error=none)")
    return response, error


def _where(name: str, mapping: Mapping[str, str]) -> str:
    paths = (mapping[name],) if name in mapping else DEFAULT_PATHS[name]
    return ", ".join(repr(p) for p in paths)


# -- bodies ----------------------------------------------------------------------------------


def _body(value: Any, what: str) -> tuple[bytes | None, str | None]:
    """``(bytes, content type)`` of a body given as JSON, text or ``{"base64": ...}``."""
    if value is None or value is _MISSING:
        return None, None
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass"), None
    if isinstance(value, dict) and set(value) == {"base64"} and isinstance(value["base64"], str):
        try:
            return base64.b64decode(value["base64"], validate=True), None
        except (binascii.Error, ValueError):
            raise _Bad(f"{what}.base64 is not base64") from None
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8"), "application/json"


def _headers(value: Any, what: str) -> list[tuple[str, str]]:
    if value is None or value is _MISSING:
        return []
    if isinstance(value, dict):
        pairs: list[tuple[str, str]] = []
        for k, v in value.items():
            for item in v if isinstance(v, list) else [v]:
                pairs.append((str(k), str(item)))
        return pairs
    if isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 for p in value):
        return [(str(k), str(v)) for k, v in value]
    raise _Bad(f"{what} must be an object of header names to values")


def _status(value: Any) -> int:
    if value is _MISSING or value is None:
        return 200
    if isinstance(value, str) and (n := ascii_int(value)) is not None:  # not "²", "٢٠٠", 5000 digits
        value = n
    if isinstance(value, bool) or not isinstance(value, int) or not 100 <= value <= 999:
        raise _Bad(f"status must be an HTTP status code, got {value!r}")
    return value


# -- LLM records -----------------------------------------------------------------------------


def _infer_api(body: dict[str, Any], response: Any) -> str | None:
    if isinstance(response, list) and response and isinstance(response[0], dict):
        first = response[0]
        if str(first.get("type", "")).startswith("message_"):
            return "anthropic.messages"
        if first.get("object") == "chat.completion.chunk":
            return "openai.chat"
        if str(first.get("type", "")).startswith("response."):
            return "openai.responses"
    if isinstance(response, dict):
        obj, typ = response.get("object"), response.get("type")
        if typ == "message" and response.get("role") == "assistant":
            return "anthropic.messages"
        if obj in ("chat.completion", "chat.completion.chunk"):
            return "openai.chat"
        if obj == "response":
            return "openai.responses"
        if obj == "text_completion":
            return "openai.completions"
        if obj == "list" and isinstance(response.get("data"), list):
            return "openai.embeddings"
    model = str(body.get("model") or "").lower()
    if "messages" in body:
        return "anthropic.messages" if model.startswith("claude") else "openai.chat"
    if "input" in body:
        return "openai.embeddings" if "embed" in model or "encoding_format" in body else "openai.responses"
    if "prompt" in body:
        return "openai.completions"
    return None


def _api_name(value: Any, body: dict[str, Any], response: Any) -> str | None:
    if value is _MISSING or value is None:
        return _infer_api(body, response)
    name = str(value).strip().lower().replace("/", ".")
    if name in _APIS:
        return name
    if name in ("openai", "azure", "azure_openai", "azure-openai"):
        guess = _infer_api(body, response)
        return guess if guess and guess.startswith("openai.") else "openai.chat"
    if name in ("anthropic", "claude"):
        return "anthropic.messages"
    raise _Bad(f"unknown api {value!r} (use one of {', '.join(_APIS)}, openai, anthropic)")


def parse_base_urls(items: Sequence[str]) -> dict[str, str]:
    """``["http://proxy/v1", "anthropic=http://proxy"]`` → ``{"*": ..., "anthropic": ...}``."""
    out: dict[str, str] = {}
    for item in items:
        provider, sep, url = item.partition("=")
        if sep and provider.strip().lower() in ("openai", "anthropic"):
            key, value = provider.strip().lower(), url.strip()
        else:
            key, value = "*", item.strip()
        if not value.lower().startswith(("http://", "https://")):
            raise UsageError(f"--base-url {item!r}: expected an http(s) URL, optionally prefixed openai= or anthropic=")
        out[key] = value
    return out


@functools.lru_cache(maxsize=1)
def anthropic_version() -> str:
    """The ``anthropic-version`` the installed Anthropic SDK sends (what replay will see),
    else the long-standing ``2023-06-01``."""
    try:
        from anthropic._constants import ANTHROPIC_API_VERSION
    except Exception:  # noqa: BLE001 - SDK absent or reorganized: use the documented default
        return ANTHROPIC_VERSION
    return str(ANTHROPIC_API_VERSION)


def _endpoint(api: str, base_urls: Mapping[str, str]) -> str:
    if api == "anthropic.messages":
        base = base_urls.get("anthropic") or base_urls.get("*") or ANTHROPIC_BASE
        return base.rstrip("/") + "/v1/messages"
    base = base_urls.get("openai") or base_urls.get("*") or OPENAI_BASE
    return base.rstrip("/") + _OPENAI_SUFFIX[api]


def _sse(api: str, chunks: list[Any]) -> bytes:
    out: list[str] = []
    for chunk in chunks:
        data = chunk if isinstance(chunk, str) else json.dumps(chunk, separators=(",", ":"), ensure_ascii=False)
        event = chunk.get("type") if isinstance(chunk, dict) and api != "openai.chat" else None
        out.append((f"event: {event}\n" if isinstance(event, str) else "") + f"data: {data}\n\n")
    if api.startswith("openai.chat") or api == "openai.completions":
        if not (chunks and chunks[-1] == "[DONE]"):
            out.append("data: [DONE]\n\n")
    return "".join(out).encode("utf-8")


def _llm(record: dict[str, Any], mapping: Mapping[str, str], base_urls: Mapping[str, str], notes: list[str], where: str) -> dict[str, Any]:
    request = _field(record, "request", mapping)
    if not isinstance(request, dict):
        raise _Bad(
            f"no request body object (looked at {_where('request', mapping)}; "
            "map it with --map request=PATH)"
        )
    body = dict(request)
    model = _field(record, "model", mapping)
    if "model" not in body and isinstance(model, str):
        body["model"] = model
    response, error = _one_outcome(record, mapping)
    status = _status(_field(record, "status", mapping))
    if response is _MISSING or response is None:
        if error is _MISSING or error is None:
            raise _Bad(
                f"no response (looked at {_where('response', mapping)}; map it with --map response=PATH)"
            )
        response = error if isinstance(error, dict) and "error" in error else {"error": error}
        if status == 200:
            status = 500
    url = _field(record, "url", mapping)
    if isinstance(url, str) and url.strip():
        url = url.strip()
        api = llm_api("POST", url) or ""
    else:
        api = _api_name(_field(record, "api", mapping), body, response) or ""
        if not api:
            raise _Bad(
                "cannot tell which LLM API this call used; add an 'api' or 'url' field "
                "(or map one with --map api=PATH / --map url=PATH)"
            )
        url = _endpoint(api, base_urls)
    headers = [("content-type", "application/json")]
    extra = _headers(_field(record, "headers", mapping), "headers")
    headers += [(k, v) for k, v in extra if k.lower() != "content-type"]
    if api == "anthropic.messages" and not any(k.lower() == "anthropic-version" for k, _ in headers):
        headers.append(("anthropic-version", anthropic_version()))
        note = (f"Anthropic calls without an anthropic-version header get {anthropic_version()} "
                "(what the installed anthropic SDK sends); log the header to keep yours")
        if note not in notes:
            notes.append(note)
    if isinstance(response, list):
        resp = response_record(status, [("content-type", "text/event-stream; charset=utf-8")], _sse(api, response))
    else:
        raw, ctype = _body(response, "response")
        resp = response_record(status, [("content-type", ctype or "text/plain; charset=utf-8")], raw or b"")
        if body.get("stream") and isinstance(response, dict):
            notes.append(f"{where}: a streamed call logged as one object is replayed as a plain JSON answer")
    data = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return http_entry("POST", url, headers, data, resp)


# -- tool and http records -------------------------------------------------------------------


def _tool(record: dict[str, Any], name: str, mapping: Mapping[str, str]) -> dict[str, Any]:
    request = _field(record, "request", mapping)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    if isinstance(request, dict) and request and set(request) <= {"args", "kwargs"}:
        args = list(request.get("args") or [])
        kwargs = dict(request.get("kwargs") or {})
    elif isinstance(request, dict):
        kwargs = request
    elif isinstance(request, list):
        args = request
    elif request is not _MISSING and request is not None:
        args = [request]
    result, error = _one_outcome(record, mapping)
    if error is not _MISSING and error is not None:
        if isinstance(error, dict):
            message = str(error.get("message", ""))
            etype = str(error.get("type") or "builtins.RuntimeError")
            eargs = error.get("args") if isinstance(error.get("args"), list) else [message]
        else:
            message, etype, eargs = str(error), "builtins.RuntimeError", [str(error)]
        response: dict[str, Any] = {"error": {"type": etype, "message": message, "args": eargs}}
    else:
        response = {"result": None if result is _MISSING else result}
    return tool_entry(name, args, kwargs, response)


def _http(record: dict[str, Any], mapping: Mapping[str, str]) -> dict[str, Any]:
    request = _field(record, "request", mapping)
    if not isinstance(request, dict):
        raise _Bad(f"no request object (looked at {_where('request', mapping)})")
    method = request.get("method", "GET")
    url = request.get("url", _field(record, "url", mapping))
    if not isinstance(method, str) or not (method.isascii() and method.isalpha()):
        raise _Bad(f"request.method must be an HTTP method, got {method!r}")
    if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
        raise _Bad(f"request.url must be an http(s) URL, got {url!r}")
    headers = _headers(request.get("headers"), "request.headers")
    body, ctype = _body(request.get("body"), "request.body")
    if ctype and not any(k.lower() == "content-type" for k, _ in headers):
        headers.append(("content-type", ctype))
    response = _field(record, "response", mapping)
    if isinstance(response, dict) and ("status" in response or "headers" in response):
        status = _status(response.get("status", 200))
        resp_headers = _headers(response.get("headers"), "response.headers")
        raw, rtype = _body(response.get("body"), "response.body")
    elif response is _MISSING:
        raise _Bad(f"no response (looked at {_where('response', mapping)})")
    else:
        status = _status(_field(record, "status", mapping))
        resp_headers = []
        raw, rtype = _body(response, "response")
    if rtype and not any(k.lower() == "content-type" for k, _ in resp_headers):
        resp_headers.append(("content-type", rtype))
    return http_entry(method, url, headers, body, response_record(status, resp_headers, raw or b""))


# -- records and files -----------------------------------------------------------------------


def parse_record(
    record: Any,
    *,
    mapping: Mapping[str, str],
    base_urls: Mapping[str, str],
    where: str,
    notes: list[str],
) -> dict[str, Any]:
    """One record → one entry. Raises ``_Bad`` (internal) with a message for the user."""
    if not isinstance(record, dict):
        raise _Bad(f"expected a JSON object, got {type(record).__name__}")
    kind = _field(record, "kind", mapping)
    tool = _field(record, "tool", mapping)
    request = _field(record, "request", mapping)
    if kind is _MISSING or kind is None:
        if isinstance(tool, str) and _field(record, "model", mapping) is _MISSING:
            kind = "tool"
        elif isinstance(request, dict) and "url" in request and "method" in request:
            kind = "http"
        else:
            kind = "llm"
    kind = str(kind).lower()
    if kind in ("tool", "tool_call", "function", "function_call"):
        if not isinstance(tool, str) or not tool:
            raise _Bad(f"a tool record needs the tool's name (looked at {_where('tool', mapping)})")
        entry = _tool(record, tool, mapping)
    elif kind == "http":
        entry = _http(record, mapping)
    elif kind in ("llm", "chat", "completion", "generation", "embedding", "llm_call"):
        entry = _llm(record, mapping, base_urls, notes, where)
    else:
        raise _Bad(f"unknown kind {kind!r} (expected llm, tool or http)")
    stamp = _field(record, "timestamp", mapping)
    recorded_at = iso_timestamp(stamp) if stamp is not _MISSING else None
    if stamp is not _MISSING and stamp is not None and recorded_at is None:
        raise _Bad(f"timestamp {stamp!r} is not a date and time")
    if recorded_at:
        entry["recorded_at"] = recorded_at
    duration = _field(record, "duration", mapping)
    if isinstance(duration, (int, float)) and not isinstance(duration, bool) and duration >= 0:
        entry["duration_ms"] = int(round(duration))
    entry.setdefault("meta", {})["source"] = where
    return entry


def read_jsonl_files(
    paths: Sequence[Path],
    *,
    mapping: Mapping[str, str],
    base_urls: Mapping[str, str],
) -> tuple[list[dict[str, Any]], list[str]]:
    """All entries of ``paths`` in file and line order, and notes for the user; the first
    malformed line raises CassetteFormatError ``file:line: message``."""
    entries: list[dict[str, Any]] = []
    notes: list[str] = []
    undated = 0
    for path in paths:
        source = path.name
        try:
            fh = path.open("rb")
        except OSError as exc:
            raise format_error(str(path), None, f"cannot read ({exc.strerror or exc})") from None
        with fh:
            for lineno, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                where = f"{source}:{lineno}"
                try:
                    text = raw.rstrip(b"\r\n")
                    record = loads_bounded(text.lstrip(b"\xef\xbb\xbf") if lineno == 1 else text, what="the line")
                except ValueError as exc:
                    msg = str(exc).replace("the line is not valid JSON: line 1 ", "not valid JSON: ")
                    raise format_error(source, lineno, msg) from None
                try:
                    entry = parse_record(record, mapping=mapping, base_urls=base_urls, where=where, notes=notes)
                except _Bad as exc:
                    raise format_error(source, lineno, str(exc)) from None
                except (ValueError, TypeError, RecursionError) as exc:
                    raise format_error(source, lineno, f"cannot be read ({exc})") from None
                if "recorded_at" not in entry:
                    undated += 1
                entries.append(entry)
    if undated:
        notes.append(f"{undated} record(s) carry no timestamp: their age is unknown to `casstore check`")
    if len(notes) > 20:
        notes = notes[:20] + [f"... and {len(notes) - 20} more notes"]
    return entries, notes
