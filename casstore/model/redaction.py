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

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from ..errors import ConfigError

__all__ = [
    "RuleSet",
    "Finding",
    "redact",
    "scan",
    "mask",
    "summarize",
    "key_words",
    "BUILTIN_KEY_RULES",
    "BUILTIN_VALUE_RULES",
    "DEFAULT_PLACEHOLDER",
]

DEFAULT_PLACEHOLDER = "[REDACTED:{rule}]"

# -- key rules -----------------------------------------------------------------------

# A key whose words after the sensitive word include one of these describes a credential
# (its type, name, lifetime, where to get one) rather than holding one.
_META_WORDS = frozenset(
    "type types count counts id ids name names url urls uri uris endpoint endpoints path paths "
    "expires expiry expiration expire expired ttl limit limits usage length len size index kind "
    "method methods scheme schemes scope scopes format header provider required enabled status "
    "version at in time timestamp hint policy label labels ref arn budget logprob logprobs mode "
    "strategy supported location host port region file filename prefix suffix created updated "
    "valid validity rotation used details source field param parameter env var lifetime duration "
    "age issued remaining reset rate ratelimit".split()
)
# ``page_token``, ``eos_token``, ``pad_token``: cursors and vocabulary entries, not credentials.
_NOT_CREDENTIAL_TOKEN = frozenset(
    "page pagination continuation next prev previous cursor sync stop start end eos bos pad unk "
    "sep cls mask special bot eot im".split()
)
# Values that are already masks: nothing left to leak.
_MASK_WORDS = frozenset(
    "redacted <redacted> [redacted] (redacted) filtered [filtered] <filtered> hidden masked removed "
    "none null nil undefined dummy fake test testing example placeholder changeme xxx".split()
)
_MASK_CHARS = frozenset("*xX•#-_. ")


