"""The scan's fast path (one pass that proves a document holds nothing, issue #19) never
hides a finding: ``scan`` with it and the walker alone report the same findings on every
fake credential of the redaction corpus, placed everywhere a cassette can hold a string,
and on generated documents made of the rules' own fragments.
"""

from __future__ import annotations

import base64
import gzip
import json
import string
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore.model import redaction, redaction_fast
from casstore.model.redaction import RuleSet, scan
from tests.test_redaction import CORPUS


def walker_only(obj: Any, rs: RuleSet, monkeypatch: pytest.MonkeyPatch) -> list[redaction.Finding]:
    with monkeypatch.context() as m:
        m.setattr(redaction, "may_find", lambda *_: True)
        return scan(obj, rs)


def places(secret: str, holder: object) -> list[object]:
    """The corpus object, and its secret moved to every kind of place a cassette has."""
    neighbours = ["https://api.openai.com/v1/chat/completions", "Bearer [REDACTED:authorization]", "x" * 9]
    return [
        holder,
        {"format": "casstore.cassette/v1", "entries": [{"request": {"headers": {"a": "1"}}, "response": holder}]},
        [neighbours[0], holder, neighbours[1]],
        {"text": secret},  # the whole string
        {"text": secret + "\n"}, {"text": "\n" + secret}, {"text": "line\n" + secret + "\ttail"},
        {"messages": [neighbours[2], secret, neighbours[1]]},  # between other strings
        {secret: "value"},  # as a key
        {"body": json.dumps({"note": secret})},  # inside JSON text
        {"url": "https://example.com/cb?next=" + quote(secret, safe="")},  # percent-encoded
        {"url": "https://example.com/x/" + quote(secret, safe="") + "/y"},
        {"headers": [["X-Trace", "abc"], ["Note", secret]]},
        ({"k": (secret,)},),  # tuples
        {"body": {"base64": base64.b64encode(b"\xff\x00" + secret.encode() + b"\x81").decode()}},  # binary
        {"body": f'--b\r\nContent-Disposition: form-data; name="api_key"\r\n\r\n{secret}\r\n--b--\r\n'},  # a form field
        {"body_text": json.dumps({"note": secret}).replace("/", "\\/").replace("-", "\\u002d")},  # escaped
        {"headers": {"content-encoding": "gzip"}, "body_base64": base64.b64encode(gzip.compress(secret.encode())).decode()},
        # header values under a name no rule knows, and under names that are key rules
        {"request": {"headers": {"x-note": secret, "content-type": "text/plain"}}},
        {"request": {"headers": {"X-Api-Key": secret}}}, {"request": {"headers": {"Authorization": "Bearer " + secret}}},
        # query strings and the URL itself
        {"request": {"url": "https://example.com/v1/search?q=" + secret + "&page=2"}},
        {"request": {"url": "https://example.com/v1/search?api_key=" + secret}},
        {"request": {"url": "https://example.com/" + secret + "/items"}},
        # request and response bodies as text
        {"request": {"body": secret}}, {"response": {"body_text": "result: " + secret + "\n"}},
        {"request": {"body": "grant_type=x&client_secret=" + quote(secret, safe="")}},
        {"response": {"body": json.dumps({"data": {"token": secret}})}},  # JSON text, under a key rule
        # a multipart text field whose header is written in another case
        {"body": f'--b\r\ncontent-disposition: Form-data; name="password"\r\n\r\n{secret}\r\n--b--\r\n'},
        # a multipart text field under a name no rule knows
        {"body": f'--b\r\nContent-Disposition: form-data; name="note"\r\n\r\n{secret}\r\n--b--\r\n'},
        # HAR name/value pairs, under a key rule and not
        {"headers": [{"name": "Authorization", "value": secret}]}, {"queryString": [{"name": "note", "value": secret}]},
        # nested lists, header pairs with a key rule
        {"a": [[[secret]], [["x", [secret]]]]}, {"headers": [["X-Api-Key", secret], ["Accept", "*/*"]]},
    ]


