"""Redaction (pure): one walker for write-time redaction (:func:`redact`) and for the hygiene
checker (:func:`scan`, whose findings carry a masked preview, never the secret). Key rules
match a key by its *words* (``x-api-key``, ``sessionToken``; never ``max_tokens``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import RedactionRefused
from . import redaction_bytes as _rb
from .redaction_rules import (
    COOKIE_RULE,
    RuleSet,
    key_words,
    lazy_pattern,
    looks_random,
    mask,
)
from .redaction_text import Emit, Segs, TextScanner, fmt_path

__all__ = [
    "RuleSet",
    "Finding",
    "redact",
    "scan",
    "secrets_in",
    "mask",
    "key_words",
]

# -- findings ------------------------------------------------------------------------
@dataclass(frozen=True)
class Finding:
    """One secret found by :func:`scan`. ``preview`` is masked; the secret is never kept."""

    rule: str
    path: str  # JSON path, e.g. $.entries[0].response.headers["x-api-key"]
    preview: str
    entry: int | None = None  # index into the cassette's entries when the path is under $.entries

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "path": self.path, "preview": self.preview, "entry": self.entry}


_HEADER_NAME = lazy_pattern(r"^[A-Za-z0-9!#$%&'*+.^_`|~\-]{1,64}$")
_AWS_ID = lazy_pattern(r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}")
_AWS_SECRET = lazy_pattern(r"[A-Za-z0-9/+]{40}")
_SCALARS = frozenset({int, float, bool, type(None)})
_SPECIAL_KEYS = frozenset({"body", "body_base64", "value"})  # what a key means depends on its mapping
_ENTRY_PATH = lazy_pattern(r"^\$\.entries\[(\d+)\]")


class _Walker(TextScanner):
    """One pass over a document: a :class:`TextScanner` that also walks the document's
    structure, applying key rules wherever a string sits (remembered clean or not)."""

    def __init__(self, rs: RuleSet, emit: Emit, replace: bool) -> None:
        super().__init__(rs, emit, replace)
        # keys known to have no key rule and no secret in them (none with [redaction] paths)
        plain = rs._clean_keys
        self.plain: set[str] | frozenset[str] = plain if self.ours and not rs.config_paths else frozenset()
        self.add_plain = plain.add if self.ours and not rs.config_paths and len(plain) < 65536 else None

    # a value under a key that a key rule or a config path names
    def keyed(self, value: Any, rule: tuple[str, bool, int], segs: Segs, keys: tuple[str, ...],
              key: str = "") -> Any:
        name, wholesale, _min_len = rule
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, str):
            if name == COOKIE_RULE:
                return self.cookie(value, segs, request=key.lower() == "cookie")
            new = self.keyed_text(rule, value, self.path(segs))
            if new is None:
                return self.walk(value, segs, keys)
            return new if self.replace else value
        if isinstance(value, (list, tuple)) and not wholesale:
            # a header sent twice, or a list of cookies: each string is under the same key
            items = [
                self.keyed(v, rule, (segs, i), keys, key) if isinstance(v, str) else self.walk(v, (segs, i), keys)
                for i, v in enumerate(value)
            ]
            return _same_kind(value, items) if self.replace else value
        if wholesale and (
            (isinstance(value, (dict, list, tuple)) and value)
            or (name.startswith(("key:", "path:")) and isinstance(value, (int, float)))
        ):
            text = str(value) if isinstance(value, (int, float)) else f"<{type(value).__name__}>"
            if self.allowed(text, self.path(segs)):
                return self.walk(value, segs, keys)
            self.report(name, text, self.path(segs))
            return self.rs.placeholder_for(name) if self.replace else value
        return self.walk(value, segs, keys)

    def walk(self, value: Any, segs: Segs, keys: tuple[str, ...], *, in_list: bool = False) -> Any:
        kind = type(value)
        if kind is str:
            return self.string(value, segs)
        if kind in _SCALARS:
            return value
        if kind is dict or (kind is not list and kind is not tuple and isinstance(value, Mapping)):
            if len(value) == 1 and isinstance(value.get("base64"), str):
                new = self.binary(value["base64"], (segs, "base64"), "")
                return {"base64": new} if self.replace else value
            return self.mapping(value, segs, keys)
        if kind is list or kind is tuple or isinstance(value, (list, tuple)):
            if in_list and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], str) \
                    and _HEADER_NAME.match(value[0]):
                # a (name, value) pair in a list of header or query pairs
                rule = self.param_rule(value[0])
                if rule is not None:
                    new = self.keyed(value[1], rule, (segs, 1), keys, value[0])
                    return _same_kind(value, [value[0], new]) if self.replace else value
            if not self.replace:
                for i, v in enumerate(value):
                    if type(v) in _SCALARS:
                        continue
                    self.walk(v, (segs, i), keys, in_list=True)
                return value
            items = [self.walk(v, (segs, i), keys, in_list=True) for i, v in enumerate(value)]
            return _same_kind(value, items)
        if isinstance(value, str):
            return self.string(value, segs)
        return value

    def mapping(self, obj: Mapping[str, Any], segs: Segs, keys: tuple[str, ...]) -> Any:
        rs, replace, short, clean = self.rs, self.replace, self.short, self.clean
        key_rule = rs.key_rule
        plain = self.plain
        if not replace and plain.issuperset(obj):  # the common case: only the values are looked at
            for v in obj.values():
                kind = type(v)
                if kind is str:
                    if len(v) >= short and v not in clean:
                        break  # a string to look at: the loop below
                elif kind not in _SCALARS:
                    break
            else:
                return obj
        out: dict[Any, Any] = {}
        # HAR-style {"name": "Authorization", "value": "..."}
        har = self.param_rule(obj["name"]) if "value" in obj and len(obj) <= 4 and isinstance(obj.get("name"), str) \
            else None
        paths = bool(rs.config_paths)
        aws_ctx: bool | None = None
        for k, v in obj.items():
            kind = type(v)
            if k in plain and not (kind is str and len(v) == 40):
                # a key without a rule, seen clean before: only its value is looked at
                ks = new_key = k
                rule: tuple[str, bool, int] | None = None
                nkeys = keys
            else:
                met = self.met
                if type(k) is str:
                    ks = new_key = k
                    if len(k) >= short and k not in clean:
                        new_key = self.string(k, (segs, "\x00<key>"))
                else:
                    ks, new_key = str(k), k
                if kind is str and ks == "body_base64":
                    out[k] = self.binary(v, (segs, ks), _rb.content_encoding(obj))
                    continue
                if ks == "body" and isinstance(v, Mapping) and len(v) == 1 and isinstance(v.get("base64"), str) \
                        and (coding := _rb.content_encoding(obj)):
                    out[k] = {"base64": self.binary(v["base64"], ((segs, ks), "base64"), coding)}
                    continue
                nkeys = (*keys, ks) if paths else keys
                pr = rs.path_rule(nkeys) if paths else None
                if pr is not None:
                    rule = (pr, True, 1)
                elif har is not None and ks == "value":
                    rule = har
                else:
                    rule = key_rule(ks)
                    if rule is not None and rule[0] == "token" and ks == "token" and ("logprob" in obj or "bytes" in obj):
                        rule = None  # a logprobs entry: {"token": " the", "logprob": -0.1}
                    elif rule is None and self.met == met and k is ks and ks not in _SPECIAL_KEYS \
                            and self.add_plain is not None:
                        self.add_plain(k)
                if kind is str and len(v) == 40 and _AWS_SECRET.fullmatch(v):
                    if aws_ctx is None:
                        aws_ctx = any(isinstance(x, str) and len(x) == 20 and _AWS_ID.fullmatch(x) for x in obj.values())
                    if (rule is not None and {"aws", "secret"} <= set(key_words(ks))) or (aws_ctx and looks_random(v)):
                        # an AWS secret key: named so, or sitting next to its access key id
                        rule = ("aws-secret-key", False, 40)
            if rule is not None:
                new = self.keyed(v, rule, (segs, ks), nkeys, ks)
            elif kind is str:
                new = v if len(v) < short or v in clean else self.string(v, (segs, ks))
            elif kind in _SCALARS or (not v and not replace and (kind is dict or kind is list)):
                new = v  # (an empty container holds nothing to find)
            else:
                new = self.walk(v, (segs, ks), nkeys)
            if replace:
                out[new_key] = new
        return out if replace else obj

    def binary(self, b64: str, segs: Segs, coding: str) -> str:
        """Base64 bytes (see :mod:`.redaction_bytes`): scanned decoded, redacted and encoded again."""
        raw = _rb.b64_decode(b64)
        if raw is None:
            return self.string(b64, segs)
        data = _rb.decode(raw, coding)
        undecodable = data is None
        text, utf8 = _rb.bytes_to_text(raw if data is None else data)
        before, first = self.reported, len(self.found_rules)
        new = self.string(text, (segs, "\x00<decoded>" if utf8 else "\x00<bytes>"))
        if not (self.reported > before and self.replace):
            return b64
        encoded = None if undecodable else _rb.encode(_rb.text_to_bytes(new, utf8), coding)
        if encoded is None:
            raise RedactionRefused(
                fmt_path(segs, self.rs), sorted(set(self.found_rules[first:])),
                f"sits in a body whose content-encoding ({coding}) casstore cannot {'undo' if undecodable else 'redo'}, "
                "so it cannot be redacted")
        return _rb.b64_encode(encoded)


def _same_kind(original: list[Any] | tuple[Any, ...], items: list[Any]) -> list[Any] | tuple[Any, ...]:
    return tuple(items) if isinstance(original, tuple) else items


# -- public functions ----------------------------------------------------------------------
def redact(obj: Any, ruleset: RuleSet | None = None) -> tuple[Any, dict[str, int]]:
    """A redacted deep copy of ``obj`` (dicts, lists, tuples and strings rebuilt, other values
    as they are) and the number of hits per rule name."""
    rs = ruleset or RuleSet()
    hits: dict[str, int] = {}

    def emit(rule: str, _secret: str, _path: Callable[[], str]) -> None:
        hits[rule] = hits.get(rule, 0) + 1

    new = _Walker(rs, emit, replace=True).walk(obj, (), ())
    return new, dict(sorted(hits.items()))


def scan(obj: Any, ruleset: RuleSet | None = None, *, path: str = "$") -> list[Finding]:
    """Every secret in ``obj`` as a :class:`Finding`; ``path`` prefixes the reported JSON paths."""
    rs = ruleset or RuleSet()
    findings: list[Finding] = []

    def emit(rule: str, secret: str, lazy_path: Callable[[], str]) -> None:
        p = lazy_path()
        p = path + p[1:] if path != "$" else p
        m = _ENTRY_PATH.match(p)
        findings.append(Finding(rule=rule, path=p, preview=mask(secret), entry=int(m.group(1)) if m else None))

    _Walker(rs, emit, replace=False).walk(obj, (), ())
    return findings


def secrets_in(text: str, rules: RuleSet | None = None) -> list[tuple[str, str]]:
    """``(rule, secret)`` for each secret the rules find in ``text`` (built-in rules by default)."""
    found: list[tuple[str, str]] = []

    def emit(rule: str, secret: str, _path: Callable[[], str]) -> None:
        found.append((rule, secret))

    _Walker(rules or RuleSet(), emit, replace=False).walk(text, (), ())
    return found
