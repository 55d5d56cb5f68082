"""Redaction rules: one module for write-time redaction and for the hygiene checker (pure, no I/O).

A :class:`RuleSet` holds three kinds of rules:

* **key rules** match a JSON key (or header name, query parameter, form field) by its
  *words*: ``x-api-key`` -> ``x api key``, ``sessionToken`` -> ``session token``. Matching
  on words, never on substrings, keeps ``max_tokens``, ``prompt_tokens``, ``author`` and
  ``tokenizer`` out, and a trailing metadata word (``token_type``, ``secret_name``,
  ``authorization_endpoint``) marks a key that *describes* a credential without holding one.
* **value rules** match a credential's shape anywhere inside a string (OpenAI, Anthropic,
  AWS, GitHub, Slack, Google, JWT, PEM private keys, bearer tokens …) and replace just
  the matched token, so ``"use sk-… please"`` keeps its prose.
* **config rules** from ``[redaction]``: ``paths`` (dot-paths such as ``customer.email``,
  matched as a suffix of the JSON path, ``*`` for any key), ``patterns`` (regexes; a
  group named ``secret`` limits the replacement to that group), ``keys`` (extra key names),
  ``allow`` (regexes searched in a candidate secret *or* its JSON path: a match means
  "not a secret") and ``placeholder`` (default ``[REDACTED:{rule}]``).

:func:`redact` returns a redacted deep copy and hit counts per rule; :func:`scan` returns
:class:`Finding` objects that carry a masked preview and never the secret itself. Values
already redacted (the placeholder, ``***``) are not findings, so a redacted cassette scans
clean. Numbers, booleans and ``null`` are never secrets for the built-in rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from ..errors import RedactionRefused
from . import redaction_bytes as _rb
from .redaction_fast import (
    _AWS_ID,
    _AWS_SECRET,
    _ENCODED_RE,
    _ESCAPED_RE,
    _HEADER_NAME,
    _JSON_PAIR_RE,
    _PARAM_RE,
    _split_scheme,
    has_form_data,
    may_find,
    multipart_fields,
    unescape_json,
)
from .redaction_rules import (
    BUILTIN_KEY_RULES,
    BUILTIN_VALUE_RULES,
    DEFAULT_PLACEHOLDER,
    KeyRule,  # noqa: F401 - re-exported (the old home of the rules)
    RuleSet,
    ValueRule,
    _looks_random,
    key_words,
    mask,
)

__all__ = [
    "RuleSet",
    "Finding",
    "redact",
    "scan",
    "secrets_in",
    "mask",
    "summarize",
    "key_words",
    "BUILTIN_KEY_RULES",
    "BUILTIN_VALUE_RULES",
    "DEFAULT_PLACEHOLDER",
]

# The rules themselves (key and value rules, RuleSet) live in redaction_rules; this module
# walks a document with them (redact, scan) and re-exports their public names.

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


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")

# -- the walker --------------------------------------------------------------------------
_Emit = Callable[[str, str, Callable[[], str]], None]  # (rule, secret text, lazy path)


def _fmt_path(segs: tuple[Any, ...], rs: RuleSet) -> str:
    out = ["$"]
    for s in segs:
        if isinstance(s, int):
            out.append(f"[{s}]")
        elif isinstance(s, str) and s.startswith("\x00"):  # a marker such as ?param
            out.append(s[1:])
        elif _value_hit(s, rs):
            out.append("[<key withheld>]")
        elif _IDENT.match(s):
            out.append(f".{s}")
        else:
            out.append("[" + _json_str(s) + "]")
    return "".join(out)


def _json_str(s: str) -> str:
    import json

    return json.dumps(s, ensure_ascii=False)


def _value_hit(s: str, rs: RuleSet) -> bool:
    found: list[int] = []
    _sub_values(s, rs, lambda rule, secret, path: found.append(1), lambda: "", replace=False)
    return bool(found)


class _Walker:
    def __init__(self, rs: RuleSet, emit: _Emit, replace: bool) -> None:
        self.rs = rs
        self.emit = emit
        self.replace = replace

    def path(self, segs: tuple[Any, ...]) -> Callable[[], str]:
        return lambda: _fmt_path(segs, self.rs)

    # a value under a key that a key rule or a config path names
    def keyed(self, value: Any, rule: tuple[str, bool, int], segs: tuple[Any, ...], keys: tuple[str, ...]) -> Any:
        name, wholesale, min_len = rule
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, str):
            if len(value) < min_len or self.rs.is_masked(value):
                return self.walk(value, segs, keys)
            secret, kept = _split_scheme(value) if name in ("authorization", "auth") else (value, "")
            if self.rs.is_masked(secret) or self.rs.allowed(secret, self.path(segs)):
                return self.walk(value, segs, keys)
            self.emit(name, secret, self.path(segs))
            return kept + self.rs.placeholder_for(name) if self.replace else value
        if isinstance(value, (list, tuple)) and not wholesale:
            # a header sent twice, or a list of cookies: each string is under the same key
            items = [
                self.keyed(v, rule, (*segs, i), keys) if isinstance(v, str) else self.walk(v, (*segs, i), keys)
                for i, v in enumerate(value)
            ]
            return _same_kind(value, items) if self.replace else value
        if wholesale and (
            (isinstance(value, (dict, list, tuple)) and value)
            or (name.startswith(("key:", "path:")) and isinstance(value, (int, float)))
        ):
            text = str(value) if isinstance(value, (int, float)) else f"<{type(value).__name__}>"
            if self.rs.allowed(text, self.path(segs)):
                return self.walk(value, segs, keys)
            self.emit(name, text, self.path(segs))
            return self.rs.placeholder_for(name) if self.replace else value
        return self.walk(value, segs, keys)

    def walk(self, value: Any, segs: tuple[Any, ...], keys: tuple[str, ...], *, in_list: bool = False) -> Any:
        if isinstance(value, str):
            return self.string(value, segs)
        if isinstance(value, Mapping):
            if len(value) == 1 and isinstance(value.get("base64"), str):
                new = self.binary(value["base64"], (*segs, "base64"), "")
                return {"base64": new} if self.replace else value
            return self.mapping(value, segs, keys)
        if isinstance(value, (list, tuple)):
            if in_list and len(value) == 2 and all(isinstance(v, str) for v in value) \
                    and _HEADER_NAME.match(value[0]):
                # a (name, value) pair in a list of header pairs
                rule = self.rs.key_rule(value[0])
                if rule is not None:
                    new = self.keyed(value[1], rule, (*segs, 1), keys)
                    return _same_kind(value, [value[0], new]) if self.replace else value
            items = [self.walk(v, (*segs, i), keys, in_list=True) for i, v in enumerate(value)]
            return _same_kind(value, items) if self.replace else value
        return value

    def mapping(self, obj: Mapping[str, Any], segs: tuple[Any, ...], keys: tuple[str, ...]) -> Any:
        out: dict[Any, Any] = {}
        # HAR-style {"name": "Authorization", "value": "..."}
        aws_ctx = any(isinstance(v, str) and len(v) == 20 and _AWS_ID.fullmatch(v) for v in obj.values())
        har = self.rs.key_rule(obj["name"]) if isinstance(obj.get("name"), str) and "value" in obj and len(obj) <= 4 else None
        coding = _rb.content_encoding(obj) if "headers" in obj else ""
        for k, v in obj.items():
            ks = k if isinstance(k, str) else str(k)
            nsegs = (*segs, ks)
            nkeys = (*keys, ks)
            if ks == "body_base64" and isinstance(v, str):
                out[k] = self.binary(v, nsegs, coding)
                continue
            if ks == "body" and coding and isinstance(v, Mapping) and len(v) == 1 and isinstance(v.get("base64"), str):
                out[k] = {"base64": self.binary(v["base64"], (*nsegs, "base64"), coding)}
                continue
            new_key = k
            if isinstance(k, str):
                new_key = self.string(k, (*segs, "\x00<key>"), is_key=True)
            rule = None
            pr = self.rs.path_rule(nkeys) if self.rs.config_paths else None
            if pr is not None:
                rule = (pr, True, 1)
            elif har is not None and ks == "value":
                rule = har
            else:
                rule = self.rs.key_rule(ks)
                if rule is not None and rule[0] == "token" and ks == "token" and ("logprob" in obj or "bytes" in obj):
                    rule = None  # a logprobs entry: {"token": " the", "logprob": -0.1}
            if isinstance(v, str) and len(v) == 40 and _AWS_SECRET.fullmatch(v) and (
                (rule is not None and rule[0] == "secret" and "aws" in key_words(ks))
                or (aws_ctx and _looks_random(v))
            ):
                # an AWS secret key: named so, or sitting next to its access key id
                rule = ("aws-secret-key", False, 40)
            new = self.keyed(v, rule, nsegs, nkeys) if rule is not None else self.walk(v, nsegs, nkeys)
            out[new_key] = new
        return out if self.replace else obj

    def string(self, s: str, segs: tuple[Any, ...], *, is_key: bool = False) -> str:
        if len(s) < 8 and not self.rs.config_patterns:
            return s
        path = self.path(segs)
        out = _sub_values(s, self.rs, self.emit, path, replace=self.replace)
        if "%" in out:
            out = self._encoded(out, segs)
        if "\\" in out:
            out = self._escaped(out, segs)
        if is_key:
            return out
        if "=" in out:
            out = self._params(out, segs)
        if has_form_data(out):
            out = self._multipart(out, segs)
        if '":' in out or '" :' in out:
            out = self._json_pairs(out, segs)
        return out

    def _params(self, s: str, segs: tuple[Any, ...]) -> str:
        def sub(m: re.Match[str]) -> str:
            name, val = m.group(1), m.group(2)
            rule = self.rs.key_rule(name)
            if rule is None or len(val) < max(rule[2], 1) or self.rs.is_masked(_unquote(val)):
                return m.group(0)
            path = self.path((*segs, f"\x00?{name}"))
            if self.rs.allowed(val, path):
                return m.group(0)
            self.emit(rule[0], val, path)
            return f"{name}={self.rs.placeholder_for(rule[0])}" if self.replace else m.group(0)

        return _PARAM_RE.sub(sub, s)

    def _encoded(self, s: str, segs: tuple[Any, ...]) -> str:
        """Percent-encoded tokens (a query value, a path segment, a header value): clients
        encode ``/ : + =``, which hides a secret's shape (``?cb=https%3A%2F%2Fhooks.slack.com…``)
        from the value rules, so they are run on each token decoded too."""
        path = self.path(segs)

        def sub(m: re.Match[str]) -> str:
            token = m.group(0)
            found: list[str] = []

            def emit(rule: str, secret: str, where: Callable[[], str]) -> None:
                found.append(rule)
                self.emit(rule, secret, where)

            new = _sub_values(_unquote(token), self.rs, emit, path, replace=self.replace)
            return _quote(new) if found and self.replace else token

        return _ENCODED_RE.sub(sub, s)

    def _multipart(self, s: str, segs: tuple[Any, ...]) -> str:
        """A text field of a multipart/form-data body whose name a key rule knows
        (``name="api_key"``, ``name="password"``): its value is redacted like a JSON key's."""
        pieces: list[str] = []
        pos = 0
        for m in multipart_fields(s):
            rule = self.rs.key_rule(m.group(1))
            value = m.group(3)
            if rule is None or len(value) < max(rule[2], 1) or self.rs.is_masked(value):
                continue
            secret, kept = _split_scheme(value) if rule[0] in ("authorization", "auth") else (value, "")
            path = self.path((*segs, f"\x00<form-data>.{m.group(1)}"))
            if self.rs.is_masked(secret) or self.rs.allowed(secret, path):
                continue
            self.emit(rule[0], secret, path)
            pieces += [s[pos:m.start(3)], kept + self.rs.placeholder_for(rule[0])]
            pos = m.end(3)
        if not self.replace or not pieces:
            return s
        return "".join(pieces) + s[pos:]

    def _escaped(self, s: str, segs: tuple[Any, ...]) -> str:
        """JSON string escapes (``\\/``, ``\\u002d``) hide a secret's shape from the value
        rules: each run of text that holds one is scanned unescaped too, and a redacted run is
        written back escaped (``/`` as ``\\/`` again, so the document keeps its style)."""
        path = self.path(segs)

        def sub(m: re.Match[str]) -> str:
            token = m.group(0)
            if "\\" not in token:
                return token
            found: list[str] = []

            def emit(rule: str, secret: str, where: Callable[[], str]) -> None:
                found.append(rule)
                self.emit(rule, secret, where)

            plain = unescape_json(token)
            new = _sub_values(plain, self.rs, emit, path, replace=self.replace)
            if not (found and self.replace):
                return token
            return _json_str(new)[1:-1].replace("/", "\\/")

        return _ESCAPED_RE.sub(sub, s)

    def binary(self, b64: str, segs: tuple[Any, ...], coding: str) -> str:
        """Base64 bytes (see :mod:`.redaction_bytes`): scanned decoded, redacted and encoded again."""
        raw = _rb.b64_decode(b64)
        if raw is None:
            return self.string(b64, segs)
        data = _rb.decode(raw, coding)
        undecodable = data is None
        text, utf8 = _rb.bytes_to_text(raw if data is None else data)
        found: list[str] = []
        outer = self.emit

        def emit(rule: str, secret: str, where: Callable[[], str]) -> None:
            found.append(rule)
            outer(rule, secret, where)

        self.emit = emit
        try:
            new = self.string(text, (*segs, "\x00<decoded>" if utf8 else "\x00<bytes>"))
        finally:
            self.emit = outer
        if not (found and self.replace):
            return b64
        encoded = None if undecodable else _rb.encode(_rb.text_to_bytes(new, utf8), coding)
        if encoded is None:
            raise RedactionRefused(
                _fmt_path(segs, self.rs), sorted(set(found)),
                f"sits in a body whose content-encoding ({coding}) casstore cannot {'undo' if undecodable else 'redo'}, "
                "so it cannot be redacted")
        return _rb.b64_encode(encoded)

    def _json_pairs(self, s: str, segs: tuple[Any, ...]) -> str:
        def sub(m: re.Match[str]) -> str:
            name, val = m.group(1), m.group(2)
            rule = self.rs.key_rule(name)
            if rule is None or len(val) < max(rule[2], 1) or self.rs.is_masked(val):
                return m.group(0)
            if rule[0] == "token" and name == "token" and '"logprob"' in s:
                return m.group(0)
            secret, kept = _split_scheme(val) if rule[0] in ("authorization", "auth") else (val, "")
            if self.rs.is_masked(secret):
                return m.group(0)
            path = self.path((*segs, f"\x00<text>.{name}"))
            if self.rs.allowed(secret, path):
                return m.group(0)
            self.emit(rule[0], secret, path)
            if not self.replace:
                return m.group(0)
            return m.group(0)[: m.start(2) - m.start(0)] + kept + self.rs.placeholder_for(rule[0]) + '"'

        return _JSON_PAIR_RE.sub(sub, s)


