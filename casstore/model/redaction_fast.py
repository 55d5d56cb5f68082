"""The secret scan's fast path: a proof, in one cheap pass, that a document holds nothing
:func:`casstore.model.redaction.scan` would report (pure, no I/O).

``casstore add`` scans every cassette it pins and ``check`` every working copy; almost all
of them are clean, and the walker (which builds a JSON path for every value) spent ~1.4 ms
on a two-entry cassette, more than hashing, compressing and signing it. :func:`may_find`
mirrors the walker's decisions without paths: a mapping whose keys carry no key rule (the
answer is remembered per rule set) only hands over its strings; the others get the
walker's own key tests. Then the strings are searched all at once: the value rules over
them joined by newlines (a literal trigger first, so most rules never run a regex), and
only the strings holding ``%``, ``=``, ``":`` or ``\\`` are looked at for percent-encoded tokens,
query/form parameters, JSON text and JSON escapes (``\\/``, ``\\u002d``). It may say True for a clean document (the walker then
decides, exactly as before); it never says False for one with a finding: ``allow`` is
ignored (it only removes findings), ``[redaction] paths`` and bytes kept as base64
(``{"base64": …}``, ``body_base64``, decoded by the walker) always go to the walker.
Each of those searches answers for every string alone (a form's lines are read one string
at a time), so a string found clean is remembered by the rule set (``CleanTexts``): the
next document searches only the strings it has not seen (keys, header values, URLs and
prompts repeat from cassette to cassette); the key rules are applied to every string, seen
or not, since they depend on where the string sits.
tests/test_redaction_fastpath.py compares both on the redaction corpus and generated text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import filterfalse
from typing import Any
from urllib.parse import unquote

from .redaction_bytes import BINARY_KEYS
from .redaction_rules import BUILTIN_VALUE_RULES, RuleSet, _looks_random, key_words, lazy_pattern

__all__ = ["may_find"]

# What the walker looks for inside strings (shared with it): key=value pairs in query
# strings and form bodies, percent-encoded tokens, "key": "value" inside JSON text, a
# header as a (name, value) pair, an AWS key id and secret, an authorization scheme.
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


def has_form_data(text: str) -> bool:
    """Whether ``form-data`` is in ``text`` in any case, as ``(?i:form-data)`` finds it (a
    part's header may be written ``form-Data``): no character outside ASCII matches one of
    its letters under re's IGNORECASE, so the lowered text holds it exactly then. Lowered
    only when ``-d`` or ``-D`` is there (rare in most strings)."""
    return ("-d" in text or "-D" in text) and "form-data" in text.lower()


def multipart_fields(text: str) -> list[re.Match[str]]:
    """The text fields (no ``filename``) of the multipart parts in ``text``."""
    if not has_form_data(text):
        return []
    return [m for m in _MULTIPART_RE.finditer(text) if "filename" not in m.group(2).lower()]


def unescape_json(token: str) -> str:
    """``\\/`` and ``\\uXXXX`` escapes of a run of JSON string text undone."""
    return _UNESCAPE_RE.sub(lambda e: "/" if e.group(0) == "\\/" else chr(int(e.group(0)[2:], 16)), token)


_HEADER_NAME = lazy_pattern(r"^[A-Za-z0-9!#$%&'*+.^_`|~\-]{1,64}$")
_AWS_ID = lazy_pattern(r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}")
_AWS_SECRET = lazy_pattern(r"[A-Za-z0-9/+]{40}")
_SCHEMES = frozenset("bearer basic token digest bot negotiate ntlm hmac apikey".split())


def _split_scheme(value: str) -> tuple[str, str]:
    """("Bearer abc") -> ("abc", "Bearer "): keep the auth scheme readable, redact the credential."""
    parts = value.split(None, 1)
    if len(parts) == 2 and parts[0].lower() in _SCHEMES:
        return parts[1], value[: len(value) - len(parts[1])]
    return value, ""


# Built-in value rules whose trigger is in almost every cassette ("://", "Bearer ") get a
# literal-led form that matches wherever the rule could (a superset: it drops the rule's
# leading context and its gate); the others run only when their trigger is in the text.
_FAST_SHAPE = {
    "url-credentials": (False, lazy_pattern(r"://[^/\s:@\"']+:[^/\s@\"']{3,}@")),
    "bearer-token": (True, lazy_pattern(r"bearer\s+[a-z0-9\-._~+/]{16}")),  # searched in the lowered text
    "aws-secret-key": (True, lazy_pattern("ecret")),  # (?i:secret): only "s" folds to another letter
}


# each built-in value rule with what is checked before its regex runs
_BUILTIN_PLAN = tuple((r, r.triggers, r.ci_trigger, _FAST_SHAPE.get(r.name)) for r in BUILTIN_VALUE_RULES)
_SCALARS = frozenset({int, float, bool, type(None)})  # never a secret for the walker's own rules here
# a string an AWS key id fills (_AWS_ID) is a match of this rule: a mapping holding one goes
# to the walker, so an AWS secret beside it needs no look here (only with this rule)
_AWS_ID_RULE = next(r for r in BUILTIN_VALUE_RULES if r.name == "aws-access-key-id")


def _shapes_in(strings: list[str], rs: RuleSet, text: str | None = None) -> bool:
    """True when a value rule or a ``[redaction] patterns`` regex could match in ``strings``.

    The built-in rules are searched once over the strings joined by newlines: each is bounded
    only by one-character lookarounds whose classes hold no newline, by ``\\b``, or (the PEM
    rule) by a lazy run to ``\\Z``, so a match inside one string is a match in the joined text
    (the join only adds matches across strings, which the walker then rules out). Other value
    rules and config patterns are searched string by string.
    """
    if not strings:
        return False
    if rs.value_rules is BUILTIN_VALUE_RULES:
        text = "\n".join(strings) if text is None else text
        lowered = text.lower()
        for rule, triggers, ci, fast in _BUILTIN_PLAN:
            hay = lowered if ci else text
            for t in triggers:
                if t in hay:
                    break
            else:
                continue
            if fast is not None and not fast[1].search(lowered if fast[0] else text):
                continue
            if rule.regex.search(text):
                return True
    elif any(rule.regex.search(s) for rule in rs.value_rules for s in strings):
        return True
    return any(rx.search(s) for _name, rx in rs.config_patterns for s in strings)


def _keyed_finds(value: str, rule: tuple[str, bool, int], rs: RuleSet) -> bool:
    """Whether the walker reports a string under a key rule (``allow`` aside: it only removes)."""
    if len(value) < rule[2] or rs.is_masked(value):
        return False
    secret = _split_scheme(value)[0] if rule[0] in ("authorization", "auth") else value
    return not rs.is_masked(secret)


def _mapping_finds(node: Mapping[Any, Any], rs: RuleSet, strings: list[str], stack: list[Any]) -> bool:
    """The walker's decisions for one mapping with a key rule in it (paths aside)."""
    key_rule = rs.key_rule
    har = key_rule(node["name"]) if isinstance(node.get("name"), str) and "value" in node and len(node) <= 4 \
        else None
    aws_ctx: bool | None = None
    for k, v in node.items():
        if isinstance(k, str):
            ks = k
            strings.append(k)
        else:
            ks = str(k)
        if ks in BINARY_KEYS and isinstance(v, str):
            return True  # bytes kept as base64: the walker decodes them (redaction_bytes)
        rule = har if har is not None and ks == "value" else key_rule(ks)
        if rule is not None and rule[0] == "token" and ks == "token" and ("logprob" in node or "bytes" in node):
            rule = None  # a logprobs entry
        if isinstance(v, str) and len(v) == 40 and _AWS_SECRET.fullmatch(v):
            if aws_ctx is None:
                aws_ctx = any(isinstance(x, str) and len(x) == 20 and _AWS_ID.fullmatch(x) for x in node.values())
            if (rule is not None and rule[0] == "secret" and "aws" in key_words(ks)) or (aws_ctx and _looks_random(v)):
                return True
        if rule is None or v is None or isinstance(v, bool):
            if type(v) not in _SCALARS:
                stack.append(v)
        elif isinstance(v, str):
            if _keyed_finds(v, rule, rs):
                return True
            strings.append(v)
        elif isinstance(v, (list, tuple)) and not rule[1]:
            for x in v:
                if isinstance(x, str) and _keyed_finds(x, rule, rs):
                    return True
                stack.append(x)
        elif rule[1] and ((isinstance(v, (dict, list, tuple)) and v)
                          or (rule[0].startswith(("key:", "path:")) and isinstance(v, (int, float)))):
            return True
        elif type(v) not in _SCALARS:
            stack.append(v)
    return False


def may_find(obj: Any, rs: RuleSet) -> bool:
    """False only when :func:`~casstore.model.redaction.scan` would find nothing in ``obj``; True sends it to the walker.

    One pass over the containers without building paths: a mapping whose keys all have no
    key rule (remembered per rule set) and that is no HAR name/value pair only gives its
    strings; any other mapping gets the walker's own decisions (key rules, HAR pairs, AWS
    secrets beside a key id), and list items that are header pairs too. Then the strings not
    yet proved clean (see :class:`~casstore.model.redaction_rules.CleanTexts`) are searched
    all at once (:func:`_texts_may_find`). ``allow`` is ignored (it only removes findings).
    With ``[redaction] paths`` (which need the walker's paths): always True.
    """
    if rs.config_paths:
        return True
    key_rule, clean = rs.key_rule, rs._clean_keys
    # without the key id's rule, every mapping gets the walker's decisions (_mapping_finds):
    # an AWS secret beside a key id is found there
    every = rs.value_rules is not BUILTIN_VALUE_RULES and _AWS_ID_RULE not in rs.value_rules
    strings: list[str] = []
    add, extend = strings.append, strings.extend
    stack: list[Any] = [obj]
    push, pop = stack.append, stack.pop
    while stack:
        node = pop()
        kind = type(node)
        if kind is str:
            add(node)
        elif kind is dict:
            if every:
                if _mapping_finds(node, rs, strings, stack):
                    return True
                continue
            if not clean.issuperset(node):
                for k in node:
                    if isinstance(k, str) and key_rule(k) is None and k not in BINARY_KEYS:
                        clean.add(k)
                if not clean.issuperset(node):
                    if _mapping_finds(node, rs, strings, stack):
                        return True
                    continue
            if "value" in node and len(node) <= 4 and isinstance(node.get("name"), str) \
                    and key_rule(node["name"]) is not None:
                if _mapping_finds(node, rs, strings, stack):
                    return True
                continue
            extend(node)
            for v in node.values():
                t = type(v)
                if t is str:
                    add(v)
                elif t not in _SCALARS:
                    push(v)
        elif kind is list or kind is tuple:
            for x in node:
                t = type(x)
                if t is str:
                    add(x)
                    continue
                if t is dict:
                    push(x)
                    continue
                if (t is list or t is tuple or isinstance(x, (list, tuple))) and len(x) == 2 \
                        and isinstance(x[0], str) and isinstance(x[1], str) and _HEADER_NAME.match(x[0]):
                    rule = key_rule(x[0])
                    if rule is not None and _keyed_finds(x[1], rule, rs):
                        return True
                if t not in _SCALARS:
                    push(x)
        elif isinstance(node, str):
            add(node)
        elif isinstance(node, Mapping):
            if _mapping_finds(node, rs, strings, stack):
                return True
        elif isinstance(node, (list, tuple)):
            push(list(node))
    known = rs._clean_texts
    mine = known.owner is not None and known.owner() is rs
    # in the order met (a deterministic text for _texts_may_find), each string once
    fresh = list(dict.fromkeys(filterfalse(known.__contains__, strings) if mine else strings))
    if not fresh:
        return False
    if _texts_may_find(fresh, rs):
        return True
    if mine:  # each string alone is clean: kept, so the next document skips it
        known.keep(fresh)
    return False


def _texts_may_find(strings: list[str], rs: RuleSet) -> bool:
    """True when a value rule, a percent-encoded or escaped token, a query/form parameter, a
    form field or a ``"key": "value"`` pair of JSON text could make a finding in one of ``strings``.

    Every test answers for each string alone (a match inside one string is a match in the
    text that joins them by newlines; the join only adds matches across strings, which the
    walker then rules out), so a string this clears is clean wherever it sits.
    """
    key_rule = rs.key_rule
    text = "\n".join(strings)
    if _shapes_in(strings, rs, text):
        return True
    if "%" in text and _shapes_in([unquote(m.group(0)) for m in _ENCODED_RE.finditer(text)], rs):
        return True
    if "\\" in text and _shapes_in([unescape_json(m.group(0)) for m in _ESCAPED_RE.finditer(text)
                                      if "\\" in m.group(0)], rs):
        return True
    if has_form_data(text):
        for s in strings:  # one string at a time: a form's lines must not run on into the next string
            for m in multipart_fields(s):
                rule = key_rule(m.group(1))
                if rule is not None and _keyed_finds(m.group(3), rule, rs):
                    return True
    pairs = '":' in text or '" :' in text
    if "=" in text or pairs:
        for s in strings:
            for m in _PARAM_RE.finditer(s) if "=" in s else ():
                rule = key_rule(m.group(1))
                if rule is not None and len(m.group(2)) >= max(rule[2], 1) and not rs.is_masked(unquote(m.group(2))):
                    return True
            for m in _JSON_PAIR_RE.finditer(s) if pairs and ('":' in s or '" :' in s) else ():
                rule = key_rule(m.group(1))
                if rule is not None and len(m.group(2)) >= max(rule[2], 1) and not rs.is_masked(m.group(2)):
                    return True
    return False
