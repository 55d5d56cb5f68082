"""Pure tests of casstore.model.diff: entry diffs by identity, lock diffs, the 3-way lock merge."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore.errors import NotFoundError
from casstore.model.cassette import Cassette
from casstore.model.diff import (
    diff_entries,
    diff_locks,
    field_changes,
    format_merge,
    merge_locks,
    render_lock_diff,
    render_lock_summary,
)
from casstore.model.lock import Lock, Pin, Signature, format_lock, parse_lock


def ident(tag: str) -> str:
    return hashlib.sha256(tag.encode()).hexdigest()


def entry(tag: str, seq: int, *, answer: str = "ok", temperature: float | None = None, **extra) -> dict:  # type: ignore[no-untyped-def]
    body: dict = {"model": "gpt-test", "messages": [{"role": "user", "content": tag}]}
    if temperature is not None:
        body["temperature"] = temperature
    return {"identity": ident(tag), "seq": seq, "kind": "llm", "target": "POST https://api.example/v1/chat",
            "request": {"body": body},
            "response": {"status": 200, "body": {"choices": [{"message": {"content": answer}}]}},
            "recorded_at": f"2026-01-0{seq + 1}T00:00:00Z", "duration_ms": seq, **extra}


def digest(tag: str) -> str:
    return "sha256:" + ident(tag)


def p(name: str, tag: str, *sigs: str) -> Pin:
    return Pin(name=name, digest=digest(tag), size=10, entries=1,
               signatures=tuple(Signature(keyid=k, signer=f"{k}@x", sig="c2ln") for k in sigs))


def lock(*pins: Pin) -> Lock:
    return Lock(pins={x.name: x for x in pins})


# -- entries ----------------------------------------------------------------------------
def test_entries_are_matched_by_identity_and_repeats_in_order() -> None:
    old = [entry("a", 0), entry("b", 1, answer="first"), entry("b", 2, answer="second"), entry("c", 3)]
    new = [entry("a", 0), entry("b", 1, answer="first"), entry("b", 2, answer="SECOND"), entry("d", 3)]
    changes, unchanged = diff_entries(old, new)
    assert unchanged == 2
    kinds = [(c.change, c.identity[:6], c.old_seq, c.new_seq) for c in changes]
    assert kinds == [("removed", ident("c")[:6], 3, None), ("changed", ident("b")[:6], 2, 2),
                     ("added", ident("d")[:6], None, 3)]
    changed = changes[1]
    assert changed.fields == ('response.body.choices[0].message.content: "second" → "SECOND"',)
    assert 'gpt-test "b" → 200 "SECOND"' in changed.summary


def test_an_extra_occurrence_of_an_identity_is_added() -> None:
    changes, unchanged = diff_entries([entry("a", 0)], [entry("a", 0), entry("a", 1)])
    assert unchanged == 1 and [(c.change, c.new_seq) for c in changes] == [("added", 1)]


def test_recording_times_and_seq_are_not_changes() -> None:
    old = [entry("a", 0)]
    moved = dict(entry("a", 5), recorded_at="2030-01-01T00:00:00Z", duration_ms=999)
    assert diff_entries(old, [moved]) == ([], 1)


def test_a_new_setting_reads_against_the_call_it_replaces() -> None:
    old = [entry("a", 0, temperature=0.0)]
    new = [dict(entry("a", 0, temperature=0.7), identity=ident("a-hot"))]
    changes, _ = diff_entries(old, new)
    assert [c.change for c in changes] == ["removed", "added"]
    assert changes[1].fields == ("vs removed #0: request.body.temperature: 0.0 → 0.7",)


def test_field_changes_are_short_and_complete() -> None:
    long_a, long_b = "a" * 100, "b" * 100
    lines = field_changes({"x": long_a, "y": [1, 2], "z": True}, {"x": long_b, "y": [1], "w": None})
    assert lines[0] == f'x: "{"a" * 39}…" → "{"b" * 39}…"'
    assert "y[1]: 2 → (absent)" in lines and "z: true → (absent)" in lines and "w: (absent) → null" in lines
    assert field_changes({"a": 1}, {"a": 1.0}) == ["a: 1 → 1.0"]  # a type change is a change


def test_json_body_text_is_diffed_field_by_field() -> None:
    a = dict(entry("a", 0), response={"status": 200, "body_text": '{"n": 1, "s": "x"}'})
    b = dict(entry("a", 0), response={"status": 200, "body_text": '{"n": 2, "s": "x"}'})
    (c,), _ = diff_entries([a], [b])
    assert c.fields == ("response.body_text.n: 1 → 2",)


# -- locks ------------------------------------------------------------------------------
def _cassettes(**by_tag: list[dict]):  # type: ignore[no-untyped-def]
    def load(pin: Pin) -> Cassette:
        for tag, entries in by_tag.items():
            if pin.digest == digest(tag):
                return Cassette(name=pin.name, entries=tuple(entries))
        raise NotFoundError(f"{pin.name}: {pin.digest} is neither in the cache nor in the store")

    return load


def test_lock_diff_added_removed_repinned_resigned_and_missing() -> None:
    old = lock(p("kept", "k"), p("gone", "g"), p("changed", "c1"), p("signed", "s", "k1"), p("lost", "l1"))
    new = lock(p("kept", "k"), p("new", "n"), p("changed", "c2"), p("signed", "s", "k1", "k2"), p("lost", "l2"))
    load = _cassettes(k=[entry("a", 0)], g=[entry("g", 0)], c1=[entry("a", 0), entry("b", 1)],
                      c2=[entry("a", 0), entry("c", 1)], n=[entry("n", 0)], l1=[entry("a", 0)])
    d = diff_locks(old, new, load)
    assert d.unchanged == 1
    by = {c.name: c for c in d.cassettes}
    assert [c.name for c in d.cassettes] == ["changed", "gone", "lost", "new", "signed"]
    assert by["new"].status == "added" and [c.change for c in by["new"].changes] == ["added"]
    assert by["gone"].status == "removed" and [c.change for c in by["gone"].changes] == ["removed"]
    assert [c.change for c in by["changed"].changes] == ["removed", "added"] and by["changed"].unchanged == 1
    assert by["signed"].status == "re-signed" and by["signed"].new_signers == ["k1@x", "k2@x"]
    assert by["lost"].error and "neither in the cache nor in the store" in by["lost"].error
    assert d.errors == [f"lost: {by['lost'].error}"]
    text = render_lock_diff(d)
    assert "~ changed  sha256:" in text and "calls: +1 -1 ~0 =1" in text
    assert "= signed" in text and "signatures: k1@x → k1@x, k2@x" in text
    assert "(calls not shown: lost: sha256:" in text
    assert text.endswith("5 cassette(s) changed, 1 unchanged\n")


def test_summary_lines_ignore_recording_times() -> None:
    lk = lock(p("t", "t"))
    a = render_lock_summary(lk, _cassettes(t=[entry("a", 0)]))
    b = render_lock_summary(lk, _cassettes(t=[dict(entry("a", 0), recorded_at="2031-01-01", duration_ms=5)]))
    assert a == b and "call #0 llm POST https://api.example/v1/chat  id=" in a
    missing = render_lock_summary(lk, _cassettes())
    assert "(calls not shown:" in missing


# -- 3-way merge ------------------------------------------------------------------------
def test_different_names_merge_cleanly() -> None:
    base = lock(p("t", "0"))
    m = merge_locks(base, lock(p("t", "0"), p("a", "a")), lock(p("t", "0"), p("b", "b")))
    assert not m.conflicts and sorted(m.lock.pins) == ["a", "b", "t"]


def test_one_side_repin_or_removal_wins_over_no_change() -> None:
    base = lock(p("t", "0"), p("u", "u"))
    m = merge_locks(base, lock(p("t", "1"), p("u", "u")), lock(p("t", "0")))
    assert not m.conflicts and m.lock.pins["t"].digest == digest("1") and "u" not in m.lock.pins


def test_same_name_different_digests_is_a_conflict_naming_both() -> None:
    base = lock(p("t", "0"))
    m = merge_locks(base, lock(p("t", "1")), lock(p("t", "2")))
    (c,) = m.conflicts
    assert c.name == "t"
    assert c.message() == f"cassette 't' changed on both sides: ours {digest('1')}, theirs {digest('2')} (base {digest('0')})"
    text = format_merge(m)
    assert text.count("<<<<<<< ours") == 1 and text.count(">>>>>>> theirs") == 1
    block = text.split("<<<<<<< ours\n", 1)[1]
    assert block.index(digest("1")) < block.index("=======") < block.index(digest("2"))


def test_removal_against_repin_is_a_conflict() -> None:
    base = lock(p("t", "0"), p("x", "x"))
    m = merge_locks(base, lock(p("x", "x")), lock(p("t", "2"), p("x", "x")))
    assert [c.name for c in m.conflicts] == ["t"] and m.conflicts[0].ours is None
    text = format_merge(m)
    assert "# (cassette 't' removed on ours)" in text
    # the conflict block sits where the cassette sorts, the clean block stays intact
    assert text.index(">>>>>>> theirs") < text.index('[cassettes."x"]')


def test_identical_changes_agree_and_signatures_unite() -> None:
    base = lock(p("t", "0", "k0"))
    m = merge_locks(base, lock(p("t", "1", "k1")), lock(p("t", "1", "k2")))
    assert not m.conflicts
    assert [s.keyid for s in m.lock.pins["t"].signatures] == ["k1", "k2"]
    text = format_merge(m)
    assert parse_lock(text) == m.lock  # a clean merge is a valid lock


def test_add_add_with_an_empty_base() -> None:
    m = merge_locks(Lock(), lock(p("a", "a")), lock(p("a", "b")))
    assert [c.name for c in m.conflicts] == ["a"] and m.conflicts[0].base is None


names = st.sampled_from(["a", "b", "c", "d"])
tags = st.sampled_from(["0", "1", "2"])
locks = st.dictionaries(names, tags, max_size=4).map(lambda d: lock(*(p(n, t) for n, t in d.items())))


@settings(max_examples=200, deadline=None)
@given(base=locks, side=locks)
def test_merging_with_an_unchanged_side_gives_the_changed_side(base: Lock, side: Lock) -> None:
    for m in (merge_locks(base, side, base), merge_locks(base, base, side)):
        assert not m.conflicts
        assert {n: x.digest for n, x in m.lock.pins.items()} == {n: x.digest for n, x in side.pins.items()}


@settings(max_examples=200, deadline=None)
@given(base=locks, ours=locks, theirs=locks)
def test_merge_is_symmetric_and_its_text_holds_every_pin(base: Lock, ours: Lock, theirs: Lock) -> None:
    a, b = merge_locks(base, ours, theirs), merge_locks(base, theirs, ours)
    assert [c.name for c in a.conflicts] == [c.name for c in b.conflicts]
    clean = set(a.lock.pins) - {c.name for c in a.conflicts}
    assert {n: a.lock.pins[n].digest for n in clean} == {n: b.lock.pins[n].digest for n in clean}
    text = format_merge(a)
    if not a.conflicts:
        assert parse_lock(text) == a.lock
    for n in clean:
        assert a.lock.pins[n].digest in text
    for c in a.conflicts:
        for side in (c.ours, c.theirs):
            if side is not None:
                assert side.digest in text


@pytest.mark.parametrize("text", ["", format_lock(lock(p("a", "a")))])
def test_merge_of_identical_texts_is_identity(text: str) -> None:
    lk = parse_lock(text)
    assert format_merge(merge_locks(lk, lk, lk)) == format_lock(lk)
