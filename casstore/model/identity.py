"""Call identity (pure): the sha256 of the canonical JSON of a call's *identity document*, the
normalized request with everything volatile left out (what counts: docs/replay.md). A user
normalizer ``fn(document) -> document | None`` may rewrite the document last."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .canonical import canonical_json
from .fielddiff import diff_documents
from .identity_rules import (
    _LLM_HEADER_PREFIXES,
    _LLM_HEADERS,
    _STREAMING_APIS,
    _TOOL_FIELDS,
    IDENTITY_RULE,
    REQUEST_LINE,
    RULES,
    VOLATILE_HEADER,
    _Line,
    is_volatile_header,
    llm_api,
)
from .jsonvalues import (
    _FAST,
    _PLAIN,
    _as_bytes,
    _Codec,
    _dumps_checked,
    _NotOrjsonSafe,
    _parse_body,
    canonical_value,
    jsonable,
)

__all__ = [
    "IDENTITY_RULE",
    "CallIdentity",
    "Normalizer",
    "Sealing",
    "canonical_value",
    "digest_document",
    "http_identity",
    "http_identity_lowered",
    "tool_identity",
    "normalize_http",
    "normalize_tool",
    "llm_api",
    "jsonable",
    "diff_documents",
    "is_volatile_header",
]

Normalizer = Callable[[dict[str, Any]], "dict[str, Any] | None"]


def digest_document(document: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON of an identity document."""
    return _digest_canonical(canonical_value(document))


def _digest_canonical(document: Mapping[str, Any]) -> str:  # numbers already canonical
    return hashlib.sha256(canonical_json(document)).hexdigest()

# -- rule 3: sealed values ------------------------------------------------------------
# Each string (or key) in which redaction replaces something, and each value it replaces
# whole, is replaced by a slow salted digest (scrypt), so a dictionary tried against the
# identity costs one scrypt a guess (docs/security.md, "Call identity").

SEAL_N, SEAL_R, SEAL_P = 1 << 14, 8, 1  # scrypt: 16 MiB and ~65 ms of one core per digest
SEAL_PREFIX = "sealed:scrypt:"
DEFAULT_SALT = "casstore-identity-3"  # only where no cassette is at hand (an import, a bare call)
_SEALED: dict[tuple[str, str], str] = {}  # (salt, value) -> digest: a replay pays once per value
_SEALED_MAX = 4096


def seal_value(salt: str, value: str) -> str:
    """The slow digest that stands for ``value`` in a rule 3 identity document."""
    key = (salt, value)
    found = _SEALED.get(key)
    if found is None:
        raw = hashlib.scrypt(value.encode("utf-8", "surrogatepass"), salt=salt.encode("utf-8"),
                             n=SEAL_N, r=SEAL_R, p=SEAL_P, maxmem=64 << 20, dklen=32)
        found = SEAL_PREFIX + raw.hex()
        if len(_SEALED) >= _SEALED_MAX:
            _SEALED.clear()
        _SEALED[key] = found
    return found


@dataclass(frozen=True)
class Sealing:
    """What rule 3 seals with: ``salt`` (random per cassette, stored as each sealed entry's
    ``identity_salt``) and the redaction rules (``rules``, a RuleSet) that say which values
    a cassette's writer replaces; None: the built-in rules."""

    salt: str = DEFAULT_SALT
    rules: Any = None

    @classmethod
    def new(cls, rules: Any = None) -> Sealing:
        return cls(secrets.token_hex(16), rules)


_DEFAULT_SEALING = Sealing()


@functools.cache
def _redaction() -> tuple[Any, Any, Any]:
    """``(scan, redact, the built-in RuleSet)``: the redaction rules (~40 ms of imports) load with
    the first identity, not with ``import casstore``; an import statement here would cost every call."""
    from .redaction import RuleSet, redact, scan

    return scan, redact, RuleSet()


