"""What a string holds: the value rules and the secrets written inside text (parameters,
encoded and wrapped tokens, JSON text, multipart fields, cookies, a URL's user information),
found and replaced by a :class:`TextScanner`; :mod:`.redaction` walks documents on top of it."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Set
from typing import Any
from urllib.parse import quote, unquote

from .redaction_rules import (
    BASE64_RUN,
    COOKIE_RULE,
    URL_USERINFO,
    URL_USERINFO_RULE,
    RuleSet,
    builtin_rule,
    lazy_pattern,
)

Emit = Callable[[str, str, Callable[[], str]], None]  # (rule, secret text, lazy path)
# where a value sits: () at the top, else (where its container sits, its key or index); the
# JSON path is built from it only for a finding
Segs = tuple[Any, ...]

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
_SCHEMES = frozenset("bearer basic token digest bot negotiate ntlm hmac apikey".split())
_IDENT = lazy_pattern(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_HEX = lazy_pattern(r"[0-9a-f]+|[0-9A-F]+")
_CONTROL = lazy_pattern(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def split_scheme(value: str) -> tuple[str, str]:
    """("Bearer abc") -> ("abc", "Bearer "): keep the auth scheme readable, redact the credential."""
    parts = value.split(None, 1)
    if len(parts) == 2 and parts[0].lower() in _SCHEMES:
        return parts[1], value[: len(value) - len(parts[1])]
    return value, ""


def fmt_path(segs: Segs, rs: RuleSet) -> str:
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
    return json.dumps(s, ensure_ascii=False)


def _value_hit(s: str, rs: RuleSet) -> bool:
    """Whether a value rule finds a secret in ``s`` (a key: printed withheld)."""
    walker = TextScanner(rs, lambda rule, secret, path: None, replace=False)
    walker.values(s, lambda: "")
    return walker.reported > 0


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


# A Cookie or Set-Cookie value keeps its cookies' names and Set-Cookie's attributes; each
# cookie's value is the secret. An attribute is kept only in its own shape.
_COOKIE_ATTRIBUTES: dict[str, re.Pattern[str]] = {
    "expires": lazy_pattern(r"[A-Za-z0-9 ,:\-]{1,40}"),
    "max-age": lazy_pattern(r"-?[0-9]{1,12}"),
    "domain": lazy_pattern(r"\.?[A-Za-z0-9.\-]{1,253}"),
    "path": lazy_pattern(r"/[A-Za-z0-9._~!$&'()*+=:@/%\-]{0,200}"),
    "samesite": lazy_pattern(r"(?i:strict|lax|none)"),
    "priority": lazy_pattern(r"(?i:low|medium|high)"),
    "version": lazy_pattern(r"[0-9]{1,3}"),
}
_COOKIE_FLAGS = frozenset({"secure", "httponly", "partitioned"})
# a piece ends at ";" or at a "," that starts the next cookie of a folded header (what follows
# is ``name=``; the comma of ``Expires=Wed, 21 Oct 2015 ...`` is followed by no such name)
_COOKIE_PIECE = lazy_pattern(r"(?:[^;,]|,(?!\s*[^\s=;,]+=))*")


def cookie_values(text: str, *, attributes: bool = True) -> list[tuple[str, int, int]]:
    """``(cookie name, start, end)`` of each cookie's value in a Cookie or Set-Cookie header
    value (a nameless value has name ""); names, attributes and separators are not values.
    ``attributes=False``: a request's Cookie header, where every piece is a cookie."""
    out: list[tuple[str, int, int]] = []
    first = True  # the piece is a cookie's name=value (not one of its attributes)
    for m in _COOKIE_PIECE.finditer(text):
        piece = m.group(0)
        if m.start() == m.end() and m.start() > 0 and text[m.start() - 1] not in ";,":
            continue  # finditer's empty match after a piece
        name, eq, value = piece.partition("=")
        name = name.strip()
        if eq:
            shape = None if first else _COOKIE_ATTRIBUTES.get(name.lower())
            start = m.start() + len(piece) - len(value)
            a = start + len(value) - len(value.lstrip())
            b = start + len(value.rstrip())
            if a < b and not (shape is not None and shape.fullmatch(text[a:b])):
                out.append((name, a, b))
        elif name and (first or name.lower() not in _COOKIE_FLAGS):
            a = m.start() + len(piece) - len(piece.lstrip())
            out.append(("", a, a + len(name)))
        end = m.end()
        first = not attributes or (end < len(text) and text[end] == ",")  # a folded header's next cookie
    return out