@functools.lru_cache(maxsize=4096)
def key_words(key: str) -> tuple[str, ...]:
    """The lower-case words of a key: ``X-Api-Key`` -> (x, api, key); ``sessionToken`` -> (session, token)."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", key)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", s)
    return tuple(w for w in re.split(r"[^a-z0-9]+", s.lower()) if w)


def _word_rule(words_wanted: Iterable[str], *, exclude_before: frozenset[str] = frozenset()):  # type: ignore[no-untyped-def]
    wanted = frozenset(words_wanted)

    def match(words: tuple[str, ...]) -> bool:
        for i, w in enumerate(words):
            if w in wanted:
                if i > 0 and words[i - 1] in exclude_before:
                    continue
                if any(x in _META_WORDS for x in words[i + 1 :]):
                    continue
                return True
        return False

    return match


def _pair_rule(pairs: Iterable[tuple[str, str]], singles: Iterable[str] = ()):  # type: ignore[no-untyped-def]
    pairs = frozenset(pairs)
    singles = frozenset(singles)

    def match(words: tuple[str, ...]) -> bool:
        for i, w in enumerate(words):
            hit = w in singles or (i + 1 < len(words) and (w, words[i + 1]) in pairs)
            if hit:
                rest = words[i + 2 :] if w not in singles else words[i + 1 :]
                if not any(x in _META_WORDS for x in rest):
                    return True
        return False

    return match


@dataclass(frozen=True)
class KeyRule:
    name: str
    match: Callable[[tuple[str, ...]], bool]
    wholesale: bool = False  # redact any non-empty value (containers too), not only strings
    min_len: int = 1  # shortest string value that counts as a secret


# First match wins, so the more specific names come first.
BUILTIN_KEY_RULES: tuple[KeyRule, ...] = (
    KeyRule("authorization", _word_rule(["authorization"])),
    KeyRule("cookie", _word_rule(["cookie", "cookies"])),
    KeyRule("api-key", _pair_rule([("api", "key"), ("api", "keys"), ("subscription", "key")], ["apikey", "apikeys"])),
    KeyRule("private-key", _pair_rule([("private", "key")], ["privatekey"])),
    KeyRule("password", _word_rule(["password", "passwd", "passphrase", "passwords"])),
    KeyRule("secret", _word_rule(["secret", "secrets"]), min_len=4),
    KeyRule("token", _word_rule(["token"], exclude_before=_NOT_CREDENTIAL_TOKEN), min_len=6),
    KeyRule("auth", _word_rule(["auth"]), min_len=6),
    KeyRule("credential", _word_rule(["credential", "credentials"]), min_len=6),
    KeyRule("holdout", _word_rule(["holdout", "holdouts"]), wholesale=True),
    KeyRule("vault", _word_rule(["vault"]), wholesale=True),
)

# -- value rules ---------------------------------------------------------------------

_B = r"(?<![A-Za-z0-9_\-])"  # left boundary that also treats '-' and '_' as part of a token
_E = r"(?![A-Za-z0-9_\-])"
_BEGIN = "-" * 5 + "BEGIN"  # built from pieces: the repo's own secret scan greps for the literal
_END = "-" * 5 + "END"


def _looks_random(s: str) -> bool:
    """At least two of lower/upper/digit and eight distinct characters (not ``xxxx…``, not prose)."""
    classes = any(c.islower() for c in s) + any(c.isupper() for c in s) + any(c.isdigit() for c in s)
    return classes >= 2 and len(set(s)) >= 8


@dataclass(frozen=True)
class ValueRule:
    name: str
    regex: re.Pattern[str]
    triggers: tuple[str, ...]  # cheap substring pre-check; empty = always run the regex
    group: int | str = 0  # the group that is the secret
    gate: Callable[[str], bool] | None = None  # extra test on the secret text
    ci_trigger: bool = False  # triggers are compared case-insensitively


def _vr(name: str, pattern: str, triggers: Iterable[str], *, group: int | str = 0,
        gate: Callable[[str], bool] | None = None, flags: int = 0, ci: bool = False) -> ValueRule:
    return ValueRule(name, re.compile(pattern, flags), tuple(triggers), group, gate, ci)


BUILTIN_VALUE_RULES: tuple[ValueRule, ...] = (
    _vr("pem-private-key",
        _BEGIN + r" ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----[\s\S]*?(?:" + _END
        + r" \1PRIVATE KEY\2-----|\Z)", [_BEGIN]),
    _vr("anthropic-key", _B + r"sk-ant-[A-Za-z0-9_\-]{20,}" + _E, ["sk-ant-"]),
    _vr("openai-key", _B + r"sk-(?!ant-)(?:(?:proj|svcacct|admin|None)-)?[A-Za-z0-9_\-]{20,}" + _E, ["sk-"],
        gate=lambda s: _looks_random(s[3:])),
    _vr("stripe-key", _B + r"[rs]k_(?:live|test)_[A-Za-z0-9]{16,}" + _E, ["k_live_", "k_test_"],
        gate=lambda s: _looks_random(s[8:])),
    _vr("aws-access-key-id", r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
        ["AKIA", "ASIA", "ABIA", "ACCA"]),
    _vr("aws-secret-key",
        r"(?i:aws)[A-Za-z0-9_\-. \"']{0,30}?(?i:secret)[A-Za-z0-9_\-. \"']{0,30}?[\s:=\"',]+"
        r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])", ["aws"], group="secret", ci=True),
    _vr("github-token", _B + r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}" + _E,
        ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]),
    _vr("github-token", _B + r"github_pat_[A-Za-z0-9_]{22,}" + _E, ["github_pat_"]),
    _vr("slack-token", _B + r"xox[abposr]-[A-Za-z0-9\-]{10,}" + _E, ["xox"],
        gate=lambda s: _looks_random(s[5:])),
    _vr("slack-webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]{20,}", ["hooks.slack.com"]),
    _vr("google-api-key", _B + r"AIza[0-9A-Za-z_\-]{35}" + _E, ["AIza"]),
    _vr("huggingface-token", _B + r"hf_[A-Za-z]{34,}" + _E, ["hf_"], gate=lambda s: _looks_random(s[3:])),
    _vr("jwt", _B + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*", ["eyJ"]),
    _vr("bearer-token", r"(?i:\bbearer)\s+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)", ["bearer"],
        group="secret", gate=_looks_random, ci=True),
    _vr("url-credentials", r"[a-z][a-z0-9+.\-]*://[^/\s:@\"']+:(?P<secret>[^/\s@\"']{3,})@", ["://"],
        group="secret"),
)

# key=value pairs in query strings and form bodies, and "key": "value" inside JSON text
_PARAM_RE = re.compile(r"(?:(?<=[?&;])|^)([A-Za-z0-9_.\-\[\]]{1,64})=([^&#\s\"'<>]*)")
_ENCODED_RE = re.compile(r"[^\s/?&#=;,\"'<>]*%[0-9A-Fa-f]{2}[^\s/?&#=;,\"'<>]*")
_JSON_PAIR_RE = re.compile(r'"([^"\\]{1,64})"\s*:\s*"((?:[^"\\]|\\.){1,4096})"')


def mask(secret: str) -> str:
    """A preview that never reveals the secret: the first 4 characters of a long one, and its length."""
    n = len(secret)
    if n >= 16:
        return f"{secret[:4]}…({n} chars)"
    return f"…({n} chars)"


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


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~\-]{1,64}$")


# -- the rule set ----------------------------------------------------------------------
@dataclass(frozen=True)
class _ConfigKey:
    name: str
    norm: str


@dataclass(frozen=True)
class RuleSet:
    """The always-on rules plus a project's ``[redaction]`` table. Build with :meth:`from_config`."""

    key_rules: tuple[KeyRule, ...] = BUILTIN_KEY_RULES
    value_rules: tuple[ValueRule, ...] = BUILTIN_VALUE_RULES
    config_keys: tuple[_ConfigKey, ...] = ()
    config_paths: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (rule name, segments)
    config_patterns: tuple[tuple[str, re.Pattern[str]], ...] = ()
    allow: tuple[re.Pattern[str], ...] = ()
    placeholder: str = DEFAULT_PLACEHOLDER
    _key_cache: dict[str, tuple[str, bool, int] | None] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> RuleSet:
        """Defaults + a ``[redaction]`` table (``paths``, ``patterns``, ``keys``, ``allow``, ``placeholder``).

        Accepts the table itself, a whole config mapping with a ``redaction`` key, or a
        :class:`casstore.config.Config`.
        """
        if cfg is None:
            return cls()
        if hasattr(cfg, "redaction") and not isinstance(cfg, Mapping):
            cfg = cfg.redaction
        if isinstance(cfg, Mapping) and isinstance(cfg.get("redaction"), Mapping):
            cfg = cfg["redaction"]
        if not isinstance(cfg, Mapping):
            raise ConfigError("[redaction] must be a table")
        problems: list[str] = []

        def strings(key: str) -> list[str]:
            val = cfg.get(key, [])
            if not isinstance(val, list) or not all(isinstance(x, str) for x in val):
                problems.append(f"'redaction.{key}' must be a list of strings")
                return []
            return val

        def compile_all(key: str) -> list[tuple[str, re.Pattern[str]]]:
            out = []
            for i, src in enumerate(strings(key)):
                try:
                    out.append((src, re.compile(src)))
                except re.error as exc:
                    problems.append(f"'redaction.{key}[{i}]' is not a valid regex: {exc}")
            return out

        keys = tuple(_ConfigKey(k, _norm(k)) for k in strings("keys") if _norm(k))
        paths = []
        for i, p in enumerate(strings("paths")):
            segs = tuple(s for s in p.strip().lstrip("$").strip(".").split("."))
            if not p.strip() or any(not s for s in segs):
                problems.append(f"'redaction.paths[{i}]' must be a dot-path such as 'customer.email', got {p!r}")
                continue
            paths.append((f"path:{p.strip()}", segs))
        patterns = tuple((f"pattern:{src}", rx) for src, rx in compile_all("patterns"))
        allow = tuple(rx for _src, rx in compile_all("allow"))
        placeholder = cfg.get("placeholder", DEFAULT_PLACEHOLDER)
        if not isinstance(placeholder, str) or not placeholder:
            problems.append("'redaction.placeholder' must be a non-empty string")
            placeholder = DEFAULT_PLACEHOLDER
        extra = sorted(set(cfg) - {"paths", "patterns", "keys", "allow", "placeholder"})
        if extra:
            problems.append(f"unknown key(s) {', '.join(map(repr, extra))} in [redaction]")
        if problems:
            raise ConfigError("; ".join(problems))
        return cls(config_keys=keys, config_paths=tuple(paths), config_patterns=patterns, allow=allow,
                   placeholder=placeholder)

    # -- introspection ------------------------------------------------------------------
    def describe(self) -> list[str]:
        """Rule names, for a cassette's ``redaction.rules``."""
        names: list[str] = []
        for n in [r.name for r in self.key_rules] + [r.name for r in self.value_rules]:
            if n not in names:
                names.append(n)
        names += [f"key:{k.name}" for k in self.config_keys]
        names += [n for n, _ in self.config_paths]
        names += [n for n, _ in self.config_patterns]
        return names

    # -- matching helpers ---------------------------------------------------------------------
    def placeholder_for(self, rule: str) -> str:
        return self.placeholder.replace("{rule}", rule)

    @functools.cached_property
    def _placeholder_re(self) -> re.Pattern[str]:
        """Any placeholder this rule set writes (so a redacted value is not a finding again)."""
        names = "|".join(re.escape(n) for n in sorted(self.describe(), key=len, reverse=True))
        head, _, tail = self.placeholder.partition("{rule}")
        if not _:
            return re.compile(re.escape(self.placeholder))
        return re.compile(re.escape(head) + "(?:" + names + ")" + re.escape(tail))

    @functools.cached_property
    def _trigger_re(self) -> re.Pattern[str] | None:
        """Any trigger of any value rule (None when some rule has no trigger and must always run)."""
        if any(not r.triggers for r in self.value_rules):
            return None
        exact = sorted({t for r in self.value_rules if not r.ci_trigger for t in r.triggers})
        folded = sorted({t for r in self.value_rules if r.ci_trigger for t in r.triggers})
        parts = [re.escape(t) for t in exact] + ["(?i:" + re.escape(t) + ")" for t in folded]
        return re.compile("|".join(parts))

    def is_masked(self, value: str) -> bool:
        """True for values that are already redacted or are an obvious mask (``***``, ``<redacted>``)."""
        v = value.strip()
        if not v:
            return True
        if "[REDACTED" in v or self._placeholder_re.search(v):
            return True
        if v.lower() in _MASK_WORDS or set(v) <= _MASK_CHARS:
            return True
        # "Bearer ***", "Basic <redacted>"
        parts = v.split()
        return len(parts) == 2 and (parts[1].lower() in _MASK_WORDS or set(parts[1]) <= _MASK_CHARS)

    def allowed(self, secret: str, path: Callable[[], str]) -> bool:
        if not self.allow:
            return False
        p = path()
        return any(rx.search(secret) or rx.search(p) for rx in self.allow)

    def key_rule(self, key: str) -> tuple[str, bool, int] | None:
        """(rule name, wholesale, min_len) for a key, or None."""
        cached = self._key_cache.get(key, False)
        if cached is not False:
            return cached  # type: ignore[return-value]
        result: tuple[str, bool, int] | None = None
        if self.config_keys:
            n = _norm(key)
            for ck in self.config_keys:
                if n == ck.norm:
                    result = (f"key:{ck.name}", True, 1)
                    break
        if result is None:
            words = key_words(key)
            for rule in self.key_rules:
                if rule.match(words):
                    result = (rule.name, rule.wholesale, rule.min_len)
                    break
        if len(self._key_cache) < 65536:
            self._key_cache[key] = result
        return result

    def path_rule(self, keys: tuple[str, ...]) -> str | None:
        for name, segs in self.config_paths:
            if len(keys) >= len(segs) and all(
                s == "*" or s == k for s, k in zip(segs, keys[len(keys) - len(segs) :], strict=True)
            ):
                return name
        return None


