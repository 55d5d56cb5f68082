"""The fast reader of casstore.lock (``scan_lock``) against the general TOML path.

The fast path must give exactly what tomllib + ``Lock.from_dict`` give for every lock
casstore writes, and must step aside (return None) for anything else, so that odd or
hostile text gets the general path's result or error, word for word.
"""

import pickle
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore.errors import LockError
from casstore.model.lock import (
    Lock,
    Pin,
    Signature,
    _parse_toml,
    format_lock,
    parse_lock,
    scan_lock,
)

names = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,20}(/[A-Za-z0-9_][A-Za-z0-9_.\-]{0,10}){0,2}", fullmatch=True)
digests = st.from_regex(r"sha256:[0-9a-f]{64}", fullmatch=True)
plain = st.text(st.characters(blacklist_characters='"\\', blacklist_categories=("Cc", "Cs")), max_size=12)
anything = st.text(max_size=12)
signatures = st.lists(st.builds(Signature, st.text(min_size=1, max_size=10), st.text(min_size=1, max_size=10),
                                st.text(min_size=1, max_size=10)), max_size=3)
pins = st.tuples(digests, st.integers(0, 2**62), st.integers(0, 10**6), st.one_of(st.none(), anything),
                 st.one_of(st.none(), anything), st.lists(anything, max_size=3), signatures, anything)


def _outcome(fn, text):
    """(Lock, its pin order) or the LockError's message and problems."""
    try:
        lock = fn(text)
    except LockError as exc:
        return ("error", str(exc), exc.problems)
    return ("lock", lock, list(lock.pins), [[s.keyid for s in p.signatures] for p in lock.pins.values()])


def _general(text):
    return _outcome(_parse_toml, text)


def _fast_or_general(text):
    return _outcome(lambda t: scan_lock(t) or _parse_toml(t), text)


def _build(raw: dict, fmt: str = "casstore.cassette/v1") -> Lock:
    lock = Lock()
    for name, (digest, size, entries, lo, hi, models, sigs, _) in raw.items():
        lock = lock.with_pin(Pin(name=name, digest=digest, size=size, format=fmt, entries=entries, recorded_from=lo,
                                 recorded_to=hi, models=tuple(models)).with_signatures(sigs))
    return lock


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(names, pins, max_size=6))
def test_the_fast_path_reads_what_format_lock_writes_exactly_as_toml_does(raw):
    text = format_lock(_build(raw))
    assert _fast_or_general(text) == _general(text)


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(names, pins.map(lambda p: (p[0], p[1] % 10**18, p[2], None, None, [], [], "")), max_size=6),
       st.lists(st.tuples(plain, plain, plain).filter(lambda t: all(t)), max_size=2))
def test_the_fast_path_is_taken_for_locks_of_plain_text(raw, sig_fields):
    lock = _build(raw)
    for name in lock.pins:
        lock = lock.with_pin(lock.pins[name].with_signatures(Signature(*f) for f in sig_fields))
    text = format_lock(lock)
    fast = scan_lock(text)
    assert fast is not None, text
    assert fast == _parse_toml(text) and list(fast.pins) == list(lock.pins)
    assert format_lock(fast) == text


def _mutations(text: str, rng: random.Random) -> list[str]:
    lines = text.split("\n")
    out = []
    for _ in range(40):
        i = rng.randrange(len(text))
        ch = rng.choice(['"', "\\", "\n", "\r", "\t", "#", "0", "x", "[", "]", "=", " ", "\x01", "\x7f", "é", "."])
        out.append(text[:i] + ch + text[i:])  # insert
        out.append(text[:i] + text[i + 1:])  # delete
        out.append(text[:i] + ch + text[i + 1:])  # replace
        j, k = rng.randrange(len(lines)), rng.randrange(len(lines))
        swapped = list(lines)
        swapped[j], swapped[k] = swapped[k], swapped[j]
        out.append("\n".join(swapped))
        dup = list(lines)
        dup.insert(j, lines[k])
        out.append("\n".join(dup))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_mutated_locks_get_the_general_paths_result_or_error(seed):
    rng = random.Random(seed)
    sig = Signature("ed25519:" + "1" * 16, "alice@example.com", "c2ln" * 22)
    lock = Lock()
    for i in range(4):
        lock = lock.with_pin(Pin(name=f"suite/t{i}", digest="sha256:" + f"{i}" * 64, size=100 + i, entries=i,
                                 recorded_from="2026-01-01T00:00:00Z" if i % 2 else None,
                                 recorded_to="2026-01-02T00:00:00Z", models=("gpt-4o", "m2")[: i % 3],
                                 signatures=(sig,) * (i % 3)))
    text = format_lock(lock)
    assert scan_lock(text) == lock
    for mutated in _mutations(text, rng):
        if "\x00" in mutated:
            continue
        assert _fast_or_general(mutated) == _general(mutated), repr(mutated)


