"""Call identity (pure, no I/O).

The identity of a call is the sha256 (64 lowercase hex) of the canonical JSON of its
*identity document*: the normalized, un-redacted request with everything volatile left
out. Two calls with the same identity are the same call as far as replay is concerned.

Identity documents (rule 2, :data:`IDENTITY_RULE`), one shape per kind::

    http  {"kind": "http", "target": "POST https://host/path?a=1",
           "headers": {...non-volatile...}, "body": <canonical body>}
    llm   {"kind": "llm", "api": "openai.chat", "params": {"deployment": ...},
           "headers": {"anthropic-version": ...}, "input": {<body, tools hashed>}}
    tool  {"kind": "tool", "target": "<tool name>", "args": [...], "kwargs": {...}}

Normalization rules:

* numbers are canonicalized (``0 == 0.0``, ``1e2 == 100``), keys sorted, whitespace
  ignored for JSON bodies (canonical JSON does both);
* the target is ``METHOD scheme://host[:port]/path`` plus the non-volatile query
  parameters, sorted; user info and fragments are dropped; percent-encoding of the path
  normalized (RFC 3986); presigned-URL parameters (``X-Amz-*``, ``X-Goog-*``) dropped;
* volatile headers never count: auth and API keys, cookies, dates, request and
  idempotency ids, tracing headers, and everything a client or SDK adds on its own —
  ``accept``, ``accept-encoding``, ``user-agent``, ``connection``, ``content-length``,
  ``host``, ``expect``, AWS SigV4 and SDK headers (``x-amz-date``,
  ``x-amz-security-token``, ``x-amz-content-sha256``, ``amz-sdk-*``), SDK telemetry
  (``x-stainless-*``, ``x-goog-api-client``) — so one call is one identity through
  httpx, requests, aiohttp, urllib3 or http.client;
* recognized LLM operations — OpenAI chat completions, completions, responses and
  embeddings (and any OpenAI-compatible server or Azure OpenAI deployment), Anthropic
  messages, Amazon Bedrock converse / converse-stream / invoke-model(-with-response-stream),
  Google Gemini generateContent / streamGenerateContent — are identified by the operation
  (``api``), its ``params`` (the Azure deployment, the Bedrock or Gemini model, the query
  parameters) and every body field except ``None`` values, never by the host or the path
  prefix: recorded through one base URL, they replay wherever the SDK points. ``stream``
  becomes a boolean (true for the streaming operations) and tool schemas are replaced by
  their sha256;
* a user normalizer ``fn(document) -> document | None`` may rewrite the document last.

Rule 1 (entries without ``identity_rule``, recorded before rule 2) kept client default
headers such as ``accept``, the host and path of LLM calls (as ``target``) and knew only
the OpenAI and Anthropic endpoints. It is kept, frozen, so that those cassettes keep
replaying: ``http_identity(..., rule=1)``.

A second, *display* form (:func:`describe_http`, ``for_identity=False``) keeps numbers
as sent and tool schemas in full; it is only used to explain a near miss.
"""

from __future__ import annotations

import base64
import copy
import functools
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from .canonical import canonical_json

_orjson: Any
try:  # the same canonical bytes, written ~5x faster (see _dumps_checked)
    import orjson as _orjson
except ImportError:  # pragma: no cover - a dependency, but casstore works without it
    _orjson = None

__all__ = [
    "IDENTITY_RULE",
    "RULES",
    "CallIdentity",
    "Normalizer",
    "canonical_value",
    "digest_document",
    "http_identity",
    "http_identity_lowered",
    "tool_identity",
    "normalize_http",
    "normalize_tool",
    "llm_api",
    "recognize_llm",
    "split_url",
    "parse_body",
    "jsonable",
    "diff_documents",
    "is_volatile_header",
    "is_volatile_query_param",
]

Normalizer = Callable[[dict[str, Any]], "dict[str, Any] | None"]

