"""Identity rules (pure): the volatile headers and query parameters, URL normalization and the
recognized LLM operations. Rules 1 and 2 stay frozen so that their cassettes keep replaying;
rule 3 (every new entry) adds the newer credential names and the sealed values."""

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


# is_volatile_header of each rule, cached by the name alone
VOLATILE_HEADER = {r: functools.lru_cache(maxsize=1024)(functools.partial(is_volatile_header, rule=r)) for r in RULES}


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
    """``(api, params)`` of a recognized LLM operation (rules 2 and 3), or ``None``: ``params``
    are the Azure deployment, the Bedrock or Gemini model and the non-volatile query parameters.
    Recognition is by the end of the path, so any base URL gives the same answer."""
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
        api = next((name for suffix, name in _LLM_ENDPOINTS if path.endswith(suffix)), None)
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


def _request_line_of(rule: int) -> functools._lru_cache_wrapper[_Line]:
    """``(llm api, operation params, target)`` of a request line under ``rule``, cached: most
    calls of a run share a few URLs. The params dict is shared: callers copy it."""

    @functools.lru_cache(maxsize=512)
    def line(method: str, url: str) -> _Line:
        target = _target(method, url, rule)
        if rule == 1:
            return _llm_api_v1(method, url), _NO_PARAMS, target
        found = recognize_llm(method, url, rule)
        return (found[0], found[1], target) if found is not None else (None, _NO_PARAMS, target)

    return line


REQUEST_LINE = {r: _request_line_of(r) for r in RULES}


def llm_api(method: str, url: str) -> str | None:
    """The recognized LLM API of a request (``"openai.chat"``, ``"bedrock.converse"``, ...), or ``None``."""
    found = recognize_llm(method, url)
    return found[0] if found is not None else None


def _llm_api_v1(method: str, url: str) -> str | None:
    """Rule 1's recognition: OpenAI and Anthropic path suffixes only."""
    if method.upper() != "POST":
        return None
    path = urlsplit(url).path.rstrip("/")
    return next((api for suffix, api in _LLM_ENDPOINTS if path.endswith(suffix)), None)