def _seal(doc: dict[str, Any], sealing: Sealing) -> dict[str, Any] | None:
    """``doc`` with what redaction replaces sealed, or None when it replaces nothing."""
    scan, redact, builtin = _redaction()
    # the credential shapes match only long random keys that no dictionary recovers: they are
    # left to the sha256, and the scan of every call's text for them is spared
    rules = (builtin if sealing.rules is None else sealing.rules).without_shapes
    if not scan(doc, rules):
        return None
    sealed: dict[str, Any] = _merge_sealed(doc, redact(doc, rules)[0], sealing.salt)
    return sealed


def _sealed(doc: dict[str, Any], rule: int, sealing: Sealing | None) -> tuple[dict[str, Any], str | None]:
    """``doc`` sealed under rule 3 and the salt, or ``doc`` and None when nothing is sealed."""
    sealing = sealing or _DEFAULT_SEALING
    sealed = _seal(doc, sealing) if rule >= 3 else None
    return (doc, None) if sealed is None else (sealed, sealing.salt)


def _merge_sealed(orig: Any, red: Any, salt: str) -> Any:
    """``orig`` where ``red`` (its redacted copy) differs from it: sealed, leaf by leaf."""
    if orig == red:
        return orig
    if isinstance(orig, dict) and isinstance(red, dict) and len(orig) == len(red):
        return {(k if k == rk else seal_value(salt, str(k))): _merge_sealed(v, rv, salt)
                for (k, v), (rk, rv) in zip(orig.items(), red.items(), strict=True)}
    if isinstance(orig, list) and isinstance(red, (list, tuple)) and len(orig) == len(red):
        return [_merge_sealed(a, b, salt) for a, b in zip(orig, red, strict=True)]
    return seal_value(salt, orig if isinstance(orig, str) else canonical_json(orig).decode("utf-8"))


# -- bodies -------------------------------------------------------------------------


def _boundary(content_type: str) -> str | None:
    m = re.search(r'boundary="?([^";]+)"?', content_type, re.IGNORECASE)
    return m.group(1) if m else None


def _body_document(body: bytes | str | None, content_type: str, loads: Callable[[str], Any] = json.loads) -> Any:
    raw = _as_bytes(body)
    if "multipart/" in content_type.lower():
        boundary = _boundary(content_type)
        if boundary:  # random per request: never part of the identity
            raw = raw.replace(boundary.encode("utf-8", "replace"), b"BOUNDARY")
    kind, value = _parse_body(raw, content_type, loads)
    if kind == "empty":
        return None
    if kind == "form":
        return {"form": [list(p) for p in value]}
    if kind != "bytes":  # json, text
        return {kind: value}
    return {"sha256": hashlib.sha256(value).hexdigest(), "length": len(value)}


