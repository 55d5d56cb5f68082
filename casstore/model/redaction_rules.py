"""Redaction rules (pure, no I/O): the built-in key and value rules and a project's
``[redaction]`` table, held by a :class:`RuleSet`; :mod:`.redaction` applies them."""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConfigError
from .credentials import KEY_OWNERS, NAMES, PARAM_MIN_LEN, PARAMS

__all__ = [
    "RuleSet",
    "KeyRule",
    "ValueRule",
    "mask",
    "key_words",
    "looks_random",
    "lazy_pattern",
    "BUILTIN_KEY_RULES",
    "BUILTIN_PARAM_RULES",
    "BUILTIN_VALUE_RULES",
    "builtin_rule",
    "URL_USERINFO_RULE",
    "COOKIE_RULE",
    "URL_USERINFO",
    "BASE64_RUN",
    "DEFAULT_PLACEHOLDER",
]

DEFAULT_PLACEHOLDER = "[REDACTED:{rule}]"


class _LazyPattern:
    """``re.compile(pattern, flags)`` on first use: the rules a text never triggers are never
    compiled (the pre-commit hook and ``add`` pay only for what they meet)."""

    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern = pattern
        self._flags = flags

    def _compiled(self) -> re.Pattern[str]:
        rx = re.compile(self.pattern, self._flags)
        # the pattern's methods and attributes on the instance: later uses find them there
        for name in ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "scanner",
                     "flags", "groups", "groupindex"):
            setattr(self, name, getattr(rx, name))
        return rx

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._compiled(), name)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _LazyPattern):
            return (self.pattern, self._flags) == (other.pattern, other._flags)
        return re.compile(self.pattern, self._flags) == other

    def __hash__(self) -> int:
        return hash(re.compile(self.pattern, self._flags))

    def __repr__(self) -> str:
        return repr(re.compile(self.pattern, self._flags))

    # as a compiled pattern: copies are the object itself, pickled as its source (once it is
    # compiled, the instance holds the pattern's methods and its groupindex, a mappingproxy)
    def __copy__(self) -> _LazyPattern:
        return self

    def __deepcopy__(self, memo: object) -> _LazyPattern:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_LazyPattern, (self.pattern, self._flags))


def lazy_pattern(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A regex compiled when it is first used (what ``re.compile`` returns, for its callers)."""
    return _LazyPattern(pattern, flags)  # type: ignore[return-value]

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


def _named_rule(names: Iterable[str]):  # type: ignore[no-untyped-def]
    wanted = frozenset(key_words(n) for n in names)

    def match(words: tuple[str, ...]) -> bool:
        return words in wanted

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
    KeyRule("api-key", _pair_rule([(w, k) for w in KEY_OWNERS for k in ("key", "keys")], ["apikey", "apikeys"])),
    KeyRule("private-key", _pair_rule([("private", "key")], ["privatekey"])),
    KeyRule("password", _word_rule(["password", "passwd", "passphrase", "passwords"])),
    KeyRule("secret", _word_rule(["secret", "secrets"]), min_len=4),
    KeyRule("token", _word_rule(["token"], exclude_before=_NOT_CREDENTIAL_TOKEN), min_len=6),
    KeyRule("auth", _word_rule(["auth"]), min_len=6),
    KeyRule("credential", _word_rule(["credential", "credentials"]), min_len=6),
    KeyRule("holdout", _word_rule(["holdout", "holdouts"]), wholesale=True),
    KeyRule("vault", _word_rule(["vault"]), wholesale=True),
    # the names of model/credentials.py that say nothing by their words (x-honeycomb-team ...)
    *(KeyRule(rule, _named_rule(n for n, (r, _since) in NAMES.items() if r == rule))
      for rule in dict.fromkeys(r for r, _since in NAMES.values())),
)
# names that are credentials only as a query or form parameter, or in a [name, value] pair
BUILTIN_PARAM_RULES: tuple[KeyRule, ...] = tuple(
    KeyRule(rule, _named_rule(n for n, (r, _since) in PARAMS.items() if r == rule), min_len=PARAM_MIN_LEN)
    for rule in dict.fromkeys(r for r, _since in PARAMS.values()))


@functools.lru_cache(maxsize=4096)
def builtin_rule(name: str, *, param: bool = False) -> tuple[str, bool, int] | None:
    """(rule name, wholesale, min_len) of the built-in rule that names ``name`` a credential
    (as a parameter or a pair's name too with ``param``), or None."""
    words = key_words(name)
    for rule in BUILTIN_KEY_RULES + (BUILTIN_PARAM_RULES if param else ()):
        if rule.match(words):
            return (rule.name, rule.wholesale, rule.min_len)
    return None

# -- value rules ---------------------------------------------------------------------

_B = r"(?<![A-Za-z0-9_\-])"  # left boundary that also treats '-' and '_' as part of a token
_E = r"(?![A-Za-z0-9_\-])"
_BEGIN = "-" * 5 + "BEGIN"  # built from pieces: the repo's own secret scan greps for the literal
_END = "-" * 5 + "END"


def looks_random(s: str) -> bool:
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
    return ValueRule(name, lazy_pattern(pattern, flags), tuple(triggers), group, gate, ci)


BUILTIN_VALUE_RULES: tuple[ValueRule, ...] = (
    _vr("pem-private-key",
        _BEGIN + r" ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----[\s\S]*?(?:" + _END
        + r" \1PRIVATE KEY\2-----|\Z)", [_BEGIN]),
    _vr("anthropic-key", _B + r"sk-ant-[A-Za-z0-9_\-]{20,}" + _E, ["sk-ant-"]),
    _vr("openai-key", _B + r"sk-(?!ant-)(?:(?:proj|svcacct|admin|None)-)?[A-Za-z0-9_\-]{20,}" + _E, ["sk-"],
        gate=lambda s: looks_random(s[3:])),
    _vr("stripe-key", _B + r"[rs]k_(?:live|test)_[A-Za-z0-9]{16,}" + _E, ["k_live_", "k_test_"],
        gate=lambda s: looks_random(s[8:])),
    _vr("aws-access-key-id", r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
        ["AKIA", "ASIA", "ABIA", "ACCA"]),
    _vr("aws-secret-key",
        r"(?i:aws)[A-Za-z0-9_\-. \"']{0,30}?(?i:secret)[A-Za-z0-9_\-. \"']{0,30}?[\s:=\"',]+"
        r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])", ["aws"], group="secret", ci=True),
    _vr("github-token", _B + r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}" + _E,
        ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]),
    _vr("github-token", _B + r"github_pat_[A-Za-z0-9_]{22,}" + _E, ["github_pat_"]),
    _vr("slack-token", _B + r"xox[abposr]-[A-Za-z0-9\-]{10,}" + _E, ["xox"],
        gate=lambda s: looks_random(s[5:])),
    _vr("slack-webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]{20,}", ["hooks.slack.com"]),
    _vr("google-api-key", _B + r"AIza[0-9A-Za-z_\-]{35}" + _E, ["AIza"]),
    _vr("huggingface-token", _B + r"hf_[A-Za-z]{34,}" + _E, ["hf_"], gate=lambda s: looks_random(s[3:])),
    _vr("jwt", _B + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*", ["eyJ"]),
    _vr("bearer-token", r"(?i:\bbearer)\s+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)", ["bearer"],
        group="secret", gate=looks_random, ci=True),
)