@pytest.mark.parametrize("rules", [RuleSet(), RuleSet.from_config({"keys": ["customer_ref"]})],
                         ids=["builtin", "config-keys"])
def test_fast_path_agrees_with_the_walker_on_the_corpus(rules: RuleSet, monkeypatch: pytest.MonkeyPatch) -> None:
    checked = 0
    for label, secret, obj, _rule in CORPUS:
        for doc in places(secret, obj):
            want = walker_only(doc, rules, monkeypatch)
            assert scan(doc, rules) == want, (label, doc)
            checked += bool(want)
    assert checked > 2 * len(CORPUS)  # most placements hold a finding: the comparison is not vacuous


def test_fast_path_with_config_patterns_and_custom_value_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    rs = RuleSet.from_config({"patterns": [r"^cust-\d{6}$", r"(?P<secret>acct_[a-z]{8})\b"]})
    custom = RuleSet(value_rules=(redaction.BUILTIN_VALUE_RULES[1],))
    docs = [{"id": "cust-123456"}, {"a": ["x", "cust-123456"]}, {"t": "see acct_abcdefgh now"},
            {"u": "https://e.com/?q=" + quote("acct_abcdefgh")}, {"t": "nothing here"},
            {"t": "sk-" + "ant-" + "a1B2" * 6}]
    for r in (rs, custom):
        for doc in docs:
            assert scan(doc, r) == walker_only(doc, r, monkeypatch), doc


# Fragments of every rule's shape, joined at random: the generated strings sit on the edges
# of what each rule accepts (prefixes without a body, bodies without a boundary, ...).
_FRAGMENTS = [
    "sk-", "ant-", "proj-", "AKIA", "ASIA", "aws", "AWS_", "secret", "Secret", " = ", ": ", "\n", "\t", " ",
    "ghp_", "github_pat_", "xoxb-", "hooks.slack.com/services/", "AIza", "hf_", "eyJ", ".", "Bearer ", "bearer\t",
    "postgres://", "u:", "@", "/", "%2F", "%3A", "%40", "?", "&", "=", "api_key=", "token=", "password",
    '"token": "', '"', "\\", "-" * 5 + "BEGIN ", "PRIVATE KEY" + "-" * 5, "[REDACTED:token]", "***",
    "sk_" + "live_", "ABCDEFGHIJ2345", "aB3dE6gH9jK2mN5pQ8sT", "0123456789abcdefABCD", "xyzXYZ0987",
]
_TEXT = st.lists(st.sampled_from(_FRAGMENTS), max_size=10).map("".join)
_KEYS = st.sampled_from(["text", "authorization", "token", "name", "value", "Secret", "AccessKeyId", "logprob",
                         "x-api-key", "cookie", "url", "content", "headers"]) | _TEXT
_DOCS = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_KEYS, children, max_size=4),
    max_leaves=14,
)


@settings(max_examples=400, deadline=None)
@given(_DOCS)
def test_fast_path_agrees_with_the_walker_on_generated_documents(doc: object) -> None:
    rs = RuleSet()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(redaction, "may_find", lambda *_: True)
        want = scan(doc, rs)
    assert scan(doc, rs) == want


def test_an_ordinary_cassette_takes_the_fast_path() -> None:
    """What the fast path is for: a recorded chat (redacted) is proved clean without the walker."""
    entry = {"request": {"method": "POST", "url": "https://api.openai.com/v1/chat/completions?api-version=2024",
                         "headers": {"authorization": "Bearer [REDACTED:authorization]", "content-type": "x"},
                         "body": {"model": "gpt-4o-mini", "max_tokens": 9, "messages": [{"role": "user",
                                                                                          "content": "hi\nthere"}]}},
             "response": {"status": 200, "body": {"choices": [{"message": {"content": "An answer: 100% sure."}}],
                                                  "usage": {"prompt_tokens": 3}}}}
    doc = {"format": "casstore.cassette/v1", "name": "chat", "entries": [entry],
           "redaction": {"rules": ["authorization"], "hits": {"authorization": 1}}}
    assert redaction_fast.may_find(doc, RuleSet()) is False
    assert redaction_fast.may_find({**doc, "meta": {"note": "sk-" + "proj-" + string.ascii_letters}}, RuleSet()) is True


