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

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from ..errors import RedactionRefused
from . import redaction_bytes as _rb
from .redaction_rules import (
    BASE64_RUN,
    BUILTIN_KEY_RULES,
    BUILTIN_VALUE_RULES,
    COOKIE_RULE,
    DEFAULT_PLACEHOLDER,
    URL_USERINFO,
    URL_USERINFO_RULE,
    KeyRule,  # noqa: F401 - re-exported (the old home of the rules)
    RuleSet,
    ValueRule,
    builtin_rule,
    cookie_values,
    key_words,
    lazy_pattern,
    looks_random,
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
    "secrets_in",
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


# -- what the walker looks for inside strings -----------------------------------------------
# key=value pairs in query strings and form bodies, percent-encoded tokens, "key": "value"
# inside JSON text, a header as a (name, value) pair, an AWS key id and secret
_PARAM_RE = lazy_pattern(r"(?:(?<=[?&;])|^)([A-Za-z0-9_.\-\[\]]{1,64})=([^&#\s\"'<>]*)")
_ENCODED_RE = lazy_pattern(r"[^\s/?&#=;,\"'<>]*%[0-9A-Fa-f]{2}[^\s/?&#=;,\"'<>]*")
_JSON_PAIR_RE = lazy_pattern(r'"([^"\\]{1,64})"\s*:\s*"((?:[^"\\]|\\.){1,4096})"')
# a run of JSON string text holding \/ or \uXXXX escapes (PHP and Java serializers write
# "https:\/\/hooks.slack.com\/…", some write "sk\u002dproj…"): scanned unescaped
_ESC = r"\\/|\\u[0-9A-Fa-f]{4}"
_ESCAPED_RE = lazy_pattern(r"(?:[^\s\"\\]|" + _ESC + r")+")  # linear: each branch starts differently
_UNESCAPE_RE = lazy_pattern(_ESC)
# a text field of a multipart/form-data body: its name, then its first line of value
_MULTIPART_RE = lazy_pattern(r'(?i:content-disposition):[ \t]*(?i:form-data);[ \t]*name="([^"\r\n]{1,64})"([^\r\n]*)\r?\n'
                             r"(?:[^\r\n]+\r?\n)*\r?\n([^\r\n]*)")
_HEADER_NAME = lazy_pattern(r"^[A-Za-z0-9!#$%&'*+.^_`|~\-]{1,64}$")
_AWS_ID = lazy_pattern(r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}")
_AWS_SECRET = lazy_pattern(r"[A-Za-z0-9/+]{40}")
_SCHEMES = frozenset("bearer basic token digest bot negotiate ntlm hmac apikey".split())
_SCALARS = frozenset({int, float, bool, type(None)})
_SPECIAL_KEYS = frozenset({"body", "body_base64", "value"})  # what a key means depends on its mapping
_IDENT = lazy_pattern(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_ENTRY_PATH = lazy_pattern(r"^\$\.entries\[(\d+)\]")


def _has_form_data(text: str) -> bool:
    """Whether ``form-data`` is in ``text`` in any case (a part's header may say ``form-Data``);
    lowered only when ``-d`` or ``-D`` is there."""
    return ("-d" in text or "-D" in text) and "form-data" in text.lower()


def _unescape_json(token: str) -> str:
    """``\\/`` and ``\\uXXXX`` escapes of a run of JSON string text undone."""
    return _UNESCAPE_RE.sub(lambda e: "/" if e.group(0) == "\\/" else chr(int(e.group(0)[2:], 16)), token)


def _split_scheme(value: str) -> tuple[str, str]:
    """("Bearer abc") -> ("abc", "Bearer "): keep the auth scheme readable, redact the credential."""
    parts = value.split(None, 1)
    if len(parts) == 2 and parts[0].lower() in _SCHEMES:
        return parts[1], value[: len(value) - len(parts[1])]
    return value, ""


# -- the walker --------------------------------------------------------------------------
_Emit = Callable[[str, str, Callable[[], str]], None]  # (rule, secret text, lazy path)
# where a value sits: () at the top, else (where its container sits, its key or index); the
# JSON path is built from it only for a finding
_Segs = tuple[Any, ...]


def _fmt_path(segs: _Segs, rs: RuleSet) -> str:
    flat: list[Any] = []
    while segs:
        segs, seg = segs
        flat.append(seg)
    out = ["$"]
    for s in reversed(flat):
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
    """Whether a value rule finds a secret in ``s`` (a key: printed withheld)."""
    walker = _Walker(rs, lambda rule, secret, path: None, replace=False)
    walker.values(s, lambda: "")
    return walker.reported > 0


class _Walker:
    """One pass over a document: every secret the rules know is reported to ``emit`` (with a
    lazily built JSON path) and, with ``replace``, swapped for its placeholder in a copy.

    A string in which nothing was met (no finding, nothing let through by ``allow``) is
    remembered by its rule set (``RuleSet._clean_texts``, bounded): what a string holds on
    its own does not depend on where it sits, so the next document skips it. Key rules are
    applied wherever a string sits, remembered or not."""

    def __init__(self, rs: RuleSet, emit: _Emit, replace: bool) -> None:
        self.rs = rs
        self.emit = emit
        self.replace = replace
        self.reported = 0  # secrets reported to emit
        self.met = 0  # secrets reported or let through by allow: a string with none is clean
        self.found_rules: list[str] = []  # the rule of each secret reported
        self.unwrapping = False  # inside a base64 run's decoded text
        clean = rs._clean_texts
        ours = clean.owner is not None and clean.owner() is rs  # a copy's is not ours
        self.clean: Set[str] = clean if ours else frozenset()
        self.keep = clean.keep if ours else None
        # keys known to have no key rule and no secret in them (none with [redaction] paths)
        plain = rs._clean_keys
        self.plain: set[str] | frozenset[str] = plain if ours and not rs.config_paths else frozenset()
        self.add_plain = plain.add if ours and not rs.config_paths and len(plain) < 65536 else None
        self.short = 0 if rs.config_patterns else 8  # no built-in rule finds a secret in fewer characters

    def path(self, segs: _Segs) -> Callable[[], str]:
        return lambda: _fmt_path(segs, self.rs)

    def param_rule(self, name: str) -> tuple[str, bool, int] | None:
        """The rule of a query or form parameter's name, or a [name, value] pair's."""
        return self.rs.key_rule(name) or builtin_rule(name, param=True)

    def report(self, rule: str, secret: str, path: Callable[[], str]) -> None:
        self.reported += 1
        self.met += 1
        self.found_rules.append(rule)
        self.emit(rule, secret, path)

    def allowed(self, secret: str, path: Callable[[], str]) -> bool:
        if self.rs.allow and self.rs.allowed(secret, path):
            self.met += 1
            return True
        return False

    # a value under a key that a key rule or a config path names
    def keyed(self, value: Any, rule: tuple[str, bool, int], segs: _Segs, keys: tuple[str, ...],
              key: str = "") -> Any:
        name, wholesale, min_len = rule
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, str):
            if name == COOKIE_RULE:
                return self.cookie(value, segs, request=key.lower() == "cookie")
            if len(value) < min_len or self.rs.is_masked(value):
                return self.walk(value, segs, keys)
            secret, kept = _split_scheme(value) if name in ("authorization", "auth") else (value, "")
            if self.rs.is_masked(secret) or self.allowed(secret, self.path(segs)):
                return self.walk(value, segs, keys)
            self.report(name, secret, self.path(segs))
            return kept + self.rs.placeholder_for(name) if self.replace else value
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

    def cookie(self, value: str, segs: _Segs, *, request: bool = False) -> str:
        """A Cookie or Set-Cookie value: each cookie's value reported and redacted, its name
        and a Set-Cookie's attributes (Path, Expires, HttpOnly ...) kept, so a replayed
        response still sets its cookies by name (a request's Cookie header has no attributes)."""
        pieces: list[str] = []
        pos = 0
        for name, a, b in cookie_values(value, attributes=not request):
            secret = value[a:b]
            if self.rs.is_masked(secret):
                continue
            path = self.path((segs, f"\x00<cookie>.{name}") if name and not _value_hit(name, self.rs) else segs)
            if self.allowed(secret, path):
                continue
            self.report(COOKIE_RULE, secret, path)
            if self.replace:
                pieces += [value[pos:a], self.rs.placeholder_for(COOKIE_RULE)]
                pos = b
        if not pieces:
            return value
        return "".join(pieces) + value[pos:]

    def walk(self, value: Any, segs: _Segs, keys: tuple[str, ...], *, in_list: bool = False) -> Any:
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

    def mapping(self, obj: Mapping[str, Any], segs: _Segs, keys: tuple[str, ...]) -> Any:
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
            elif kind in _SCALARS:
                new = v
            else:
                new = self.walk(v, (segs, ks), nkeys)
            if replace:
                out[new_key] = new
        return out if replace else obj

    def string(self, s: str, segs: _Segs) -> str:
        if len(s) < self.short or s in self.clean:
            return s
        met = self.met
        path = self.path(segs)
        out = self.values(s, path)
        if "%" in out:
            out = self._encoded(out, segs)
        if "\\" in out:
            out = self._escaped(out, segs)
        if "=" in out:
            out = self._params(out, segs)
        if _has_form_data(out):
            out = self._multipart(out, segs)
        if '":' in out or '" :' in out:
            out = self._json_pairs(out, segs)
        if self.met == met and self.keep is not None:
            self.keep(s)
        return out

    def _params(self, s: str, segs: _Segs) -> str:
        def sub(m: re.Match[str]) -> str:
            name, val = m.group(1), m.group(2)
            rule = self.param_rule(name)
            if rule is None or len(val) < max(rule[2], 1) or self.rs.is_masked(unquote(val)):
                return m.group(0)
            path = self.path((segs, f"\x00?{name}"))
            if self.allowed(val, path):
                return m.group(0)
            self.report(rule[0], val, path)
            return f"{name}={self.rs.placeholder_for(rule[0])}" if self.replace else m.group(0)

        return _PARAM_RE.sub(sub, s)

    def _encoded(self, s: str, segs: _Segs) -> str:
        """Percent-encoded tokens (a query value, a path segment, a header value): clients
        encode ``/ : + =``, which hides a secret's shape (``?cb=https%3A%2F%2Fhooks.slack.com…``)
        from the value rules, so they are run on each token decoded too."""
        path = self.path(segs)

        def sub(m: re.Match[str]) -> str:
            token = m.group(0)
            before = self.reported
            new = self.values(unquote(token), path)
            return _quote(new) if self.reported > before and self.replace else token

        return _ENCODED_RE.sub(sub, s)

    def _multipart(self, s: str, segs: _Segs) -> str:
        """A text field of a multipart/form-data body whose name a key rule knows
        (``name="api_key"``, ``name="password"``): its value is redacted like a JSON key's."""
        pieces: list[str] = []
        pos = 0
        for m in _MULTIPART_RE.finditer(s):
            if "filename" in m.group(2).lower():
                continue
            rule = self.rs.key_rule(m.group(1))
            value = m.group(3)
            if rule is None or len(value) < max(rule[2], 1) or self.rs.is_masked(value):
                continue
            secret, kept = _split_scheme(value) if rule[0] in ("authorization", "auth") else (value, "")
            path = self.path((segs, f"\x00<form-data>.{m.group(1)}"))
            if self.rs.is_masked(secret) or self.allowed(secret, path):
                continue
            self.report(rule[0], secret, path)
            pieces += [s[pos:m.start(3)], kept + self.rs.placeholder_for(rule[0])]
            pos = m.end(3)
        if not self.replace or not pieces:
            return s
        return "".join(pieces) + s[pos:]

    def _escaped(self, s: str, segs: _Segs) -> str:
        """JSON string escapes (``\\/``, ``\\u002d``) hide a secret's shape from the value
        rules: each run of text that holds one is scanned unescaped too, and a redacted run is
        written back escaped (``/`` as ``\\/`` again, so the document keeps its style)."""
        path = self.path(segs)

        def sub(m: re.Match[str]) -> str:
            token = m.group(0)
            if "\\" not in token:
                return token
            before = self.reported
            new = self.values(_unescape_json(token), path)
            if not (self.reported > before and self.replace):
                return token
            return _json_str(new)[1:-1].replace("/", "\\/")

        return _ESCAPED_RE.sub(sub, s)

    def binary(self, b64: str, segs: _Segs, coding: str) -> str:
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
                _fmt_path(segs, self.rs), sorted(set(self.found_rules[first:])),
                f"sits in a body whose content-encoding ({coding}) casstore cannot {'undo' if undecodable else 'redo'}, "
                "so it cannot be redacted")
        return _rb.b64_encode(encoded)

    def _json_pairs(self, s: str, segs: _Segs) -> str:
        def sub(m: re.Match[str]) -> str:
            name, val = m.group(1), m.group(2)
            rule = self.rs.key_rule(name)
            if rule is not None and rule[0] == COOKIE_RULE:
                new = self.cookie(val, (segs, f"\x00<text>.{name}"), request=name.lower() == "cookie")
                return m.group(0)[: m.start(2) - m.start(0)] + new + '"'
            if rule is None or len(val) < max(rule[2], 1) or self.rs.is_masked(val):
                return m.group(0)
            if rule[0] == "token" and name == "token" and '"logprob"' in s:
                return m.group(0)
            secret, kept = _split_scheme(val) if rule[0] in ("authorization", "auth") else (val, "")
            if self.rs.is_masked(secret):
                return m.group(0)
            path = self.path((segs, f"\x00<text>.{name}"))
            if self.allowed(secret, path):
                return m.group(0)
            self.report(rule[0], secret, path)
            if not self.replace:
                return m.group(0)
            return m.group(0)[: m.start(2) - m.start(0)] + kept + self.rs.placeholder_for(rule[0]) + '"'

        return _JSON_PAIR_RE.sub(sub, s)

    def values(self, s: str, path: Callable[[], str]) -> str:
        """Apply the value rules (built-in shapes and config patterns) inside one string."""
        rs = self.rs
        lowered: str | None = None
        rules = rs.value_rules
        trigger = rs._trigger_re
        if rules and trigger is not None and not trigger.search(s):
            rules = ()  # one search tells that no built-in shape can match
        for rule in rules:
            if rule.triggers:
                if rule.ci_trigger:
                    if lowered is None:
                        lowered = s.lower()
                    if not any(t in lowered for t in rule.triggers):
                        continue
                elif not any(t in s for t in rule.triggers):
                    continue
            s = self._apply(s, rule.name, rule.regex, rule.group, rule.gate, path)
        for name, rx in rs.config_patterns:
            s = self._apply(s, name, rx, "secret" if "secret" in rx.groupindex else 0, None, path)
        if "@" in s and "://" in s:
            s = self._userinfo(s, path)
        # a base64 run is 24+ characters without whitespace: most prose has no such word
        if len(s) >= 24 and not self.unwrapping and max(map(len, s.split()), default=0) >= 24:
            s = self._wrapped(s, path)
        return s

    def _userinfo(self, s: str, path: Callable[[], str]) -> str:
        """A URL's user information, user and password alike (``https://TOKEN@host``,
        ``https://TOKEN:x-oauth-basic@host``): replaced whole while any part is not masked."""
        pieces: list[str] = []
        pos = 0
        for m in URL_USERINFO.finditer(s):
            info = m.group("info")
            parts = [p for p in self.rs.unmasked(info).split(":", 1) if not self.rs.is_masked(p)]
            if not parts:
                continue
            secret = info if len(parts) == 2 else parts[0]
            if self.allowed(secret, path):
                continue
            self.report(URL_USERINFO_RULE, secret, path)
            if self.replace:
                pieces += [s[pos:m.start("info")], self.rs.placeholder_for(URL_USERINFO_RULE)]
                pos = m.end("info")
        if not pieces:
            return s
        return "".join(pieces) + s[pos:]

    def _wrapped(self, s: str, path: Callable[[], str]) -> str:
        """A key wrapped in base64 (a JSON value, a query value, a header): each run of base64
        that decodes to text is scanned decoded; one holding a secret is replaced whole."""
        pieces: list[str] = []
        pos = 0
        for m in BASE64_RUN.finditer(s):
            text = _base64_text(m.group(0))
            if text is None:
                continue
            before, first = self.reported, len(self.found_rules)
            self.unwrapping = True
            try:
                self.values(text, path)
            finally:
                self.unwrapping = False
            if self.reported > before and self.replace:
                pieces += [s[pos:m.start()], self.rs.placeholder_for(self.found_rules[first])]
                pos = m.end()
        if not pieces:
            return s
        return "".join(pieces) + s[pos:]

    def _apply(self, s: str, name: str, rx: re.Pattern[str], group: int | str, gate: Callable[[str], bool] | None,
               path: Callable[[], str]) -> str:
        pieces: list[str] = []
        pos = 0
        for m in rx.finditer(s):
            secret = m.group(group)
            if not secret or (gate is not None and not gate(secret)) or self.rs.is_masked(secret):
                continue
            if self.allowed(secret, path):
                continue
            self.report(name, secret, path)
            if self.replace:
                a, b = m.span(group)
                pieces.append(s[pos:a])
                pieces.append(self.rs.placeholder_for(name))
                pos = b
        if not self.replace or not pieces:
            return s
        pieces.append(s[pos:])
        return "".join(pieces)


_HEX = lazy_pattern(r"[0-9a-f]+|[0-9A-F]+")
_CONTROL = lazy_pattern(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _base64_text(token: str) -> str | None:
    """The text a base64 or base64url run stands for (UTF-8, no control characters), or None."""
    body = token.rstrip("=")
    if len(body) % 4 == 1 or _HEX.fullmatch(body):  # hex (a digest, an id) wraps no text
        return None
    try:
        raw = base64.b64decode(body.replace("-", "+").replace("_", "/") + "=" * (-len(body) % 4), validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return None if len(text) < 16 or _CONTROL.search(text) else text


def _same_kind(original: list[Any] | tuple[Any, ...], items: list[Any]) -> list[Any] | tuple[Any, ...]:
    return tuple(items) if isinstance(original, tuple) else items


def _quote(v: str) -> str:
    """Re-encode a decoded query value, keeping the placeholder's brackets readable."""
    return quote(v, safe="[]:")


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


def summarize(findings: Iterable[Finding]) -> dict[str, int]:
    """Hits per rule name, sorted by name."""
    out: dict[str, int] = {}
    for f in findings:
        out[f.rule] = out.get(f.rule, 0) + 1
    return dict(sorted(out.items()))
