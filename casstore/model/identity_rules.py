"""Identity rules (pure, no I/O): what never counts towards a call's identity, and what a
request line is: the volatile headers and query parameters, URL normalization
(:func:`split_url`) and the recognized LLM operations (:func:`recognize_llm`).

Rules 1 and 2 stay frozen so that their cassettes keep replaying; rule 3
(:data:`IDENTITY_RULE`, every new entry) is rule 2 plus the credential names of
``NEXT_IDENTITY_RULE`` and the sealed values of :mod:`casstore.model.identity`.
"""

from __future__ import annotations

import functools
import re
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from .credentials import identity_names, identity_params

__all__ = [
    "IDENTITY_RULE",
    "RULES",
    "is_volatile_header",
    "is_volatile_query_param",
    "llm_api",
    "recognize_llm",
    "split_url",
]

# -- volatility rules ---------------------------------------------------------------
IDENTITY_RULE = 3
RULES = (1, 2, 3)

# the credentials of model/credentials.py that rule 1 left out, and ids, tracing, transport
_VOLATILE_HEADERS_V1 = identity_names(1) | frozenset(
    {
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
_VOLATILE_HEADERS = _VOLATILE_HEADERS_V1 | identity_names(2) | {
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
# rule 3: the credential names added since (model/credentials.py, NEXT_IDENTITY_RULE)
_VOLATILE_HEADERS_V3 = _VOLATILE_HEADERS | identity_names(3)
_VOLATILE_HEADER_WORDS = ("token", "secret", "api-key", "apikey", "password", "auth")

# Headers that change what an LLM endpoint does; every other header is left out.
_LLM_HEADERS = frozenset({"anthropic-version", "anthropic-beta", "openai-beta"})
_LLM_HEADER_PREFIXES = ("x-amzn-bedrock-",)  # rule 2: Bedrock guardrails, trace, latency tier

# the credential parameters of model/credentials.py that rule 1 left out, and cache busters
_VOLATILE_QUERY = identity_params(1) | frozenset({"timestamp", "ts", "_", "nonce", "cachebuster", "x-amz-date"})
# rule 2: every presigned-URL parameter (AWS SigV4, Google signed URLs)
_VOLATILE_QUERY_PREFIXES = ("x-amz-", "x-goog-")
_VOLATILE_QUERY_V2 = _VOLATILE_QUERY | identity_params(2)
_VOLATILE_QUERY_V3 = _VOLATILE_QUERY_V2 | identity_params(3)

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
    elif n in (_VOLATILE_HEADERS if rule == 2 else _VOLATILE_HEADERS_V3) or n.startswith(_VOLATILE_HEADER_PREFIXES):
        return True
    return any(w in n for w in _VOLATILE_HEADER_WORDS)


_volatile_header = functools.lru_cache(maxsize=1024)(is_volatile_header)  # rule 3 (one argument: cheaper key)
_volatile_header_v2 = functools.lru_cache(maxsize=1024)(functools.partial(is_volatile_header, rule=2))
_volatile_header_v1 = functools.lru_cache(maxsize=1024)(functools.partial(is_volatile_header, rule=1))


def is_volatile_query_param(name: str, rule: int = IDENTITY_RULE) -> bool:
    n = name.lower()
    if rule == 1:
        return n in _VOLATILE_QUERY
    return n in (_VOLATILE_QUERY_V2 if rule == 2 else _VOLATILE_QUERY_V3) or n.startswith(_VOLATILE_QUERY_PREFIXES)


# -- URLs and request lines ---------------------------------------------------------


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


def recognize_llm(method: str, url: str, rule: int = IDENTITY_RULE) -> tuple[str, dict[str, str]] | None:
    """``(api, params)`` of a recognized LLM operation (rules 2 and 3), or ``None``.

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
        if not is_volatile_query_param(k, rule):
            params[k] = f"{params[k]},{v}" if k in params else v
    return api, params


_NO_PARAMS: dict[str, str] = {}  # shared, never mutated
_Line = tuple["str | None", dict[str, str], str]


@functools.lru_cache(maxsize=512)
def _request_line_v1(method: str, url: str) -> _Line:
    """``(llm api, {}, target)`` of a request line under rule 1."""
    return _llm_api_v1(method, url), _NO_PARAMS, _target(method, url, 1)


def _request_line_of(rule: int) -> functools._lru_cache_wrapper[_Line]:
    """``(llm api, operation params, target)`` of a request line under rule 2 or 3, cached:
    most calls of a run share a few URLs. The params dict is shared: callers copy it."""

    @functools.lru_cache(maxsize=512)
    def line(method: str, url: str) -> _Line:
        found = recognize_llm(method, url, rule)
        target = _target(method, url, rule)
        return (found[0], found[1], target) if found is not None else (None, _NO_PARAMS, target)

    return line


_request_line = _request_line_of(3)
_request_line_v2 = _request_line_of(2)


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