def _norm(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key.lower())


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
        for k, v in obj.items():
            ks = k if isinstance(k, str) else str(k)
            nsegs = (*segs, ks)
            nkeys = (*keys, ks)
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
        if is_key:
            return out
        if "=" in out:
            out = self._params(out, segs)
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


_AWS_ID = re.compile(r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}")
_AWS_SECRET = re.compile(r"[A-Za-z0-9/+]{40}")
_SCHEMES = frozenset("bearer basic token digest bot negotiate ntlm hmac apikey".split())


def _same_kind(original: list[Any] | tuple[Any, ...], items: list[Any]) -> list[Any] | tuple[Any, ...]:
    return tuple(items) if isinstance(original, tuple) else items


def _split_scheme(value: str) -> tuple[str, str]:
    """("Bearer abc") -> ("abc", "Bearer "): keep the auth scheme readable, redact the credential."""
    parts = value.split(None, 1)
    if len(parts) == 2 and parts[0].lower() in _SCHEMES:
        return parts[1], value[: len(value) - len(parts[1])]
    return value, ""


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

    def emit(rule: str, secret: str, lazy_path: Callable[[], str]) -> None:
        p = lazy_path()
        p = path + p[1:] if path != "$" else p
        m = re.match(r"^\$\.entries\[(\d+)\]", p)
        findings.append(Finding(rule=rule, path=p, preview=mask(secret), entry=int(m.group(1)) if m else None))

    _Walker(rs, emit, replace=False).walk(obj, (), ())
    return findings


def summarize(findings: Iterable[Finding]) -> dict[str, int]:
    """Hits per rule name, sorted by name."""
    out: dict[str, int] = {}
    for f in findings:
        out[f.rule] = out.get(f.rule, 0) + 1
    return dict(sorted(out.items()))