class TextScanner:
    """Every secret the rules find in one string reported to ``emit`` (with a lazily built JSON
    path) and, with ``replace``, swapped for its placeholder. A string in which nothing was met
    is remembered by its rule set, so the next document skips it."""

    def __init__(self, rs: RuleSet, emit: Emit, replace: bool) -> None:
        self.rs = rs
        self.emit = emit
        self.replace = replace
        self.reported = 0  # secrets reported to emit
        self.met = 0  # secrets reported or let through by allow: a string with none is clean
        self.found_rules: list[str] = []  # the rule of each secret reported
        self.unwrapping = False  # inside a base64 run's decoded text
        clean = rs._clean_texts
        self.ours = clean.owner is not None and clean.owner() is rs  # a copy's cache is not ours
        self.clean: Set[str] = clean if self.ours else frozenset()
        self.keep = clean.keep if self.ours else None
        self.short = 0 if rs.config_patterns else 8  # no built-in rule finds a secret in fewer characters

    def path(self, segs: Segs) -> Callable[[], str]:
        return lambda: fmt_path(segs, self.rs)

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

    def keyed_text(self, rule: tuple[str, bool, int], value: str, path: Callable[[], str]) -> str | None:
        """What replaces ``value``, a string under a key that ``rule`` names, once its secret is
        reported (an auth scheme kept); None when it holds none (too short, masked, allowed)."""
        name = rule[0]
        if len(value) < max(rule[2], 1) or self.rs.is_masked(value):
            return None
        secret, kept = split_scheme(value) if name in ("authorization", "auth") else (value, "")
        if self.rs.is_masked(secret) or self.allowed(secret, path):
            return None
        self.report(name, secret, path)
        return kept + self.rs.placeholder_for(name)

    def cookie(self, value: str, segs: Segs, *, request: bool = False) -> str:
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

    def string(self, s: str, segs: Segs) -> str:
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
        # "form-data" in any case (a part's header may say form-Data), lowered only when it may be
        if ("-d" in out or "-D" in out) and "form-data" in out.lower():
            out = self._multipart(out, segs)
        if '":' in out or '" :' in out:
            out = self._json_pairs(out, segs)
        if self.met == met and self.keep is not None:
            self.keep(s)
        return out

    def _params(self, s: str, segs: Segs) -> str:
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

    def _encoded(self, s: str, segs: Segs) -> str:
        """Percent-encoded tokens (a query value, a path segment, a header value): clients
        encode ``/ : + =``, which hides a secret's shape (``?cb=https%3A%2F%2Fhooks.slack.com…``)
        from the value rules, so they are run on each token decoded too."""
        path = self.path(segs)

        def sub(m: re.Match[str]) -> str:
            token = m.group(0)
            before = self.reported
            new = self.values(unquote(token), path)
            # encoded again, the placeholder's brackets kept readable
            return quote(new, safe="[]:") if self.reported > before and self.replace else token

        return _ENCODED_RE.sub(sub, s)

    def _multipart(self, s: str, segs: Segs) -> str:
        """A text field of a multipart/form-data body whose name a key rule knows
        (``name="api_key"``, ``name="password"``): its value is redacted like a JSON key's."""
        pieces: list[str] = []
        pos = 0
        for m in _MULTIPART_RE.finditer(s):
            if "filename" in m.group(2).lower():
                continue
            rule = self.rs.key_rule(m.group(1))
            if rule is None:
                continue
            new = self.keyed_text(rule, m.group(3), self.path((segs, f"\x00<form-data>.{m.group(1)}")))
            if new is not None:
                pieces += [s[pos:m.start(3)], new]
                pos = m.end(3)
        if not self.replace or not pieces:
            return s
        return "".join(pieces) + s[pos:]

    def _escaped(self, s: str, segs: Segs) -> str:
        """JSON string escapes (``\\/``, ``\\u002d``) hide a secret's shape from the value
        rules: each run of text that holds one is scanned unescaped too, and a redacted run is
        written back escaped (``/`` as ``\\/`` again, so the document keeps its style)."""
        path = self.path(segs)

        def sub(m: re.Match[str]) -> str:
            token = m.group(0)
            if "\\" not in token:
                return token
            before = self.reported
            unescaped = _UNESCAPE_RE.sub(  # \/ and \uXXXX undone
                lambda e: "/" if e.group(0) == "\\/" else chr(int(e.group(0)[2:], 16)), token)
            new = self.values(unescaped, path)
            if not (self.reported > before and self.replace):
                return token
            return _json_str(new)[1:-1].replace("/", "\\/")

        return _ESCAPED_RE.sub(sub, s)

    def _json_pairs(self, s: str, segs: Segs) -> str:
        def sub(m: re.Match[str]) -> str:
            name, val = m.group(1), m.group(2)
            rule = self.rs.key_rule(name)
            if rule is not None and rule[0] == COOKIE_RULE:
                new = self.cookie(val, (segs, f"\x00<text>.{name}"), request=name.lower() == "cookie")
                return m.group(0)[: m.start(2) - m.start(0)] + new + '"'
            if rule is None or (rule[0] == "token" and name == "token" and '"logprob"' in s):
                return m.group(0)
            replaced = self.keyed_text(rule, val, self.path((segs, f"\x00<text>.{name}")))
            if replaced is None or not self.replace:
                return m.group(0)
            return m.group(0)[: m.start(2) - m.start(0)] + replaced + '"'

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