# -- volatility rules ---------------------------------------------------------------
#
# Two identity rules exist. Rule 1 is the rule of the first cassettes (kept, frozen, so that
# they keep replaying: entries without an ``identity_rule`` field were recorded under it).
# Rule 2 (:data:`IDENTITY_RULE`, every new entry) also leaves out the headers clients add
# on their own (``accept``, AWS SigV4 and SDK headers, ...) so that a call recorded with one
# client replays through another, and identifies recognized LLM operations without the host.

IDENTITY_RULE = 2
RULES = (1, 2)

_VOLATILE_HEADERS_V1 = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "x-api-key",
        "api-key",
        "apikey",
        "x-goog-api-key",
        "user-agent",
        "date",
        "x-request-id",
        "request-id",
        "x-client-request-id",
        "x-correlation-id",
        "idempotency-key",
        "x-idempotency-key",
        "content-length",
        "host",
        "connection",
        "keep-alive",
        "accept-encoding",
        "te",
        "transfer-encoding",
        "traceparent",
        "tracestate",
        "baggage",
        "sentry-trace",
        "x-amzn-trace-id",
        "x-amz-date",
        "x-amz-content-sha256",
        "amz-sdk-invocation-id",
        "amz-sdk-request",
    }
)
_VOLATILE_HEADER_PREFIXES_V1 = ("x-stainless-", "x-b3-", "x-datadog-", "x-amz-security")
# rule 2: what clients and SDKs add on their own, whatever the call
_VOLATILE_HEADERS = _VOLATILE_HEADERS_V1 | {
    "accept",
    "expect",
    "upgrade",
    "proxy-connection",
    "x-amz-user-agent",
    "x-goog-api-client",
    "x-goog-user-project",
}
_VOLATILE_HEADER_PREFIXES = (
    *_VOLATILE_HEADER_PREFIXES_V1,
    "amz-sdk-",
    "x-amz-sdk-",
    "x-amz-checksum-",
    "x-amz-content-",
    "x-forwarded-",
)
_VOLATILE_HEADER_WORDS = ("token", "secret", "api-key", "apikey", "password", "auth")

# Headers that change what an LLM endpoint does; every other header is left out.
_LLM_HEADERS = frozenset({"anthropic-version", "anthropic-beta", "openai-beta"})
_LLM_HEADER_PREFIXES = ("x-amzn-bedrock-",)  # rule 2: Bedrock guardrails, trace, latency tier

_VOLATILE_QUERY = frozenset(
    {
        "api_key",
        "apikey",
        "api-key",
        "key",
        "access_token",
        "token",
        "auth",
        "sig",
        "signature",
        "timestamp",
        "ts",
        "_",
        "nonce",
        "cachebuster",
        "x-amz-signature",
        "x-amz-date",
        "x-amz-credential",
        "x-amz-security-token",
    }
)
# rule 2: every presigned-URL parameter (AWS SigV4, Google signed URLs)
_VOLATILE_QUERY_PREFIXES = ("x-amz-", "x-goog-")

# path suffix -> api name; POST only. Order matters: the first suffix that matches wins.
_LLM_ENDPOINTS: tuple[tuple[str, str], ...] = (
    ("/chat/completions", "openai.chat"),
    ("/completions", "openai.completions"),
    ("/responses", "openai.responses"),
    ("/embeddings", "openai.embeddings"),
    ("/v1/messages", "anthropic.messages"),
)
# rule 2: operations whose path carries a parameter (POST only)
_AZURE_DEPLOYMENT = re.compile(r"/openai/deployments/([^/]+)/")
_BEDROCK = re.compile(r"/model/([^/]+)/(converse|converse-stream|invoke|invoke-with-response-stream)$")
_BEDROCK_APIS = {
    "converse": "bedrock.converse",
    "converse-stream": "bedrock.converse-stream",
    "invoke": "bedrock.invoke-model",
    "invoke-with-response-stream": "bedrock.invoke-model-stream",
}
_GEMINI = re.compile(r"/(?:models|tunedModels)/([^/:]+):(generateContent|streamGenerateContent)$")
_STREAMING_APIS = frozenset({"bedrock.converse-stream", "bedrock.invoke-model-stream", "gemini.streamGenerateContent"})
_TOOL_FIELDS = ("tools", "functions")