# A project's own rules, as casstore.toml writes them (read with the same TOML reader).
_TOML = """
[redaction]
keys = ["customer_ref"]
patterns = ['(?P<secret>acct_[a-z]{8})\\b', '^cust-\\d{6}$']
allow = ['^allowed-']
placeholder = "<<{rule}>>"
"""


def _project_rules() -> RuleSet:
    import tomllib

    return RuleSet.from_config(tomllib.loads(_TOML))


def _custom_secrets() -> list[tuple[str, str, object]]:
    """(label, secret, object) for the rules of _TOML (and one its ``allow`` lets through)."""
    acct = "acct_" + "".join(sorted(string.ascii_lowercase[:8]))
    ref = "R" + "9" * 7
    allowed = "allowed-" + "k" * 20
    return [("acct", acct, {"t": f"see {acct} now"}), ("cust", "cust-" + "123456", {"id": "cust-" + "123456"}),
            ("customer_ref", ref, {"customer_ref": ref}), ("customer_ref number", "12345", {"customerRef": 12345}),
            ("allowed", allowed, {"api_key": allowed})]


@pytest.mark.parametrize("make", [RuleSet, _project_rules], ids=["builtin", "casstore.toml"])
def test_fast_path_with_a_warm_rule_set_agrees_with_the_walker(make, monkeypatch: pytest.MonkeyPatch) -> None:
    """One rule set for every document, as ``add`` uses it: strings proved clean in one document
    are remembered (CleanTexts), and the same string where a key rule applies (a header, a form
    field, a HAR pair) is a finding all the same. Each secret is first seen where it is no
    finding, then placed in every channel; findings (rule, path, preview) match the walker's."""
    shared = make()
    warm = [(label, secret, obj) for label, secret, obj, _rule in CORPUS]
    pk, cred = "pk" + "".join(sorted(string.ascii_letters[:22])), "c" + "".join(sorted(string.ascii_letters[5:25]))
    warm += [("private_key field", pk, {"body": {"private_key": pk}}), ("credentials field", cred, {"credentials": cred})]
    warm += _custom_secrets()
    checked, rules_seen = 0, set()
    for label, secret, obj in warm:
        scan({"note": secret, "x": [secret], "y": {"name": "note", "value": secret}}, shared)
        for doc in places(secret, obj):
            want = walker_only(doc, make(), monkeypatch)
            assert scan(doc, shared) == want, (label, doc)
            checked += bool(want)
            rules_seen |= {f.rule for f in want}
    assert checked > 2 * len(warm)
    # every built-in rule (key and value rules) was among the findings compared
    assert {r.name for r in redaction.BUILTIN_KEY_RULES + redaction.BUILTIN_VALUE_RULES} <= rules_seen
    # and a clean corpus stays clean, warm or not
    for doc in _clean_docs():
        assert scan(doc, shared) == [] and walker_only(doc, make(), monkeypatch) == []


def _clean_docs() -> list[object]:
    from tests.test_redaction import ordinary_content

    chat = {"request": {"method": "POST", "url": "https://api.openai.com/v1/chat/completions",
                        "headers": {"authorization": "Bearer [REDACTED:authorization]", "content-type": "x"},
                        "body": {"model": "gpt-4o-mini", "max_tokens": 9,
                                 "messages": [{"role": "user", "content": "hi\nthere, 100% sure a=b"}]}},
            "response": {"status": 200, "body": {"usage": {"prompt_tokens": 3}, "id": "chatcmpl-1"}}}
    return [ordinary_content(), chat, {"entries": [chat, chat]}, {"redaction": {"hits": {"authorization": 2}}}]