def _same_kind(original: list[Any] | tuple[Any, ...], items: list[Any]) -> list[Any] | tuple[Any, ...]:
    return tuple(items) if isinstance(original, tuple) else items


def _unquote(v: str) -> str:
    return unquote(v)


def _quote(v: str) -> str:
    """Re-encode a decoded query value, keeping the placeholder's brackets readable."""
    return quote(v, safe="[]:")


def _sub_values(s: str, rs: RuleSet, emit: _Emit, path: Callable[[], str], *, replace: bool) -> str:
    """Apply the value rules (built-in shapes and config patterns) inside one string."""
    lowered: str | None = None
    if rs._trigger_re is not None and not rs._trigger_re.search(s):
        rules: tuple[ValueRule, ...] = ()  # one search tells that no built-in shape can match
    else:
        rules = rs.value_rules
    for rule in rules:
        if rule.triggers:
            if rule.ci_trigger:
                if lowered is None:
                    lowered = s.lower()
                if not any(t in lowered for t in rule.triggers):
                    continue
            elif not any(t in s for t in rule.triggers):
                continue
        s = _apply_regex(s, rule.name, rule.regex, rule.group, rule.gate, rs, emit, path, replace)
    for name, rx in rs.config_patterns:
        group: int | str = "secret" if "secret" in rx.groupindex else 0
        s = _apply_regex(s, name, rx, group, None, rs, emit, path, replace)
    return s


