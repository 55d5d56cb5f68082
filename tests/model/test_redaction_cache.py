"""The scan's memory of clean strings and keys (``RuleSet._clean_texts``, ``_clean_keys``) never
hides a finding: one rule set used for every document, as ``add`` and ``check`` use it, finds
exactly what a fresh rule set finds, with each fake credential first seen where it is no
finding and then placed everywhere a cassette can hold a string.
"""

from __future__ import annotations

import base64
import gzip
import json
import string
from urllib.parse import quote

import pytest

from casstore.model import redaction, redaction_rules
from casstore.model.redaction import RuleSet, scan
from tests.model.test_redaction import CORPUS, ordinary_content


def places(secret: str, holder: object) -> list[object]:
    """The corpus object, and its secret moved to every kind of place a cassette has."""
    neighbours = ["https://api.openai.com/v1/chat/completions", "Bearer [REDACTED:authorization]", "x" * 9]
    return [
        holder,
        {"format": "casstore.cassette/v1", "entries": [{"request": {"headers": {"a": "1"}}, "response": holder}]},
        [neighbours[0], holder, neighbours[1]],
        {"text": secret}, {"text": "line\n" + secret + "\ttail"},
        {"messages": [neighbours[2], secret, neighbours[1]]},
        {secret: "value"},  # as a key
        {"body": json.dumps({"note": secret})},  # inside JSON text
        {"url": "https://example.com/cb?next=" + quote(secret, safe="")},  # percent-encoded
        {"headers": [["X-Trace", "abc"], ["Note", secret]]},
        ({"k": (secret,)},),  # tuples
        {"body": {"base64": base64.b64encode(b"\xff\x00" + secret.encode() + b"\x81").decode()}},  # binary
        {"body": f'--b\r\nContent-Disposition: form-data; name="api_key"\r\n\r\n{secret}\r\n--b--\r\n'},
        {"body_text": json.dumps({"note": secret}).replace("/", "\\/").replace("-", "\\u002d")},  # escaped
        {"headers": {"content-encoding": "gzip"}, "body_base64": base64.b64encode(gzip.compress(secret.encode())).decode()},
        {"request": {"headers": {"x-note": secret, "content-type": "text/plain"}}},
        {"request": {"headers": {"X-Api-Key": secret}}}, {"request": {"headers": {"Authorization": "Bearer " + secret}}},
        {"request": {"url": "https://example.com/v1/search?q=" + secret + "&page=2"}},
        {"request": {"url": "https://example.com/v1/search?api_key=" + secret}},
        {"request": {"body": "grant_type=x&client_secret=" + quote(secret, safe="")}},
        {"response": {"body": json.dumps({"data": {"token": secret}})}},
        {"headers": [{"name": "Authorization", "value": secret}]}, {"queryString": [{"name": "note", "value": secret}]},
        {"a": [[[secret]], [["x", [secret]]]]}, {"headers": [["X-Api-Key", secret], ["Accept", "*/*"]]},
    ]


_TOML = """
[redaction]
keys = ["customer_ref"]
patterns = ['(?P<secret>acct_[a-z]{8})\\b', '^cust-\\d{6}$']
allow = ['^allowed-', 'ignored_here']
placeholder = "<<{rule}>>"
"""


def _project_rules() -> RuleSet:
    from tests.helpers.toml import tomllib

    return RuleSet.from_config(tomllib.loads(_TOML))


@pytest.mark.parametrize("make", [RuleSet, _project_rules], ids=["builtin", "casstore.toml"])
def test_a_warm_rule_set_finds_what_a_fresh_one_finds(make) -> None:  # type: ignore[no-untyped-def]
    shared = make()
    acct = "acct_" + "".join(sorted(string.ascii_lowercase[:8]))
    warm = [(label, secret, obj) for label, secret, obj, _rule in CORPUS]
    pk, cred = "pk" + "".join(sorted(string.ascii_letters[:22])), "c" + "".join(sorted(string.ascii_letters[5:25]))
    warm += [("private_key field", pk, {"body": {"private_key": pk}}), ("credentials field", cred, {"credentials": cred})]
    warm += [("acct", acct, {"t": f"see {acct} now"}), ("cust", "cust-" + "123456", {"id": "cust-" + "123456"}),
             ("customer_ref", "R" + "9" * 7, {"customer_ref": "R" + "9" * 7}),
             ("allowed", "allowed-" + "k" * 20, {"api_key": "allowed-" + "k" * 20}),
             # let through by allow at one path only: not remembered as clean
             ("allowed by path", "plain-" + "z5" * 10, {"ignored_here": "plain-" + "z5" * 10})]
    checked, rules_seen = 0, set()
    for label, secret, obj in warm:
        scan({"note": secret, "x": [secret], "y": {"name": "note", "value": secret}}, shared)
        for doc in places(secret, obj):
            want = scan(doc, make())
            assert scan(doc, shared) == want, (label, doc)
            checked += bool(want)
            rules_seen |= {f.rule for f in want}
    assert checked > 2 * len(warm)  # most placements hold a finding: the comparison is not vacuous
    assert {r.name for r in redaction_rules.BUILTIN_KEY_RULES + redaction_rules.BUILTIN_VALUE_RULES} <= rules_seen
    for doc in (ordinary_content(), {"entries": [ordinary_content()] * 2}):
        assert scan(doc, shared) == [] == scan(doc, make())


