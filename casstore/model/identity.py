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
  One whose ``with_target`` attribute is ``True`` gets LLM documents with the ``target``
  too (the request line, host included, as in HTTP documents), and what it leaves of it
  counts: the host-free rule yields to a matching that names the host (vcrpy's
  ``match_on`` with ``host`` or ``uri``).

Rule 1 (entries without ``identity_rule``, recorded before rule 2) kept client default
headers such as ``accept``, the host and path of LLM calls (as ``target``) and knew only
the OpenAI and Anthropic endpoints. It is kept, frozen, so that those cassettes keep
replaying: ``http_identity(..., rule=1)``.

A second, *display* form (:func:`describe_http`, ``for_identity=False``) keeps numbers
as sent and tool schemas in full; it is only used to explain a near miss.
"""


from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from .canonical import canonical_json
from .fielddiff import diff_documents
from .identity_rules import (
    _LLM_HEADER_PREFIXES,
    _LLM_HEADERS,
    _STREAMING_APIS,
    _TOOL_FIELDS,
    IDENTITY_RULE,
    RULES,
    _Line,
    _request_line,
    _request_line_v1,
    _volatile_header,
    _volatile_header_v1,
    is_volatile_header,
    is_volatile_query_param,
    llm_api,
    recognize_llm,
    split_url,
)
from .jsonvalues import (
    _FAST,
    _PLAIN,
    _Codec,
    _dumps_checked,
    _NotOrjsonSafe,
    canonical_value,
    jsonable,
)

__all__ = [
    "IDENTITY_RULE",
    "RULES",
    "CallIdentity",
    "Normalizer",
    "with_target",
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

# The identity rules (what is volatile, which LLM operation a request line is) live in
# identity_rules, the canonical values and body codec in jsonvalues, the near-miss
# explanation in fielddiff; their public names are re-exported here.


def digest_document(document: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON of an identity document."""
    return _digest_canonical(canonical_value(document))


def _digest_canonical(document: Mapping[str, Any]) -> str:
    """sha256 hex of a document whose numbers are already canonical (serialized once)."""
    return hashlib.sha256(canonical_json(document)).hexdigest()

# -- bodies -------------------------------------------------------------------------


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


def with_target(normalizer: Normalizer | None) -> bool:
    """Whether ``normalizer`` asks for the request line in LLM documents too (its
    ``with_target`` attribute): its matching names the host, so the host may count."""
    return normalizer is not None and getattr(normalizer, "with_target", False) is True


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
                if with_target(normalizer):  # the user's matching names the host: it counts
                    doc["target"] = target
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