def is_volatile_header(name: str, rule: int = IDENTITY_RULE) -> bool:
    """True for headers that never count towards identity (auth, ids, telemetry, client defaults ...)."""
    n = name.lower()
    if rule == 1:
        if n in _VOLATILE_HEADERS_V1 or n.startswith(_VOLATILE_HEADER_PREFIXES_V1):
            return True
    elif n in _VOLATILE_HEADERS or n.startswith(_VOLATILE_HEADER_PREFIXES):
        return True
    return any(w in n for w in _VOLATILE_HEADER_WORDS)


_volatile_header = functools.lru_cache(maxsize=1024)(is_volatile_header)  # rule 2 (one argument: cheaper key)
_volatile_header_v1 = functools.lru_cache(maxsize=1024)(functools.partial(is_volatile_header, rule=1))


def is_volatile_query_param(name: str, rule: int = IDENTITY_RULE) -> bool:
    n = name.lower()
    return n in _VOLATILE_QUERY or (rule != 1 and n.startswith(_VOLATILE_QUERY_PREFIXES))


# -- values -------------------------------------------------------------------------


def canonical_value(value: Any) -> Any:
    """Deep copy of a JSON-like value with numbers canonicalized.

    Integral floats become ints (``0.0 -> 0``, ``-0.0 -> 0``), non-finite floats become
    the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``; tuples become lists.
    """
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if value.is_integer():
            return int(value)
        return value
    if isinstance(value, Mapping):
        return {str(k): canonical_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical_value(v) for v in value]
    return jsonable(value)


def jsonable(value: Any) -> Any:
    """A JSON-compatible rendering of an arbitrary Python value (tool args and results).

    dataclasses and pydantic models become dicts, sets sorted lists, bytes
    ``{"base64": ...}``; anything else without a JSON form becomes
    ``{"repr": type name}`` (never the object's repr, which may hold memory addresses).
    """
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [jsonable(v) for v in value]
        return sorted(items, key=lambda v: canonical_json(canonical_value(v)))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    dump = getattr(value, "model_dump", None)  # pydantic v2
    if callable(dump):
        try:
            return jsonable(dump(mode="json"))
        except Exception:  # noqa: BLE001 - fall through to the generic forms
            pass
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    isoformat = getattr(value, "isoformat", None)  # datetime, date, time
    if callable(isoformat):
        return isoformat()
    import enum

    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    import pathlib

    if isinstance(value, pathlib.PurePath):
        return value.as_posix()
    return {"repr": f"{type(value).__module__}.{type(value).__qualname__}"}