def _apply_regex(s: str, name: str, rx: re.Pattern[str], group: int | str, gate: Callable[[str], bool] | None,
                 rs: RuleSet, emit: _Emit, path: Callable[[], str], replace: bool) -> str:
    pieces: list[str] = []
    pos = 0
    for m in rx.finditer(s):
        secret = m.group(group)
        if not secret or (gate is not None and not gate(secret)) or rs.is_masked(secret):
            continue
        if rs.allowed(secret, path):
            continue
        emit(name, secret, path)
        if replace:
            a, b = m.span(group)
            pieces.append(s[pos:a])
            pieces.append(rs.placeholder_for(name))
            pos = b
    if not replace or not pieces:
        return s
    pieces.append(s[pos:])
    return "".join(pieces)


# -- public functions ----------------------------------------------------------------------
def redact(obj: Any, ruleset: RuleSet | None = None) -> tuple[Any, dict[str, int]]:
    """A redacted deep copy of ``obj`` and the number of hits per rule name.

    Dicts, lists, tuples and strings are rebuilt; other values are returned as they are.
    ``obj`` is never modified.
    """
    rs = ruleset or RuleSet()
    hits: dict[str, int] = {}

    def emit(rule: str, _secret: str, _path: Callable[[], str]) -> None:
        hits[rule] = hits.get(rule, 0) + 1

    new = _Walker(rs, emit, replace=True).walk(obj, (), ())
    return new, dict(sorted(hits.items()))