@pytest.mark.parametrize("edit", [
    ('"suite/a"', '"../../etc/passwd"'),  # a hostile name in the exact layout
    ('"suite/a"', '"suite/a.json"'),
    ('"suite/a"', '"' + "x" * 201 + '"'),
    ('"suite/a"', '"suite/b"'),  # a duplicate table
    ("size = 10", "size = -3"),
    ("size = 10", "size = 010"),
    ("size = 10", "size = 1_0"),
    ("size = 10", "size = 99999999999999999999"),
    ("entries = 2", "entries = true"),
    ('"sha256:' + "a" * 64, '"sha256:' + "A" * 64),
    ('format = "casstore.cassette/v1"', 'format = 3'),
    ('models = ["gpt-4o"]', 'models = "gpt-4o"'),
    ('models = ["gpt-4o"]', 'models = ["gpt\\u0041"]'),
    ("version = 1", "version = 2"),
    ("version = 1", "version = 1\nextra = 1"),
    ('"suite/a"', '"suite/CON"'),  # Windows devices: both paths load them (pins written before the rule)
    ('"suite/a"', '"suite/aux.txt"'),
    ('"suite/a"', '"com1/a"'),
    ('"suite/a"', '"suite/Lpt9.x/a"'),
])
def test_odd_or_hostile_text_in_the_layout_gets_the_general_paths_answer(edit):
    lock = Lock(pins={
        "suite/a": Pin(name="suite/a", digest="sha256:" + "a" * 64, size=10, entries=2, models=("gpt-4o",)),
        "suite/b": Pin(name="suite/b", digest="sha256:" + "b" * 64, size=5),
    })
    text = format_lock(lock).replace(*edit)
    assert _fast_or_general(text) == _general(text)
    if edit[1].startswith('"../'):
        with pytest.raises(LockError, match="invalid cassette name"):
            parse_lock(text)
    if edit[1].startswith(('"suite/CON', '"com1')):
        assert edit[1].strip('"') in parse_lock(text).pins


def test_out_of_order_blocks_and_signatures_are_sorted_like_the_general_path():
    a = Signature("k1", "alice", "c2ln")
    b = Signature("k2", "bob", "c2ln")
    lock = Lock(pins={n: Pin(name=n, digest="sha256:" + "a" * 64, size=1, signatures=(a, b)) for n in ("x", "y")})
    text = format_lock(lock)
    swapped_sigs = text.replace('"k1", signer = "alice"', '"kX", signer = "alice"').replace(
        '"k2", signer = "bob"', '"k1", signer = "bob"')
    assert scan_lock(swapped_sigs) is None
    x, y = text.index('[cassettes."x"]'), text.index('[cassettes."y"]')
    swapped_blocks = text[:x] + text[y:].rstrip("\n") + "\n\n" + text[x:y].rstrip("\n") + "\n"
    assert scan_lock(swapped_blocks) is None
    for t in (swapped_sigs, swapped_blocks):
        assert _fast_or_general(t) == _general(t)
        assert list(parse_lock(t).pins) == ["x", "y"]


def test_a_scanned_lock_builds_each_pin_when_asked_and_equals_the_general_paths_lock():
    sig = Signature("k1", "alice", "c2ln")
    lock = Lock(pins={n: Pin(name=n, digest="sha256:" + c * 64, size=i, entries=i, models=("m",), signatures=(sig,))
                      for i, (n, c) in enumerate((("a", "a"), ("b/c", "b"), ("d", "c")))})
    text = format_lock(lock)
    fast = scan_lock(text)
    assert fast is not None
    assert fast.pins["b/c"] == lock.pins["b/c"] and fast.pins.get("zz") is None and "d" in fast.pins
    assert list(fast.pins) == ["a", "b/c", "d"] and len(fast.pins) == 3
    with pytest.raises(KeyError):
        fast.pins["zz"]
    assert fast == lock == _parse_toml(text) and dict(fast.pins) == lock.pins
    assert [p.name for p in fast.pins.values()] == ["a", "b/c", "d"]
    assert pickle.loads(pickle.dumps(fast)) == lock
    assert format_lock(fast.with_pin(lock.pins["a"])) == text
