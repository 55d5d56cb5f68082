import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore.errors import LockError
from casstore.model.lock import Lock, Pin, Signature, format_lock, parse_lock

D1 = "sha256:" + "a" * 64
D2 = "sha256:" + "b" * 64


def _lock() -> Lock:
    return (
        Lock()
        .with_pin(Pin(name="zeta", digest=D1, size=10, entries=2, models=("gpt-4o",),
                      signatures=(Signature("00ff", "bob@example.com", "c2ln"),)))
        .with_pin(Pin(name="alpha/beta", digest=D2, size=5, recorded_from="2026-01-01T00:00:00Z",
                      recorded_to="2026-01-02T00:00:00Z"))
    )


def test_text_roundtrip_is_exact_and_sorted():
    text = format_lock(_lock())
    assert parse_lock(text) == _lock()
    assert format_lock(parse_lock(text)) == text
    assert text.index('[cassettes."alpha/beta"]') < text.index('[cassettes."zeta"]')


def test_unknown_keys_are_preserved():
    text = format_lock(_lock()).replace('version = 1', 'version = 1\nfuture_field = "kept"')
    text = text.replace('entries = 2', 'entries = 2\nreviewed_by = ["carol"]')
    again = format_lock(parse_lock(text))
    assert 'future_field = "kept"' in again and 'reviewed_by = ["carol"]' in again


def test_validation_errors_name_key_paths_and_are_collected():
    text = format_lock(_lock()).replace("size = 10", "size = -3").replace(D2, "sha256:nothex")
    with pytest.raises(LockError) as err:
        parse_lock(text)
    msg = str(err.value)
    assert "'cassettes.\"zeta\".size'" in msg
    assert "'cassettes.\"alpha/beta\".digest'" in msg
    assert len(err.value.problems) == 2


def test_hostile_name_in_lock_is_refused():
    text = '[cassettes."../../etc/x"]\ndigest = "%s"\nsize = 1\n' % D1
    with pytest.raises(LockError, match="invalid cassette name"):
        parse_lock(text)


@pytest.mark.parametrize("text", [
    '[cassettes."abc\\n"]\ndigest = "%s"\nsize = 1\n' % D1,  # a name with a trailing newline
    '[cassettes."a\\n/b"]\ndigest = "%s"\nsize = 1\n' % D1,
    '[cassettes.abc]\ndigest = "%s\\n"\nsize = 1\n' % D1,  # a digest with one
])
def test_a_trailing_newline_in_a_name_or_digest_is_refused(text):
    """The name and digest patterns end in \\Z: "$" also matches before a final newline."""
    with pytest.raises(LockError, match="invalid cassette name|digest"):
        parse_lock("version = 1\n" + text)


@pytest.mark.parametrize("garbage", [b"\xff\xfe", b"[[[", b"version = 2\n", b"cassettes = 3\n", b"a\x00b"])
def test_garbage_is_a_lock_error(garbage):
    with pytest.raises(LockError):
        parse_lock(garbage)


names = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,20}(/[A-Za-z0-9_][A-Za-z0-9_.\-]{0,10}){0,2}", fullmatch=True)
digests = st.from_regex(r"sha256:[0-9a-f]{64}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(names, st.tuples(digests, st.integers(0, 2**40), st.lists(st.text(max_size=20), max_size=3)),
                       max_size=6),
       st.text(max_size=30))
def test_any_lock_roundtrips(pins, extra):
    lock = Lock()
    for name, (d, size, models) in pins.items():
        lock = lock.with_pin(Pin(name=name, digest=d, size=size, models=tuple(models),
                                 extra={"note": extra}))
    text = format_lock(lock)
    assert parse_lock(text) == lock
    assert format_lock(parse_lock(text)) == text


