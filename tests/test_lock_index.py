"""The index of a scanned casstore.lock in the user's cache (casstore/model/lock_index.py):
keyed by the lock's exact bytes, sealed, checked, and never trusted for a lock the parser
would refuse. Every read here is compared with the parse of the same text."""

from __future__ import annotations

import hashlib
import os
import re
import threading
from array import array
from pathlib import Path

import pytest

from casstore.errors import LockError
from casstore.model import lock as lockmod
from casstore.model.lock import Lock, Pin, Signature, _parse_toml, format_lock
from casstore.model.lock_index import MAGIC, IndexedPinTable, index_bytes, lock_from_index
from casstore.project import LockIndexFiles, Project


@pytest.fixture(autouse=True)
def _every_size_indexed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lockmod, "INDEX_MIN_BYTES", 0)
    lockmod._PARSED.clear()


def _lock(n: int, *, seed: str = "x") -> Lock:
    pins = []
    for i in range(n):
        name = f"suite{i % 3}/case-{i:04d}.v{seed}"
        digest = "sha256:" + hashlib.sha256(f"{seed}{i}".encode()).hexdigest()
        sigs = [Signature(keyid=f"ed25519:{k}{i}", signer=f"s{k}@example.com", sig="c2ln" * (k + 1)) for k in range(i % 3)]
        pins.append(Pin(name=name, digest=digest, size=i * 7, entries=i % 5, recorded_from=None if i % 4 else "2026-11-20T10:00:00Z",
                        recorded_to="2026-11-21T10:00:00Z" if i % 2 else None, models=tuple(f"m{j}" for j in range(i % 3)),
                        ).with_signatures(sigs))
    return Lock().with_pins(pins)


def _project(tmp_path: Path, text: str | bytes) -> Project:
    (tmp_path / "casstore.toml").write_text("")
    (tmp_path / "casstore.lock").write_bytes(text.encode() if isinstance(text, str) else text)
    return Project.discover(tmp_path)


def _read(project: Project) -> Lock:
    """A fresh read, as the next process makes it (no in-process memo)."""
    lockmod._PARSED.clear()
    return project.read_lock_bytes(project.lock_path.read_bytes())


def _index_files(project: Project) -> list[Path]:
    folder = project.cache.root / "locks"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def _as_parsed(lock: Lock) -> tuple[list[str], list[Pin]]:
    return list(lock.pins), list(lock.pins.values())