def scan(obj: Any, ruleset: RuleSet | None = None, *, path: str = "$") -> list[Finding]:
    """Every secret in ``obj`` as a :class:`Finding` (rule, JSON path, masked preview).

    ``path`` is the prefix of the reported JSON paths (``$`` by default).
    """
    rs = ruleset or RuleSet()
    findings: list[Finding] = []
    if not may_find(obj, rs):  # most documents: proved clean in one pass, no path built
        return findings

    def emit(rule: str, secret: str, lazy_path: Callable[[], str]) -> None:
        p = lazy_path()
        p = path + p[1:] if path != "$" else p
        m = re.match(r"^\$\.entries\[(\d+)\]", p)
        findings.append(Finding(rule=rule, path=p, preview=mask(secret), entry=int(m.group(1)) if m else None))

    _Walker(rs, emit, replace=False).walk(obj, (), ())
    return findings


def secrets_in(text: str, rules: RuleSet | None = None) -> list[tuple[str, str]]:
    """``(rule, secret)`` for each secret the rules find in ``text`` (built-in rules by default)."""
    rules = rules or RuleSet()
    found: list[tuple[str, str]] = []

    def emit(rule: str, secret: str, _path: Callable[[], str]) -> None:
        found.append((rule, secret))

    _Walker(rules, emit, replace=False).walk(text, (), ())
    return found


def summarize(findings: Iterable[Finding]) -> dict[str, int]:
    """Hits per rule name, sorted by name."""
    out: dict[str, int] = {}
    for f in findings:
        out[f.rule] = out.get(f.rule, 0) + 1
    return dict(sorted(out.items()))