def test_a_remembered_string_is_still_found_under_a_key_rule() -> None:
    """The memory is used (not vacuous) and does not carry a string's innocence into a key rule."""
    rs = RuleSet()
    value = "plain-" + "q7" * 10  # no shape of any value rule: a finding only under a key rule
    assert scan({"note": value}, rs) == [] and value in rs._clean_texts and "note" in rs._clean_keys
    for doc in ({"password": value}, {"headers": [["X-Api-Key", value]]}, {"name": "api_key", "value": value},
                {"k": [{"token": [value]}]}, {"note": "x", "api_key": value}):
        assert scan(doc, rs) == scan(doc, RuleSet()) != [], doc
        assert redaction.redact(doc, rs)[0] == redaction.redact(doc, RuleSet())[0]


def test_a_rule_set_made_by_replace_does_not_use_what_the_first_remembered() -> None:
    import dataclasses
    import re

    rs = RuleSet()
    value = "order " + "ord-" + "7" * 12
    assert scan({"note": value}, rs) == [] and scan({"note": value}, rs) == []
    other = dataclasses.replace(rs, config_patterns=(("pattern:ord", re.compile(r"ord-\d{12}")),))
    assert other._clean_texts is not rs._clean_texts
    assert [f.rule for f in scan({"note": value}, other)] == ["pattern:ord"]
    keyed = dataclasses.replace(rs, config_keys=RuleSet.from_config({"keys": ["note"]}).config_keys)
    assert [f.rule for f in scan({"note": value}, keyed)] == ["key:note"]


def test_the_clean_strings_kept_are_bounded() -> None:
    rs = RuleSet()
    known = rs._clean_texts
    first = "first-" + "a" * 40
    assert scan({"t": first}, rs) == [] and first in known
    chunk = "b" * (known.LIMIT // 4)
    for i in range(6):
        assert scan({"t": chunk + str(i)}, rs) == []
        assert sum(map(len, known)) <= known.LIMIT
    assert first not in known and chunk + "5" in known


def test_a_rule_set_copied_or_deep_copied_scans_as_the_first() -> None:
    import copy
    import pickle

    rs = RuleSet.from_config({"keys": ["customer_ref"]})
    value = "plain-" + "q7" * 10
    key = "sk-" + "proj-" + "".join(sorted(string.ascii_letters[:30]))
    assert "openai-key" in [f.rule for f in scan({"note": f"aws secret bearer {key} {value}"}, rs)]
    assert scan({"note": value}, rs) == [] and value in rs._clean_texts
    for rule in redaction_rules.BUILTIN_VALUE_RULES:
        rx = pickle.loads(pickle.dumps(rule.regex))
        assert (rx.pattern, rx.flags) == (rule.regex.pattern, rule.regex.flags)
    for other in (copy.deepcopy(rs), copy.copy(rs)):
        assert other == rs
        assert scan({"customer_ref": value}, other) == scan({"customer_ref": value}, rs) != []
        assert scan({"note": value}, other) == []
        assert scan({"note": key}, other) == scan({"note": key}, rs) != []


def test_a_dropped_rule_set_is_freed_at_once_with_its_clean_strings() -> None:
    import gc
    import weakref

    rs = RuleSet()
    assert scan({"note": "plain-" + "q7" * 10}, rs) == [] and rs._clean_texts
    texts, gone = weakref.ref(rs._clean_texts), weakref.ref(rs)
    enabled = gc.isenabled()
    gc.disable()
    try:
        del rs
        assert gone() is None and texts() is None
    finally:
        if enabled:
            gc.enable()