@pytest.mark.parametrize("n", [0, 1, 2, 37])
def test_a_read_through_the_index_is_the_parse(tmp_path: Path, n: int) -> None:
    text = format_lock(_lock(n))
    project = _project(tmp_path, text)
    first = _read(project)
    assert [p.name for p in _index_files(project)] == [hashlib.sha256(text.encode()).hexdigest()]
    second = _read(project)
    assert isinstance(second.pins, IndexedPinTable)
    assert _as_parsed(second) == _as_parsed(first) == _as_parsed(_parse_toml(text))
    assert second == first and len(second.pins) == n
    if n:  # a few pins built, not all of them
        third = _read(project)
        name = list(third.pins)[n // 2]
        assert third.pins[name] == first.pins[name] and third.pins.get("nope") is None
        assert len(third.pins._pins) == 1  # type: ignore[attr-defined]
    assert not (tmp_path / ".casstore" / "locks").exists()  # never in the repository


def test_a_changed_lock_is_another_key_never_a_stale_answer(tmp_path: Path) -> None:
    project = _project(tmp_path, format_lock(_lock(5)))
    _read(project)
    changed = _lock(5).with_pin(Pin(name="suite0/new", digest="sha256:" + "ab" * 32, size=1))
    project.lock_path.write_text(format_lock(changed))
    got = _read(project)
    assert got == changed and "suite0/new" in got.pins
    assert len(_index_files(project)) == 2


def test_save_lock_indexes_what_it_writes(tmp_path: Path) -> None:
    project = _project(tmp_path, "version = 1\n")
    project.save_lock(_lock(9))
    assert isinstance(_read(project).pins, IndexedPinTable)


@pytest.mark.parametrize("damage", ["empty", "truncated", "flipped", "magic", "other key", "garbage"])
def test_a_damaged_index_is_ignored_and_rewritten(tmp_path: Path, damage: str) -> None:
    text = format_lock(_lock(12))
    project = _project(tmp_path, text)
    _read(project)
    (path,) = _index_files(project)
    data = path.read_bytes()
    other = index_bytes(hashlib.sha256(b"other").digest(), lockmod._parse_lock(text))
    assert other is not None
    path.chmod(0o644)
    path.write_bytes({"empty": b"", "truncated": data[:-5], "flipped": data[:60] + bytes([data[60] ^ 1]) + data[61:],
                      "magic": b"casstore.lock-index/0" + data[21:], "other key": other,
                      "garbage": os.urandom(len(data))}[damage])
    got = _read(project)
    assert not isinstance(got.pins, IndexedPinTable)  # parsed
    assert _as_parsed(got) == _as_parsed(_parse_toml(text))
    assert path.read_bytes() == data  # indexed again
    assert isinstance(_read(project).pins, IndexedPinTable)


def _forge(text: str, names: list[str] | None = None, starts: list[int] | None = None) -> bytes:
    """An index for ``text`` written by hand, sealed as casstore seals one."""
    found = [(m[1], m.start()) for m in re.finditer(r'\n\[cassettes\."([^"]+)"\]\n', text)]
    names = [n for n, _ in found] if names is None else names
    starts = [s for _, s in found] if starts is None else starts
    raw = "\n".join(names).encode()
    body = (hashlib.sha256(text.encode()).digest() + len(names).to_bytes(4, "little") + len(raw).to_bytes(4, "little")
            + raw + array("q", starts).tobytes())
    return MAGIC + body + hashlib.sha256(body).digest()


def test_a_forged_index_that_fails_the_load_checks_is_ignored() -> None:
    text = format_lock(_lock(6))
    key = hashlib.sha256(text.encode()).digest()
    assert lock_from_index(key, _forge(text), text) is not None  # the forger's tool is right
    names = list(lockmod._parse_lock(text).pins)
    starts = [m.start() for m in re.finditer(r"\n\[cassettes\.", text)]
    for bad in (_forge(text, names=names[:-1], starts=starts[:-1]),  # a pin left out (the last)
                _forge(text, names=names[1:], starts=starts[1:]),  # the header does not end there
                _forge(text, names=[names[1], names[0], *names[2:]], starts=[starts[1], starts[0], *starts[2:]]),
                _forge(text, names=[names[0], names[0], *names[2:]]),  # a duplicate name
                _forge(text, names=[*names[:-1], "suite9/other"]),  # a name its block does not have
                _forge(text, starts=[*starts[:-1], len(text) + 5])):
        assert lock_from_index(key, bad, text) is None


def test_a_forged_index_never_makes_a_refused_lock_readable(tmp_path: Path) -> None:
    """Blocks the scan would not take (here: a size TOML reads but from_dict refuses, and an
    escaped string it reads fine) are met when their Pin is built: the text is parsed in
    full, and its answer (the error, or the parsed pins) is what the table gives."""
    good = format_lock(_lock(6))
    refused = good.replace("size = 14\n", "size = -14\n", 1)
    escaped = good.replace('models = ["m0", "m1"]', 'models = ["m\\u0030", "m1"]', 1)
    assert "size = -14" in refused and "\\u0030" in escaped
    project = _project(tmp_path, refused)
    folder = project.cache.root / "locks"
    folder.mkdir(parents=True)
    for text in (refused, escaped):
        (folder / hashlib.sha256(text.encode()).hexdigest()).write_bytes(_forge(text))
    project.lock_path.write_text(refused)
    lock = _read(project)
    assert isinstance(lock.pins, IndexedPinTable)  # the forgery passed the load checks ...
    with pytest.raises(LockError, match="must be a non-negative integer"):
        list(lock.pins.values())  # ... and the parser's refusal is what building the pins gives
    project.lock_path.write_text(escaped)
    lock = _read(project)
    assert isinstance(lock.pins, IndexedPinTable)
    assert _as_parsed(lock) == _as_parsed(_parse_toml(escaped))


def test_concurrent_readers_and_writers_agree(tmp_path: Path) -> None:
    texts = [format_lock(_lock(20, seed=s)) for s in "abc"]
    project = _project(tmp_path, texts[0])
    expected = [_as_parsed(_parse_toml(t)) for t in texts]
    index = LockIndexFiles(project)
    errors: list[BaseException] = []

    def reader(k: int) -> None:
        try:
            for i in range(30):
                t = texts[(i + k) % 3]
                raw = t.encode()
                key = hashlib.sha256(raw).digest()
                lock = index.load(key, t) or lockmod._parse_lock(t)
                if not isinstance(lock.pins, IndexedPinTable):
                    index.save(key, lock)
                assert _as_parsed(lock) == expected[(i + k) % 3]
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert len(_index_files(project)) == 3


def test_only_the_newest_indexes_are_kept(tmp_path: Path) -> None:
    project = _project(tmp_path, "")
    for s in range(LockIndexFiles.KEEP + 3):
        project.lock_path.write_text(format_lock(_lock(3, seed=str(s))))
        _read(project)
    assert len(_index_files(project)) == LockIndexFiles.KEEP


def test_changed_pins_compare_blocks_as_pins_compare(tmp_path: Path) -> None:
    """What the pre-commit check asks of a staged lock against HEAD's: the same pins whether
    compared by block text (scanned or indexed locks, no Pin built for an equal block) or
    by Pin (a lock in memory)."""
    from casstore.ops.check import _changed_pins

    before = _lock(30)
    pins = dict(before.pins)
    names = list(pins)
    pins[names[1]] = Pin(**{**pins[names[1]].__dict__, "digest": "sha256:" + "cd" * 32})
    pins[names[2]] = pins[names[2]].with_signatures([*pins[names[2]].signatures, Signature("k9", "s9", "c2ln")])
    pins[names[3]] = Pin(**{**pins[names[3]].__dict__, "entries": 99})  # not a change the check looks at
    pins[names[4]] = Pin(**{**pins[names[4]].__dict__, "size": 12345})
    del pins[names[5]]
    pins["suite0/new"] = Pin(name="suite0/new", digest="sha256:" + "ef" * 32, size=3)
    after = Lock(pins=dict(sorted(pins.items())))
    expected = [p.name for p in _changed_pins(after, before)]
    assert expected == sorted([names[1], names[2], names[4], "suite0/new"])
    old_text, new_text = format_lock(before), format_lock(after)
    scanned = _changed_pins(lockmod._parse_lock(new_text), lockmod._parse_lock(old_text))
    assert [p.name for p in scanned] == expected
    project = _project(tmp_path, old_text)
    _read(project)
    project.lock_path.write_text(new_text)
    _read(project)  # both indexed now
    lockmod._PARSED.clear()
    new_lock, old_lock = project.read_lock_bytes(new_text.encode()), project.read_lock_bytes(old_text.encode())
    assert isinstance(new_lock.pins, IndexedPinTable) and isinstance(old_lock.pins, IndexedPinTable)
    assert _changed_pins(new_lock, old_lock) == scanned
    assert len(new_lock.pins._pins) == 5  # the four changed and the one whose entries changed


# -- a review's attacks: names the scan refuses, other rules, files that are not this user's ------
def test_an_index_holds_only_names_the_scan_accepts() -> None:
    """A name the scan refuses takes the parse, whatever an index says: a .json suffix or a
    201-character name (the parser refuses the lock; the index gave the pin), and an
    escaped name (TOML reads `\\u0078` as `x`: the index hid the pin the parse has). And an
    index written under other scan rules (another casstore version) is not read."""
    good = format_lock(_lock(6))
    first = list(lockmod._parse_lock(good).pins)[0]
    assert first == "suite0/case-0000.vx"
    cases = {"suite0/case-0000.json": "drop the .json suffix", "suite0/" + "a" * 200: "longer than 200",
             "suite0/case-0000.v\\u0078": None}
    for name, refusal in cases.items():
        text = good.replace(f'[cassettes."{first}"]', f'[cassettes."{name}"]', 1)
        key = hashlib.sha256(text.encode()).digest()
        forged = _forge(text)
        assert name in forged.decode("utf-8", "replace")
        assert lock_from_index(key, forged, text) is None, name
        if refusal is not None:
            with pytest.raises(LockError, match=refusal):
                lockmod._parse_lock(text)
        else:
            assert list(lockmod._parse_lock(text).pins) == list(lockmod._parse_lock(good).pins)
    key = hashlib.sha256(good.encode()).digest()
    data = _forge(good)
    assert lock_from_index(key, data, good) is not None
    from casstore.model import lock_index

    other_rules = lock_index._magic(lockmod._HEAD, lockmod._BLOCK.replace("size", "bytes"), 200,
                                    ".json")
    assert other_rules != MAGIC and lock_from_index(key, other_rules + data[len(MAGIC):], good) is None


def _planted(tmp_path: Path) -> tuple[Project, str, Path, bytes]:
    """A project whose lock has a good index, and that index's path and bytes."""
    text = format_lock(_lock(6))
    project = _project(tmp_path, text)
    _read(project)
    (path,) = _index_files(project)
    return project, text, path, path.read_bytes()


def test_an_index_that_is_not_a_plain_file_of_this_user_is_not_read(tmp_path: Path) -> None:
    """The seal is a checksum anyone can compute: an index writable by others, a symlink
    named like one, or (as root) one owned by another user is not read: the lock is
    parsed, and the index written again as this user's file."""
    project, text, path, data = _planted(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(data)
    plants = {"writable by others": lambda: path.chmod(0o666), "a symlink": lambda: (path.unlink(), path.symlink_to(elsewhere))}
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        plants["another user's"] = lambda: os.chown(path, 65534, 65534)
    for what, plant in plants.items():
        plant()
        got = _read(project)
        assert not isinstance(got.pins, IndexedPinTable), what  # parsed
        assert _as_parsed(got) == _as_parsed(_parse_toml(text))
        assert not path.is_symlink() and path.read_bytes() == data and path.stat().st_mode & 0o077 == 0
        assert path.stat().st_uid == os.geteuid()
        assert isinstance(_read(project).pins, IndexedPinTable), what  # its own index again
    assert elsewhere.read_bytes() == data


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_like_an_index_does_not_block_the_read(tmp_path: Path) -> None:
    project, text, path, data = _planted(tmp_path)
    path.unlink()
    os.mkfifo(path)
    got: list[Lock] = []
    reader = threading.Thread(target=lambda: got.append(_read(project)), daemon=True)
    reader.start()
    reader.join(60)  # a watchdog, not a measure: the read returns at once or never
    hung = reader.is_alive()
    if hung:  # unblock it (a writer that closes: end of file), then fail
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        reader.join()
    assert not hung and _as_parsed(got[0]) == _as_parsed(_parse_toml(text))


def test_nothing_is_written_or_deleted_through_a_symlink_out_of_the_cache(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """<cache>/locks a link to a folder elsewhere holding files named like indexes: the read
    parses, writes nothing there and deletes nothing there (the newest-8 rule would have
    removed the oldest). A cache root that is a file only costs the index."""
    text = format_lock(_lock(6))
    project = _project(tmp_path, text)
    outside = tmp_path / "outside"
    outside.mkdir()
    theirs = {hashlib.sha256(str(i).encode()).hexdigest(): str(i).encode() for i in range(LockIndexFiles.KEEP + 2)}
    for i, (name, body) in enumerate(theirs.items()):
        (outside / name).write_bytes(body)
        os.utime(outside / name, ns=(i * 10**9, i * 10**9))
    project.cache.root.mkdir(parents=True)
    (project.cache.root / "locks").symlink_to(outside)
    for _ in range(2):
        assert _as_parsed(_read(project)) == _as_parsed(_parse_toml(text))
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == theirs
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(blocked))
    assert _as_parsed(_read(Project.discover(tmp_path))) == _as_parsed(_parse_toml(text))
    assert blocked.read_text() == "not a folder"