def _header_items(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [(str(k).lower(), str(v)) for k, v in items]


def _tools_digest(tools: Any, dumps: Callable[[Any], bytes] | None = None) -> str:
    # with dumps the tools were parsed canonically already
    data = dumps(tools) if dumps is not None else canonical_json(canonical_value(tools))
    return "sha256:" + hashlib.sha256(data).hexdigest()


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
    """The identity of one call: ``identity`` is what the cassette stores and looks up;
    ``target`` the request line with the host (shown even where the identity leaves it out);
    ``rule`` the identity rule that computed it; ``salt`` that of its sealed values (rule 3)."""

    identity: str
    kind: str
    target: str
    document: dict[str, Any]
    rule: int = IDENTITY_RULE
    salt: str | None = None

    @property
    def models(self) -> list[str]:
        for key in ("input", "params"):
            part = self.document.get(key)
            if isinstance(part, dict) and isinstance(part.get("model"), str):
                return [part["model"]]
        return []

    def entry_fields(self) -> dict[str, Any]:
        """The fields every cassette entry of this call starts with (one place for all writers)."""
        fields = {"identity": self.identity, "identity_rule": self.rule, "kind": self.kind, "target": self.target}
        if self.salt is not None:
            fields["identity_salt"] = self.salt
        return fields


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
    """The identity document of an HTTP request (``kind`` is ``"llm"`` for LLM endpoints);
    ``for_identity=False``: the display form, numbers as sent and tool schemas in full."""
    return _normalize_http(method, url, _header_items(headers), body, normalizer, for_identity, None, rule)


def _line(method: str, url: str, rule: int) -> _Line:
    if type(method) is str and type(url) is str:
        return REQUEST_LINE[rule](method, url)
    # not cached: an unhashable argument fails as it always has
    return REQUEST_LINE[rule].__wrapped__(method, url)


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
    With a ``codec`` (identity form, no normalizer) numbers are canonicalized while the body
    is parsed; without one the body is parsed as sent, as the normalizer sees it."""
    loads, dumps = codec if codec is not None else (json.loads, None)
    hdrs = dict(items)
    content_type = hdrs.get("content-type", "")
    api, params, target = line if line is not None else _line(method, url, rule)
    if api is not None:
        kind, parsed = _parse_body(body, content_type, loads)
        if kind == "json" and isinstance(parsed, dict):
            # rule 1 (frozen) counts the target; later rules the operation and its parameters,
            # never the host or the path prefix (rule 1 knows no Bedrock or streaming api)
            doc: dict[str, Any] = {"kind": "llm", "target": target} if rule == 1 else {"kind": "llm"}
            doc["api"] = api
            if rule != 1:
                doc["params"] = dict(params)
            doc["headers"] = {k: hdrs[k] for k in sorted(_llm_header_names(api, hdrs))}
            doc["input"] = _llm_input(parsed, for_identity=for_identity, dumps=dumps, stream=api in _STREAMING_APIS)
            if rule != 1 and with_target(normalizer):  # the user's matching names the host: it counts
                doc["target"] = target
            return doc if codec is not None else _apply(doc, normalizer, for_identity=for_identity)
    kept: dict[str, str] = {}
    volatile = VOLATILE_HEADER[rule]
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
    sealing: Sealing | None = None,
) -> CallIdentity:
    """Identity of an HTTP request (``headers``: a mapping or (name, value) pairs), the one
    every client adapter and importer computes. ``rule`` selects an older identity rule (to
    look up entries recorded under it); ``sealing`` the salt and redaction rules of rule 3."""
    return http_identity_lowered(method, url, _header_items(headers), body, normalizer=normalizer, rule=rule,
                                 sealing=sealing)


def http_identity_lowered(
    method: str,
    url: str,
    items: list[tuple[str, str]],
    body: bytes | str | None,
    *,
    normalizer: Normalizer | None = None,
    rule: int = IDENTITY_RULE,
    sealing: Sealing | None = None,
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
    sealed, salt = _sealed(doc, rule, sealing)
    if salt is not None:
        doc, data = sealed, canonical_json(sealed)
    # CallIdentity(...) without the frozen dataclass's object.__setattr__ calls
    ident: CallIdentity = object.__new__(CallIdentity)
    ident.__dict__.update(
        identity=hashlib.sha256(data).hexdigest(),
        kind=str(kind),
        target=target,
        document=doc,
        rule=rule,
        salt=salt,
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
    rule: int = IDENTITY_RULE,
    sealing: Sealing | None = None,
) -> CallIdentity:
    """Identity of a tool/function call: its name and JSON-rendered arguments (rule 3 seals
    what redaction replaces in the arguments)."""
    if rule not in RULES:
        raise ValueError(f"unknown identity rule {rule!r} (known: {', '.join(map(str, RULES))})")
    doc = normalize_tool(name, args, kwargs, normalizer=normalizer)
    doc, salt = _sealed(doc, rule, sealing)
    return CallIdentity(
        identity=_digest_canonical(doc), kind="tool", target=name, document=doc, rule=rule, salt=salt
    )