# A URL's user information (``https://TOKEN@host``, ``https://user:password@host``): the
# walker replaces all of it (user and password) under this rule's name.
URL_USERINFO_RULE = "url-credentials"
URL_USERINFO = lazy_pattern(r"[A-Za-z][A-Za-z0-9+.\-]*://(?P<info>[^/?#\s\"'<>\\]+)@")
# a base64 (or base64url) run long enough to wrap a key: decoded and scanned too
BASE64_RUN = lazy_pattern(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{24,}={0,2}")


# the rule of a Cookie or Set-Cookie value: each cookie's value redacted, names and attributes kept
COOKIE_RULE = "cookie"


def mask(secret: str) -> str:
    """A preview that never reveals the secret: the first 4 characters of a long one, and its length."""
    n = len(secret)
    if n >= 16:
        return f"{secret[:4]}…({n} chars)"
    return f"…({n} chars)"


# -- the rule set ----------------------------------------------------------------------
class CleanTexts(set[str]):
    """Strings in which the secret scan met nothing, for the rule set ``owner`` only (held by a
    weak reference, so a rule set is no reference cycle; a copy shares the cache but does not
    use it). At most ``LIMIT`` characters: past it the old ones are dropped (what repeats comes
    back with the next document)."""

    __slots__ = ("room", "owner")
    LIMIT = 1 << 21

    def __init__(self) -> None:
        super().__init__()
        self.room = self.LIMIT
        self.owner: Callable[[], object] | None = None  # a weak reference to the rule set

    def keep(self, text: str) -> None:
        size = len(text)
        if size > self.room:
            self.clear()
            self.room = self.LIMIT
        if size <= self.room:
            self.room -= size
            self.add(text)

    def __reduce__(self) -> tuple[Any, ...]:
        # copied (deepcopy, pickle) as an empty cache of no rule set: set's own would call
        # __init__ with the strings, and a copy's owner is not ours
        return (CleanTexts, ())


@dataclass(frozen=True)
class _ConfigKey:
    name: str
    norm: str


_WITHOUT_SHAPES: dict[RuleSet, RuleSet] = {}  # RuleSet.without_shapes of each configuration


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
    # caches, each rule set's own (``dataclasses.replace`` makes new ones): what one rule set
    # learnt (a key without a rule, a string without a finding) may be false under another's rules
    _clean_texts: CleanTexts = field(default_factory=CleanTexts, init=False, repr=False, compare=False)
    _key_cache: dict[str, tuple[str, bool, int] | None] = field(default_factory=dict, init=False, repr=False,
                                                                compare=False)
    _clean_keys: set[str] = field(default_factory=set, init=False, repr=False, compare=False)  # keys without a key rule

    def __post_init__(self) -> None:
        self._clean_texts.owner = weakref.ref(self)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> RuleSet:
        """Defaults + a ``[redaction]`` table (or a whole config mapping with a ``redaction`` key)."""
        if cfg is None:
            return cls()
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
        rules = [r.name for r in self.key_rules + BUILTIN_PARAM_RULES] + [r.name for r in self.value_rules]
        names = list(dict.fromkeys([*rules, URL_USERINFO_RULE]))
        names += [f"key:{k.name}" for k in self.config_keys]
        names += [n for n, _ in self.config_paths]
        names += [n for n, _ in self.config_patterns]
        return names

    # -- matching helpers ---------------------------------------------------------------------
    def placeholder_for(self, rule: str) -> str:
        return self.placeholder.replace("{rule}", rule)

    @functools.cached_property
    def without_shapes(self) -> RuleSet:
        """These rules without the built-in credential shapes (``sk-…``, ``AKIA…``, JWTs), which
        match only long random keys: what identity rule 3 seals by. One per configuration,
        shared (with its scan caches) by every rule set equal to this one."""
        return _WITHOUT_SHAPES.setdefault(self, replace(self, value_rules=()))

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

    def unmasked(self, text: str) -> str:
        """``text`` without the placeholders this rule set writes (what is left is not redacted)."""
        return self._placeholder_re.sub("", text)

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