def test_the_warm_fast_path_remembers_clean_strings_and_still_finds_them_under_a_key_rule() -> None:
    """The cache is used (not vacuous) and does not carry a string's innocence into a key rule."""
    rs = RuleSet()
    value = "plain-" + "q7" * 10  # no shape of any value rule: a finding only under a key rule
    assert redaction_fast.may_find({"note": value}, rs) is False
    assert value in rs._clean_texts
    for doc in ({"password": value}, {"headers": [["X-Api-Key", value]]}, {"name": "api_key", "value": value},
                {"k": [{"token": [value]}]}):
        assert redaction_fast.may_find(doc, rs) is True, doc
        assert scan(doc, rs) == scan(doc, RuleSet()) != []


def test_a_form_field_is_found_whatever_string_comes_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A string that ends with a form-data header once made the fast path read the next string's
    lines as its own field, and miss the field there (``api_key`` with a plain secret)."""
    secret = "v" + "".join(sorted(string.ascii_letters[:20]))
    doc = {"a": 'Content-Disposition: form-data; name="note"',
           "b": f'--b\r\nContent-Disposition: form-data; name="api_key"\r\n\r\n{secret}\r\n--b--\r\n'}
    want = walker_only(doc, RuleSet(), monkeypatch)
    assert [f.rule for f in want] == ["api-key"]
    assert scan(doc, RuleSet()) == want


def test_a_rule_set_made_by_replace_does_not_use_the_clean_strings_of_the_first() -> None:
    """``dataclasses.replace`` hands the caches to the new rule set; what was clean under the
    first rule set's rules is not taken as clean under the other's."""
    import dataclasses
    import re

    rs = RuleSet()
    value = "order " + "ord-" + "7" * 12
    assert redaction_fast.may_find({"note": value}, rs) is False
    other = dataclasses.replace(rs, config_patterns=(("pattern:ord", re.compile(r"ord-\d{12}")),))
    assert other._clean_texts is not rs._clean_texts
    assert [f.rule for f in scan({"note": value}, other)] == ["pattern:ord"]


def test_the_clean_strings_kept_are_bounded() -> None:
    """A long add keeps a few MB of clean strings at most: past the bound the old ones go."""
    rs = RuleSet()
    known = rs._clean_texts
    first = "first-" + "a" * 40
    assert redaction_fast.may_find({"t": first}, rs) is False and first in known
    chunk = "b" * (known.LIMIT // 4)
    for i in range(6):
        assert redaction_fast.may_find({"t": chunk + str(i)}, rs) is False
        assert sum(map(len, known)) <= known.LIMIT
    assert first not in known and chunk + "5" in known


@pytest.mark.parametrize("header", ["Content-Disposition: form-Data", "CONTENT-DISPOSITION: Form-data",
                                    "content-disposition: FORM-data"])
def test_a_form_field_is_found_whatever_the_case_of_its_header(header: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``(?i:form-data)``: a part written ``form-Data`` under a key-rule name is a finding for
    the walker and the fast path alike (both once looked only for three spellings)."""
    secret = "w" + "".join(sorted(string.ascii_letters[3:23]))
    doc = {"request": {"body": f'--b\r\n{header}; name="api_key"\r\n\r\n{secret}\r\n--b--\r\n'}}
    want = walker_only(doc, RuleSet(), monkeypatch)
    assert [(f.rule, f.path) for f in want] == [("api-key", "$.request.body<form-data>.api_key")]
    assert scan(doc, RuleSet()) == want and redaction_fast.may_find(doc, RuleSet()) is True
    new, hits = redaction.redact(doc)
    assert secret not in json.dumps(new) and hits == {"api-key": 1}


