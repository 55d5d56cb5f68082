"""A large canonical cassette is parsed a few MiB of entries at a time (model/cassette.py,
issue #19): the same Cassette, the same refusals, as parsing the whole with json.

The piece size is made small here so that documents of a few dozen KB are cut many times,
and the entries carry what the cutting could mistake for an entry's end: the patterns it
looks for inside strings and inside nested objects, ``}]`` in the metadata, escapes.
"""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore.errors import CassetteFormatError
from casstore.model import canonical, cassette
from casstore.model.cassette import Cassette, load_bytes
from tests.helpers.cassettes import make_cassette

TRAPS = ['},{"identity":"' + "a" * 64, '},{"duration_ms":1', "}]", '"}]}', "\\", '"', "é\u2028\U0001f600", "\x00\x1f"]


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch):
    monkeypatch.setattr(cassette, "_PIECE", 2048)


def _doc(n: int = 120) -> dict:
    doc = make_cassette("pieces", n=n)
    for i, entry in enumerate(doc["entries"]):
        trap = TRAPS[i % len(TRAPS)]
        body = entry["request"]["body"]
        body["messages"] += [{"identity": "b" * 64, "duration_ms": i, "content": trap},
                             {"x": [{"y": trap}, {"identity": trap}]}]
        body["temperature"] = i / 7 - 3
        entry["response"]["body"]["choices"][0]["message"]["content"] = trap * (i % 5) + "x" * (i * 37 % 900)
        if i % 3:
            del entry["duration_ms"]  # an entry starting with "identity"
    doc["meta"]["note"] = '}],"entries":[]}'
    doc["redaction"]["rules"] = [{"pattern": "}]"}]
    return doc


def _reference(raw: bytes, source: str = "c"):  # type: ignore[no-untyped-def]
    """What parsing the whole document with the json module gives (value or message)."""
    try:
        value = canonical._loads_json(raw, source, f"{source} is nested deeper than {canonical.MAX_JSON_DEPTH} levels")
        return "cassette", Cassette.from_dict(value, source=source)
    except ValueError as exc:
        return "refused", str(exc)
    except CassetteFormatError as exc:
        return "refused", str(exc)


def _ours(raw: bytes, source: str = "c"):  # type: ignore[no-untyped-def]
    try:
        return "cassette", load_bytes(raw, source=source)
    except CassetteFormatError as exc:
        return "refused", str(exc)


def _same(raw: bytes) -> None:
    ours, ref = _ours(raw), _reference(raw)
    assert ours[0] == ref[0]
    if ours[0] == "cassette":
        assert repr(ours[1]) == repr(ref[1])  # repr: 1 vs 1.0, key order
    else:
        assert ours[1] == ref[1]


def test_canonical_cassette_is_cut_and_gives_the_same_cassette():
    raw = canonical.canonical_json(_doc())
    assert len(raw) > 20 * cassette._PIECE
    parsed = cassette._parse_in_pieces(raw)
    assert parsed is not None, "the canonical layout must take the pieces path"
    assert parsed == json.loads(raw) and list(parsed) == list(json.loads(raw))
    _same(raw)


def test_integer_past_64_bits_in_an_entry_is_an_int():
    doc = _doc()
    doc["entries"][70]["response"]["body"]["usage"] = {"total_tokens": 2**70 + 1}
    raw = canonical.canonical_json(doc)
    assert cassette._parse_in_pieces(raw) is None  # json reads it
    assert load_bytes(raw).entries[70]["response"]["body"]["usage"]["total_tokens"] == 2**70 + 1
    _same(raw)


@pytest.mark.parametrize("depth, ok", [(200, True), (201, False)])
def test_depth_bound_inside_an_entry(depth, ok):
    doc = _doc()
    # document -> entries -> entry -> request -> body -> "deep": depth 5 is the "deep" list
    deep: list = []
    for _ in range(depth - 6):
        deep = [deep]
    doc["entries"][60]["request"]["body"]["deep"] = deep
    raw = canonical.canonical_json(doc)
    _same(raw)
    if ok:
        load_bytes(raw)
    else:
        with pytest.raises(CassetteFormatError, match="nested deeper than 200"):
            load_bytes(raw)


def test_duplicate_entries_key_after_the_array_wins_as_json():
    raw = canonical.canonical_json(_doc())
    dup = raw[:-1] + b',"entries":[]}'
    _same(dup)
    assert load_bytes(dup).entries == ()
    escaped = raw[:-1] + b',"\\u0065ntries":[]}'
    _same(escaped)
    assert load_bytes(escaped).entries == ()


def test_broken_byte_in_the_middle_is_refused_as_before():
    raw = bytearray(canonical.canonical_json(_doc()))
    mid = raw.index(b'"role"', len(raw) // 2)
    raw[mid] = ord("}")
    _same(bytes(raw))
    assert _ours(bytes(raw))[0] == "refused"


def _mutate(raw: bytes, ops: list[tuple[int, int, bytes]]) -> bytes:
    data = bytearray(raw)
    for pos, cut, insert in ops:
        pos %= len(data)
        data[pos:pos + cut] = insert
    return bytes(data)


RAW = canonical.canonical_json(_doc(60))


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(st.tuples(st.integers(0, 10**7), st.integers(0, 3),
                              st.sampled_from([b"", b"}", b"]", b",", b'"', b"\\", b'},{"identity":"', b"}]", b"1e999",
                                               b"18446744073709551616", b"[" * 3, b"\xff"])), min_size=1, max_size=3))
def test_mutated_canonical_bytes_same_as_json(ops):
    _same(_mutate(RAW, ops))


def test_entries_are_not_shared_between_loads():
    raw = canonical.canonical_json(_doc(40))
    a, b = load_bytes(raw), load_bytes(raw)
    before = copy.deepcopy(b.entries)
    a.entries[0]["request"]["body"]["model"] = "changed"
    assert b.entries == before