def digest_document(document: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON of an identity document."""
    return _digest_canonical(canonical_value(document))


def _digest_canonical(document: Mapping[str, Any]) -> str:
    """sha256 hex of a document whose numbers are already canonical (serialized once)."""
    return hashlib.sha256(canonical_json(document)).hexdigest()


# -- URLs and bodies ----------------------------------------------------------------


_PCT = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _normalize_path(path: str) -> str:
    """RFC 3986 normalization of percent-encoding: unreserved characters decoded, the
    others' hex upper-cased (``/a%7Eb%2f`` -> ``/a~b%2F``); nothing else changes."""
    if "%" not in path:
        return path

    def fix(m: re.Match[str]) -> str:
        ch = chr(int(m.group(1), 16))
        return ch if ch in _UNRESERVED else "%" + m.group(1).upper()

    return _PCT.sub(fix, path)


def split_url(url: str, rule: int = IDENTITY_RULE) -> tuple[str, list[tuple[str, str]]]:
    """``(scheme://host[:port]/path, sorted non-volatile query pairs)``."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None and not ((scheme == "http" and port == 80) or (scheme == "https" and port == 443)):
        host = f"{host}:{port}"
    path = parts.path or "/"
    if rule != 1:
        path = _normalize_path(path)
    query = [
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if not is_volatile_query_param(k, rule)
    ]
    query.sort()
    return f"{scheme}://{host}{path}", query


def _target(method: str, url: str, rule: int = IDENTITY_RULE) -> str:
    base, query = split_url(url, rule)
    return f"{method.upper()} {base}" + (f"?{urlencode(query)}" if query else "")


def recognize_llm(method: str, url: str) -> tuple[str, dict[str, str]] | None:
    """``(api, params)`` of a recognized LLM operation (rule 2), or ``None``.

    ``params`` are what the path and the query say about the operation besides the host:
    the Azure deployment, the Bedrock or Gemini model, and the non-volatile query
    parameters (``api-version``, ``alt``, ``beta``, ...). Recognition is by the end of the
    path, so any base URL (a gateway, a proxy, a local server) gives the same answer.
    """
    if method.upper() != "POST":
        return None
    parts = urlsplit(url)
    path = _normalize_path(parts.path.rstrip("/"))
    params: dict[str, str] = {}
    api: str | None = None
    m = _BEDROCK.search(path)
    if m is not None:
        api, params["model"] = _BEDROCK_APIS[m.group(2)], unquote(m.group(1))
    elif (m := _GEMINI.search(path)) is not None:
        api, params["model"] = f"gemini.{m.group(2)}", unquote(m.group(1))
    else:
        for suffix, name in _LLM_ENDPOINTS:
            if path.endswith(suffix):
                api = name
                break
        if api is not None and api.startswith("openai.") and (d := _AZURE_DEPLOYMENT.search(path + "/")):
            params["deployment"] = unquote(d.group(1))
    if api is None:
        return None
    for k, v in parse_qsl(parts.query, keep_blank_values=True):
        if not is_volatile_query_param(k):
            params[k] = f"{params[k]},{v}" if k in params else v
    return api, params


_NO_PARAMS: dict[str, str] = {}  # shared, never mutated
_Line = tuple["str | None", dict[str, str], str]


@functools.lru_cache(maxsize=512)
def _request_line_v1(method: str, url: str) -> _Line:
    """``(llm api, {}, target)`` of a request line under rule 1."""
    return _llm_api_v1(method, url), _NO_PARAMS, _target(method, url, 1)


@functools.lru_cache(maxsize=512)
def _request_line(method: str, url: str) -> _Line:
    """``(llm api, operation params, target)`` of a request line under rule 2; most calls
    of a run share a few URLs. The params dict is shared: callers copy it."""
    found = recognize_llm(method, url)
    target = _target(method, url)
    return (found[0], found[1], target) if found is not None else (None, _NO_PARAMS, target)


def _boundary(content_type: str) -> str | None:
    m = re.search(r'boundary="?([^";]+)"?', content_type, re.IGNORECASE)
    return m.group(1) if m else None


def _as_bytes(body: bytes | str | None) -> bytes:
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")
    return bytes(body)


def parse_body(body: bytes | str | None, content_type: str) -> tuple[str, Any]:
    """Classify a body: ``("empty", None)``, ``("json", value)``, ``("form", pairs)``,
    ``("text", str)`` or ``("bytes", raw)``.

    JSON is recognized by a JSON content type, or by content when no content type is
    given and the text parses as JSON.
    """
    return _parse_body(body, content_type, json.loads)


class _NotOrjsonSafe(Exception):
    """A parsed float orjson would write differently from ``repr`` (never escapes this module)."""


def _canonical_float(text: str) -> Any:
    """A JSON number with a fraction or exponent, as :func:`canonical_value` renders it."""
    value = float(text)
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer():
        return int(value)
    return value


_CHECKED_FLOATS: dict[str, Any] = {}  # number text -> its canonical value, checked (bounded)


def _canonical_float_checked(text: str) -> Any:
    """:func:`_canonical_float`, refusing a float whose orjson form is not its ``repr``
    (orjson writes ``1e-5`` where json writes ``1e-05``)."""
    value = _CHECKED_FLOATS.get(text)
    if value is not None:  # the same few settings (temperature, top_p) in every request
        return value
    value = _canonical_float(text)
    if type(value) is float and _orjson is not None and _orjson.dumps(value) != repr(value).encode("ascii"):
        raise _NotOrjsonSafe
    if len(_CHECKED_FLOATS) < 4096:
        _CHECKED_FLOATS[text] = value
    return value


_CANONICAL_CONSTANTS = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity"}


def _canonical_loads(parse_float: Callable[[str], Any]) -> Callable[[str], Any]:
    decoder = json.JSONDecoder(parse_float=parse_float, parse_constant=_CANONICAL_CONSTANTS.__getitem__)

    def loads(text: str) -> Any:
        """``canonical_value(json.loads(text))`` in one pass: numbers canonicalized while parsing."""
        if text.startswith("\ufeff"):  # what json.loads refuses
            raise ValueError("Unexpected UTF-8 BOM")
        return decoder.decode(text)

    return loads


def _dumps_checked(value: Any) -> bytes:
    """:func:`canonical_json` of a value parsed by :data:`_FAST` (plain dict, list, str,
    int, bool, None and floats whose orjson form is their ``repr``), with orjson.

    orjson sorts keys in code point order and escapes strings as ``json.dumps(...,
    ensure_ascii=False)`` does; what it cannot write the same way (integers beyond 64 bits,
    nesting deeper than 255, lone surrogates) it refuses, and the standard path writes it.
    """
    try:
        return _orjson.dumps(value, option=_orjson.OPT_SORT_KEYS)  # type: ignore[union-attr]
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return canonical_json(value)


# (loads, dumps) of the identity form without a normalizer: numbers canonical as parsed.
_Codec = tuple[Callable[[str], Any], Callable[[Any], bytes]]
_PLAIN: _Codec = (_canonical_loads(_canonical_float), canonical_json)
_FAST: _Codec | None = (_canonical_loads(_canonical_float_checked), _dumps_checked) if _orjson is not None else None


def _parse_body(body: bytes | str | None, content_type: str, loads: Callable[[str], Any]) -> tuple[str, Any]:
    raw = _as_bytes(body)
    if not raw:
        return "empty", None
    ct = content_type.lower()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes", raw
    looks_json = "json" in ct or (not ct and text.lstrip()[:1] in ("{", "["))
    if looks_json:
        try:
            return "json", loads(text)
        except (ValueError, RecursionError):
            pass
    if "application/x-www-form-urlencoded" in ct:
        return "form", sorted(parse_qsl(text, keep_blank_values=True))
    return "text", text


def _body_document(body: bytes | str | None, content_type: str, loads: Callable[[str], Any] = json.loads) -> Any:
    raw = _as_bytes(body)
    if "multipart/" in content_type.lower():
        boundary = _boundary(content_type)
        if boundary:  # random per request: never part of the identity
            raw = raw.replace(boundary.encode("utf-8", "replace"), b"BOUNDARY")
    kind, value = _parse_body(raw, content_type, loads)
    if kind == "empty":
        return None
    if kind == "json":
        return {"json": value}
    if kind == "form":
        return {"form": [list(p) for p in value]}
    if kind == "text":
        return {"text": value}
    return {"sha256": hashlib.sha256(value).hexdigest(), "length": len(value)}


def _header_items(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [(str(k).lower(), str(v)) for k, v in items]


def llm_api(method: str, url: str) -> str | None:
    """The recognized LLM API of a request (``"openai.chat"``, ``"bedrock.converse"``, ...), or ``None``."""
    found = recognize_llm(method, url)
    return found[0] if found is not None else None


def _llm_api_v1(method: str, url: str) -> str | None:
    """Rule 1's recognition: OpenAI and Anthropic path suffixes only."""
    if method.upper() != "POST":
        return None
    path = urlsplit(url).path.rstrip("/")
    for suffix, api in _LLM_ENDPOINTS:
        if path.endswith(suffix):
            return api
    return None


def _tools_digest(tools: Any, dumps: Callable[[Any], bytes] | None = None) -> str:
    if dumps is not None:  # parsed canonically already
        return "sha256:" + hashlib.sha256(dumps(tools)).hexdigest()
    return "sha256:" + hashlib.sha256(canonical_json(canonical_value(tools))).hexdigest()


def _llm_input(
    body: dict[str, Any], *, for_identity: bool, dumps: Callable[[Any], bytes] | None = None, stream: bool = False
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in body.items():
        if value is None:
            continue  # an explicit null is the provider default, same as absent
        if key in _TOOL_FIELDS and for_identity:
            out[key] = _tools_digest(value, dumps)
        else:
            out[key] = value
    out["stream"] = stream or bool(body.get("stream"))
    return out


# -- documents ----------------------------------------------------------------------


@dataclass(frozen=True)
class CallIdentity:
    """The identity of one call: ``identity`` is what the cassette stores and looks up.

    ``target`` is the request line with the host (``POST https://host/path``), shown in
    cassettes and miss explanations even where the identity leaves the host out; ``rule``
    is the identity rule that computed it (entries store it as ``identity_rule``).
    """

    identity: str
    kind: str
    target: str
    document: dict[str, Any]
    rule: int = IDENTITY_RULE

    @property
    def models(self) -> list[str]:
        inp = self.document.get("input")
        if isinstance(inp, dict) and isinstance(inp.get("model"), str):
            return [inp["model"]]
        params = self.document.get("params")
        if isinstance(params, dict) and isinstance(params.get("model"), str):
            return [params["model"]]
        return []

    def entry_fields(self) -> dict[str, Any]:
        """The fields every cassette entry of this call starts with (one place for all writers)."""
        return {"identity": self.identity, "identity_rule": self.rule, "kind": self.kind, "target": self.target}


def _apply(document: dict[str, Any], normalizer: Normalizer | None, *, for_identity: bool) -> dict[str, Any]:
    if normalizer is not None:
        changed = normalizer(copy.deepcopy(document))
        if changed is not None:
            document = dict(changed)
    return canonical_value(document) if for_identity else document


def normalize_http(
    method: str,
    url: str,
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
    body: bytes | str | None,
    *,
    normalizer: Normalizer | None = None,
    for_identity: bool = True,
    rule: int = IDENTITY_RULE,
) -> dict[str, Any]:
    """The identity document of an HTTP request (``kind`` is ``"llm"`` for LLM endpoints).

    With ``for_identity=False`` the display form: numbers as sent, tool schemas in full.
    """
    items = _header_items(headers)
    if for_identity and normalizer is None:
        return _normalize_http(method, url, items, body, None, True, _PLAIN, rule)
    return _normalize_http(method, url, items, body, normalizer, for_identity, None, rule)


def _line(method: str, url: str, rule: int) -> _Line:
    """``(llm api or None, operation params, target)`` of a request line under a rule."""
    if type(method) is str and type(url) is str:
        return _request_line(method, url) if rule != 1 else _request_line_v1(method, url)
    # not cached: an unhashable argument fails as it always has
    return _request_line.__wrapped__(method, url) if rule != 1 else _request_line_v1.__wrapped__(method, url)


def _llm_header_names(api: str, hdrs: dict[str, str]) -> frozenset[str]:
    names = _LLM_HEADERS.intersection(hdrs)
    if api.startswith("bedrock."):
        names = names.union(k for k in hdrs if k.startswith(_LLM_HEADER_PREFIXES))
    return names


def _normalize_http(
    method: str,
    url: str,
    items: list[tuple[str, str]],
    body: bytes | str | None,
    normalizer: Normalizer | None,
    for_identity: bool,
    codec: _Codec | None,
    rule: int = IDENTITY_RULE,
    line: tuple[str | None, dict[str, str], str] | None = None,
) -> dict[str, Any]:
    """:func:`normalize_http` of header pairs whose names are already lower-cased strings.

    With a ``codec`` (identity form, no normalizer) the document is built canonical from
    the start: numbers are canonicalized while the body is parsed, so no
    :func:`canonical_value` copy is needed. Without one (a normalizer, or the display
    form) the body is parsed as sent and the normalizer sees the numbers as sent.
    """
    loads, dumps = codec if codec is not None else (json.loads, None)
    hdrs = dict(items)
    content_type = hdrs.get("content-type", "")
    api, params, target = line if line is not None else _line(method, url, rule)
    if api is not None:
        kind, parsed = _parse_body(body, content_type, loads)
        if kind == "json" and isinstance(parsed, dict):
            doc: dict[str, Any]
            if rule == 1:
                doc = {
                    "kind": "llm",
                    "target": target,
                    "api": api,
                    "headers": {k: hdrs[k] for k in sorted(_LLM_HEADERS.intersection(hdrs))},
                    "input": _llm_input(parsed, for_identity=for_identity, dumps=dumps),
                }
            else:  # the operation and its parameters, never the host or the path prefix
                doc = {
                    "kind": "llm",
                    "api": api,
                    "params": dict(params),
                    "headers": {k: hdrs[k] for k in sorted(_llm_header_names(api, hdrs))},
                    "input": _llm_input(
                        parsed, for_identity=for_identity, dumps=dumps, stream=api in _STREAMING_APIS
                    ),
                }
            return doc if codec is not None else _apply(doc, normalizer, for_identity=for_identity)
    kept: dict[str, str] = {}
    volatile = _volatile_header if rule != 1 else _volatile_header_v1
    for k, v in items:
        if volatile(k):
            continue
        if k == "content-type" and "multipart/" in v.lower():
            boundary = _boundary(v)
            if boundary:
                v = v.replace(boundary, "BOUNDARY")
        kept[k] = f"{kept[k]}, {v}" if k in kept else v
    doc = {
        "kind": "http",
        "target": target,
        "headers": kept,
        "body": _body_document(body, content_type, loads),
    }
    return doc if codec is not None else _apply(doc, normalizer, for_identity=for_identity)


def http_identity(
    method: str,
    url: str,
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
    body: bytes | str | None,
    *,
    normalizer: Normalizer | None = None,
    rule: int = IDENTITY_RULE,
) -> CallIdentity:
    """Identity of an HTTP request. ``headers`` may be a mapping or (name, value) pairs.

    This is the one identity function of casstore: every interception adapter (httpx,
    requests, aiohttp, urllib3, http.client) and every importer computes identities
    through it (or :func:`http_identity_lowered`), so a call recorded by one client is
    the same call through any other. ``rule`` selects an older identity rule (only to
    look up entries recorded under it).
    """
    return http_identity_lowered(method, url, _header_items(headers), body, normalizer=normalizer, rule=rule)


def http_identity_lowered(
    method: str,
    url: str,
    items: list[tuple[str, str]],
    body: bytes | str | None,
    *,
    normalizer: Normalizer | None = None,
    rule: int = IDENTITY_RULE,
) -> CallIdentity:
    """:func:`http_identity` of ``(name, value)`` string pairs with lower-cased names."""
    if rule not in RULES:
        raise ValueError(f"unknown identity rule {rule!r} (known: {', '.join(map(str, RULES))})")
    line = _line(method, url, rule)
    if normalizer is not None:
        doc = _normalize_http(method, url, items, body, normalizer, True, None, rule, line)
        data = canonical_json(doc)  # _apply canonicalized it
    else:
        try:
            if _FAST is None:
                raise _NotOrjsonSafe
            doc = _normalize_http(method, url, items, body, None, True, _FAST, rule, line)
            data = _dumps_checked(doc)
        except _NotOrjsonSafe:  # a float orjson would write differently: the standard path
            doc = _normalize_http(method, url, items, body, None, True, _PLAIN, rule, line)
            data = canonical_json(doc)
    kind = doc.get("kind", "http")
    # the target always shows the host; rule 2 LLM documents leave it out
    target = doc.get("target") if kind == "http" or rule == 1 else line[2]
    if not isinstance(target, str):
        target = line[2]
    # CallIdentity(...) without the frozen dataclass's object.__setattr__ calls
    ident: CallIdentity = object.__new__(CallIdentity)
    ident.__dict__.update(
        identity=hashlib.sha256(data).hexdigest(),
        kind=str(kind),
        target=target,
        document=doc,
        rule=rule,
    )
    return ident


def normalize_tool(
    name: str,
    args: Iterable[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    normalizer: Normalizer | None = None,
    for_identity: bool = True,
) -> dict[str, Any]:
    doc = {
        "kind": "tool",
        "target": name,
        "args": jsonable(list(args)),
        "kwargs": jsonable(dict(kwargs or {})),
    }
    return _apply(doc, normalizer, for_identity=for_identity)


def tool_identity(
    name: str,
    args: Iterable[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    normalizer: Normalizer | None = None,
) -> CallIdentity:
    """Identity of a tool/function call: its name and JSON-rendered arguments."""
    doc = normalize_tool(name, args, kwargs, normalizer=normalizer)
    return CallIdentity(
        identity=_digest_canonical(doc), kind="tool", target=name, document=doc
    )


# -- explaining a near miss ---------------------------------------------------------


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for k in sorted(value):
            _flatten(value[k], f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            _flatten(v, f"{prefix}[{i}]", out)
    else:
        out[prefix] = value


def _show(value: Any, width: int = 60) -> str:
    if value is _ABSENT:
        return "(absent)"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True) if not isinstance(value, float) else repr(value)
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text


_ABSENT = object()


def diff_documents(recorded: Mapping[str, Any], current: Mapping[str, Any], *, limit: int = 12) -> list[str]:
    """Field-level differences ``"path: old → new"`` between two display documents.

    Paths drop the ``input.`` prefix of LLM documents, so a changed setting reads
    ``temperature: 0.0 → 0.7``. Values equal after number canonicalization do not count.
    """
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    _flatten(dict(recorded), "", a)
    _flatten(dict(current), "", b)
    for mine, other in ((a, b), (b, a)):  # an empty {} / [] against filled ones is not news
        for path in [p for p, v in mine.items() if v in ({}, []) and p not in other]:
            if any(q.startswith((path + ".", path + "[")) for q in other):
                del mine[path]
    lines: list[str] = []
    for path in sorted(set(a) | set(b), key=_path_order):
        old = a.get(path, _ABSENT)
        new = b.get(path, _ABSENT)
        if old is not _ABSENT and new is not _ABSENT and canonical_value(old) == canonical_value(new):
            if type(canonical_value(old)) is type(canonical_value(new)):
                continue
        shown = path[6:] if path.startswith("input.") else path
        lines.append(f"{shown}: {_show(old)} → {_show(new)}")
    if len(lines) > limit:
        more = len(lines) - limit
        lines = lines[:limit] + [f"… and {more} more difference{'s' if more > 1 else ''}"]
    return lines


def _path_order(path: str) -> tuple[int, str]:
    # kind/target first, then the model and settings, message contents last.
    rank = 0 if path in ("kind", "target", "api") else 2 if "messages" in path or "input.input" in path else 1
    return rank, path