def test_a_rule_set_copied_or_deep_copied_scans_as_the_first() -> None:
    """A rule set that has scanned (so holds clean strings and compiled rules) can be copied,
    deep-copied and its rules pickled, as before the cache and the lazily compiled rules
    (deepcopy raised TypeError: the cache is a set subclass whose ``__init__`` takes no items,
    and a compiled lazy rule kept the pattern's ``groupindex``, a mappingproxy); the copy
    finds what the first finds."""
    import copy
    import pickle

    rs = RuleSet.from_config({"keys": ["customer_ref"]})
    value = "plain-" + "q7" * 10
    key = "sk-" + "proj-" + "".join(sorted(string.ascii_letters[:30]))
    assert "openai-key" in [f.rule for f in scan({"note": f"aws secret bearer {key} {value}"}, rs)]
    assert scan({"note": value}, rs) == [] and value in rs._clean_texts
    for rule in redaction.BUILTIN_VALUE_RULES:
        rx = pickle.loads(pickle.dumps(rule.regex))
        assert (rx.pattern, rx.flags, bool(rx.search(key))) == (rule.regex.pattern, rule.regex.flags,
                                                                bool(rule.regex.search(key)))
    for other in (copy.deepcopy(rs), copy.copy(rs)):
        assert other == rs
        assert scan({"customer_ref": value}, other) == scan({"customer_ref": value}, rs) != []
        assert scan({"note": value}, other) == []
        assert scan({"note": key}, other) == scan({"note": key}, rs) != []


@pytest.mark.parametrize("field", ["config_keys", "key_rules"])
def test_a_rule_set_made_by_replace_applies_its_own_key_rules(field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``dataclasses.replace`` passed the first rule set's key caches (keys known to have no
    rule, each key's rule) to the new one: a key the new one's rules name was still taken as
    having none, its secret unreported by scan and left by redact."""
    import dataclasses

    base = RuleSet.from_config({"keys": ["other"]})
    doc = {"customer_ref": "R" + "9" * 11, "note": "x"}
    assert scan(doc, base) == [] and redaction_fast.may_find(doc, base) is False
    rules = RuleSet.from_config({"keys": ["customer_ref"]})
    if field == "key_rules":  # the same key named by a built-in-like key rule instead
        rules = RuleSet(key_rules=(redaction.KeyRule("customer", lambda words: "customer" in words),
                                   *redaction.BUILTIN_KEY_RULES))
    other = dataclasses.replace(base, **{field: getattr(rules, field)})
    want = walker_only(doc, rules, monkeypatch)
    assert want != []
    assert scan(doc, other) == want
    assert redaction.redact(doc, other)[0]["customer_ref"] != doc["customer_ref"]


@pytest.mark.parametrize("kept", ["none", "all but the key id's"])
def test_an_aws_secret_beside_its_key_id_is_found_with_value_rules_of_ones_own(
        kept: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path let a mapping whose keys have no rule hand over its strings, trusting the
    built-in aws-access-key-id rule to send a key id to the walker; a rule set built without
    that rule (``RuleSet(value_rules=...)``) had scan miss the secret beside it, which the
    walker (and so redact) finds."""
    rules = () if kept == "none" else tuple(r for r in redaction.BUILTIN_VALUE_RULES if r.name != "aws-access-key-id")
    rs = RuleSet(value_rules=rules)
    secret = "".join(sorted(string.ascii_letters))[:30] + "0123456789"
    doc = {"entries": [{"response": {"body": {"id": "AKIA" + "Q7" * 8, "other": secret}}}]}
    want = walker_only(doc, RuleSet(value_rules=rules), monkeypatch)
    assert [f.rule for f in want] == ["aws-secret-key"]
    assert scan(doc, rs) == want


def test_a_dropped_rule_set_is_freed_at_once_with_its_clean_strings() -> None:
    """The cache holds its rule set by a weak reference: no reference cycle, so a rule set that
    scanned (one per recording under the pytest plugin, say) goes as soon as it is dropped,
    the collector disabled or not."""
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