def test_parsed_locks_are_remembered_by_content_never_by_name():
    from casstore.model.lock import Lock, Pin, format_lock, parse_lock

    pin = Pin(name="a", digest="sha256:" + "a" * 64, size=10, entries=1)
    one = format_lock(Lock(pins={"a": pin}))
    two = format_lock(Lock(pins={"a": pin, "b": Pin(name="b", digest="sha256:" + "b" * 64, size=5, entries=1)}))
    first = parse_lock(one)
    assert parse_lock(one.encode()) is first  # the same text: parsed once
    assert sorted(parse_lock(two).pins) == ["a", "b"]  # other text: parsed afresh
    assert sorted(parse_lock(one).pins) == ["a"]
    bad = one.replace("size = 10", "size = -1")
    with pytest.raises(Exception, match="malformed|size"):
        parse_lock(bad)
    with pytest.raises(Exception, match="malformed|size"):
        parse_lock(bad)  # errors are never remembered as results


def test_a_lock_rewritten_in_place_with_the_same_size_is_read_again(tmp_path):
    import os
    import time

    from casstore.model.lock import Lock, Pin, format_lock
    from casstore.project import Project

    (tmp_path / "casstore.toml").write_text('[remote]\nurl = ".casstore/store"\n')
    lock_path = tmp_path / "casstore.lock"
    pin = Pin(name="a", digest="sha256:" + "a" * 64, size=10, entries=1)
    lock_path.write_text(format_lock(Lock(pins={"a": pin})))
    old = time.time() - 60
    os.utime(lock_path, (old, old))  # written long ago: its stamp is trusted
    project = Project.discover(tmp_path)
    assert project.load_lock().pins["a"].size == 10
    assert project.load_lock().pins["a"].size == 10
    with open(lock_path, "r+") as fh:  # an editor saving in place: same inode, same length
        text = fh.read()
        fh.seek(0)
        fh.write(text.replace("size = 10", "size = 99"))
    assert lock_path.stat().st_size == len(text)
    assert Project.discover(tmp_path).load_lock().pins["a"].size == 99
    fresh = Project.discover(tmp_path)
    with open(lock_path, "r+") as fh:  # and again at once, within the same clock tick
        fh.write(text.replace("size = 10", "size = 77"))
    assert fresh.load_lock().pins["a"].size == 77


def test_writing_blocks_compiles_none_of_the_scans_expressions() -> None:
    """`casstore add` imports the lock module before its fork and its workers only write
    blocks: the scan's expressions are compiled on the first scan, not at import."""
    import subprocess
    import sys

    code = ("import casstore.model.lock as L\n"
            "print(L.format_pin(L.Pin(name='a', digest='sha256:' + '0' * 64, size=1)) != '', L._rules.cache_info().currsize)\n"
            "lock = L.parse_lock(L.format_lock(L.Lock({'a': L.Pin(name='a', digest='sha256:' + '0' * 64, size=1)})))\n"
            "print(sorted(lock.pins), L._rules.cache_info().currsize)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["True 0", "['a'] 1"]


def test_blocks_replace_or_add_pins_as_the_pins_themselves_would() -> None:
    """format_lock's ``blocks`` (what add's workers wrote) stand for pins: a block of a name the
    lock holds replaces its pin, one of a new name is added in name order."""
    from casstore.model.lock import format_pin

    def pin(name: str, fill: str) -> Pin:
        return Pin(name=name, digest="sha256:" + fill * 64, size=3, entries=1, models=("m",),
                   signatures=(Signature(keyid="k", signer="s@example.com", sig="c2ln"),))

    old = Lock(pins={"b": pin("b", "0"), "d": pin("d", "1")})
    new = {"a": pin("a", "2"), "b": pin("b", "3"), "c": pin("c", "4")}
    text = format_lock(old, {name: format_pin(p) for name, p in new.items()})
    assert text == format_lock(old.with_pins(new.values()))
    assert list(parse_lock(text).pins) == ["a", "b", "c", "d"] and parse_lock(text).pins["b"] == new["b"]
