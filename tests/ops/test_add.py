"""casstore add at scale: threads, one lock write, the cheap inside-the-project check.

The fast paths must change nothing a user sees: the lock text, the cache, the refusals.
"""

import os
import shutil
import stat
import threading

import pytest

from casstore.errors import UsageError
from casstore.model.fsutil import atomic_write
from casstore.model.lock import Lock, Pin
from casstore.ops.add import add
from casstore.project import Project
from tests.helpers.cassettes import leaky, write_cassette


def _cache_files(cache) -> dict[str, bytes]:
    """The cache's content; not worktrees/, the stat memo of working copies (it remembers
    only files older than their racily-clean window, so it depends on when add ran)."""
    return {p.relative_to(cache).as_posix(): p.read_bytes() for p in sorted(cache.rglob("*"))
            if p.is_file() and not p.relative_to(cache).as_posix().startswith("worktrees/")}


def _write_many(repo, n):
    for i in range(n):
        write_cassette(repo, f"{'ab'[i % 2]}/c{i:03d}", n=1 + i % 3)


def _add_afresh(repo, cache, jobs):
    """add of every working copy with no lock and an empty cache: its results."""
    if cache.exists():  # read-only files and folders made writable first
        for p in cache.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        shutil.rmtree(cache)
    (repo / "casstore.lock").unlink(missing_ok=True)
    return add(Project.discover(repo), [repo / "tests" / "cassettes"], jobs=jobs)


def test_threads_give_the_same_lock_and_cache_as_one_thread(repo, isolated_user):
    _write_many(repo, 30)
    cache = isolated_user / "cache"
    seen = []
    for jobs in (1, 4):
        res = _add_afresh(repo, cache, jobs)
        assert [a.name for a in res] == sorted(a.name for a in res) and len(res) == 30
        seen.append(((repo / "casstore.lock").read_text(), _cache_files(cache)))
    assert seen[0] == seen[1]
    stored = [k for k in seen[0][1] if k.startswith(("objects/", "signatures/"))]
    assert len(stored) == 30  # an object per cassette; push rebuilds a trusted key's envelopes from the lock
    again = add(Project.discover(repo), [repo / "tests" / "cassettes"], jobs=4)
    assert not any(a.changed for a in again)
    assert (repo / "casstore.lock").read_text() == seen[0][0]


def test_a_symlink_out_of_the_project_is_refused_before_any_work(repo, isolated_user, tmp_path):
    write_cassette(repo, "good")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.json").write_text((repo / "tests" / "cassettes" / "good.json").read_text())
    sub = repo / "tests" / "cassettes" / "sub"
    sub.mkdir()
    (sub / "evil.json").symlink_to(outside / "x.json")
    with pytest.raises(UsageError, match="outside the project"):
        add(Project.discover(repo), [repo / "tests" / "cassettes"])
    assert not (repo / "casstore.lock").exists()
    assert not (isolated_user / "cache").exists()  # refused before anything was written


def test_a_duplicate_name_leaves_the_lock_untouched(repo):
    write_cassette(repo, "one")
    add(Project.discover(repo), [repo / "tests" / "cassettes"])
    before = (repo / "casstore.lock").read_text()
    write_cassette(repo, "two")
    copy = repo / "tests" / "cassettes" / "zz.json"
    copy.write_text((repo / "tests" / "cassettes" / "two.json").read_text())
    with pytest.raises(UsageError, match="both hold cassette 'two'"):
        add(Project.discover(repo), [repo / "tests" / "cassettes"])
    assert (repo / "casstore.lock").read_text() == before


def test_with_pins_is_with_pin_repeated():
    pins = [Pin(name=n, digest="sha256:" + c * 64, size=i) for i, (n, c) in enumerate(
        [("m", "a"), ("b", "b"), ("z", "c"), ("b", "d"), ("a/x", "e")])]
    one = Lock()
    for p in pins:
        one = one.with_pin(p)
    many = Lock().with_pins(pins)
    assert many == one and list(many.pins) == list(one.pins) == ["a/x", "b", "m", "z"]
    assert many.pins["b"].digest == "sha256:" + "d" * 64


def test_atomic_write_makes_folders_keeps_modes_and_survives_a_leftover_temp_name(tmp_path, monkeypatch):
    import casstore.model.fsutil as fsutil

    target = tmp_path / "a" / "b" / "obj"
    assert atomic_write(target, b"one", mode=0o444, exclusive=True, durable=False)
    assert target.read_bytes() == b"one" and stat.S_IMODE(target.stat().st_mode) == 0o444
    assert not atomic_write(target, b"two", exclusive=True)  # write once: first writer wins
    assert target.read_bytes() == b"one"
    # a temp file left by a killed process under the name this call would pick
    monkeypatch.setattr(fsutil, "_names", iter([7, 7]))
    leftover = tmp_path / "a" / "b" / f".key.{os.getpid()}-{threading.get_ident()}-7.tmp"
    leftover.write_bytes(b"stale")
    assert atomic_write(tmp_path / "a" / "b" / "key", b"secret", mode=0o600)
    assert (tmp_path / "a" / "b" / "key").read_bytes() == b"secret"
    assert stat.S_IMODE((tmp_path / "a" / "b" / "key").stat().st_mode) == 0o600
    assert leftover.read_bytes() == b"stale"
    assert sorted(p.name for p in target.parent.iterdir()) == [leftover.name, "key", "obj"]


def test_status_remembers_working_copy_digests_and_sees_every_change(repo, isolated_user):
    from casstore.ops.inspect import status

    for name in ("a", "b", "c"):
        write_cassette(repo, name)
    add(Project.discover(repo), [repo / "tests" / "cassettes"])
    old = 1_600_000_000
    for p in (repo / "tests" / "cassettes").glob("*.json"):
        os.utime(p, (old, old))  # written long ago: their digests may be remembered

    def states():
        return {r["name"]: r["working_copy"] for r in status(Project.discover(repo), remote=False)["pins"]}

    assert states() == {"a": "same", "b": "same", "c": "same"}
    memo = list((isolated_user / "cache" / "worktrees").glob("*.json"))
    assert len(memo) == 1 and '"a"' in memo[0].read_text()
    write_cassette(repo, "a", n=3)  # changed (new mtime and size)
    (repo / "tests" / "cassettes" / "b.json").unlink()
    (repo / "tests" / "cassettes" / "c.json").write_text("{not json")
    assert states() == {"a": "modified", "b": "missing", "c": "invalid"}
    assert states() == {"a": "modified", "b": "missing", "c": "invalid"}
    memo[0].write_text("garbage")  # a damaged memo is ignored, never trusted
    assert states() == {"a": "modified", "b": "missing", "c": "invalid"}


def test_push_sends_every_envelope_whether_add_kept_it_or_not(repo, casstore):  # type: ignore[no-untyped-def]
    """A trusted key's envelope is rebuilt from the lock by push (add writes none); one of a
    key nobody trusted when it signed (signatures not required) is kept by add and sent
    from the cache; the user's own key rebuilds its envelopes even once it is untrusted."""
    from casstore.store.backends import open_store, signature_key

    write_cassette(repo, "trusted-then")
    assert casstore("add", "tests/cassettes/trusted-then.json", cwd=repo).exit_code == 0
    cfg = repo / "casstore.toml"
    cfg.write_text(cfg.read_text().replace("require_signatures = true", "require_signatures = false"))
    (repo / ".casstore" / "trusted_keys").write_text("")  # nobody trusted from here on
    write_cassette(repo, "untrusted")
    assert casstore("add", "tests/cassettes/untrusted.json", cwd=repo).exit_code == 0
    assert casstore("push", cwd=repo).exit_code == 0
    project = Project.discover(repo)
    store = open_store(project.remote_location, base=repo)
    for name in ("trusted-then", "untrusted"):
        pin = project.load_lock().pins[name]
        assert pin.signatures, name
        assert store.exists_many([signature_key(pin.digest, pin.signatures[0].keyid)]), name


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_lock_is_the_same_with_the_workers_blocks_as_formatted_from_the_pins(repo, isolated_user,
                                                                                 jobs):
    """add's workers write the lock block of each pin they make; the lock text must be the
    bytes format_lock writes for the same pins: new pins, a changed one, an unchanged one that
    keeps another signer's signature, one with keys this version does not know, a folder
    whose files sort differently as paths and as text ("s-x" < "s/..." as text)."""
    from casstore.model.lock import format_lock
    from casstore.store import signing

    for i in range(12):
        write_cassette(repo, f"s/c{i:02d}", n=1 + i % 2)
    write_cassette(repo, "s-x")
    lock_path = repo / "casstore.lock"
    add(Project.discover(repo), [repo / "tests" / "cassettes"], jobs=jobs)
    lock = Project.discover(repo).load_lock()
    other = signing.SigningKey.generate("other@example.com")
    c00 = lock.pins["s/c00"]
    c03 = lock.pins["s/c03"]
    lock = lock.with_pins([c00.with_signatures([*c00.signatures, other.sign_pin(c00)]),
                           Pin(**{**c03.__dict__, "extra": {"reviewed": True}})])
    lock_path.write_text(format_lock(lock))
    write_cassette(repo, "s/c01", n=5)  # changed content
    write_cassette(repo, "s/c03", n=4)  # changed content, unknown key kept
    res = add(Project.discover(repo), [repo / "tests" / "cassettes"], jobs=jobs)
    assert [a.name for a in res] == ["s/c00", "s/c01"] + [f"s/c{i:02d}" for i in range(2, 12)] + ["s-x"]
    assert {a.name for a in res if a.changed} == {"s/c01", "s/c03"}
    pins = Project.discover(repo).load_lock().pins
    assert format_lock(Lock(pins=dict(pins.items()))) == lock_path.read_text()  # every block formatted from its pin
    assert len(pins["s/c00"].signatures) == 2 and "other@example.com" in {s.signer for s in pins["s/c00"].signatures}
    assert len(pins["s/c01"].signatures) == 1 and pins["s/c03"].extra == {"reviewed": True}


def test_threads_taking_files_pin_and_cache_what_one_thread_does(repo, isolated_user, fake_key):
    """add's files go to threads taking them from one queue: the lock, the results and the
    cached objects are those of one thread, and a secret in any file refuses the whole add
    with nothing pinned and nothing of it cached."""
    from casstore.errors import CheckFailed
    from casstore.store.cache import Cache

    _write_many(repo, 211)
    cache = isolated_user / "cache"
    seen = []
    for res in (_add_afresh(repo, cache, jobs) for jobs in (1, 2)):  # one after the other
        pins = Project.discover(repo).load_lock().pins
        seen.append(((repo / "casstore.lock").read_text(), [(a.name, a.digest, a.changed) for a in res],
                     {p.digest: Cache(cache).get(p.digest, p.size) is not None for p in pins.values()}))
    assert seen[0] == seen[1] and len(seen[0][1]) == 211 and all(seen[0][2].values())
    before = (repo / "casstore.lock").read_text()
    leak = leaky(repo, "b/zz-leak", fake_key)  # the last file: in the last chunk
    write_cassette(repo, "a/new")
    with pytest.raises(CheckFailed, match="b/zz-leak") as exc:
        add(Project.discover(repo), [repo / "tests" / "cassettes"], jobs=2)
    assert fake_key not in str(exc.value)
    assert (repo / "casstore.lock").read_text() == before
    from casstore.model.blob import digest_and_size
    from casstore.model.cassette import load_file

    digest, _ = digest_and_size(load_file(leak).canonical_bytes())
    assert not Cache(cache).has(digest)  # its object never entered the cache


def test_a_malformed_lock_is_refused_after_the_scan_as_before(repo, isolated_user, fake_key):
    """A malformed lock is refused under the guard after every file is checked (a secret
    found still comes first), and the lock is left as it was."""
    from casstore.errors import CheckFailed, LockError

    _write_many(repo, 30)
    (repo / "casstore.lock").write_text("[cassettes.broken\n")
    with pytest.raises(LockError, match="malformed"):
        add(Project.discover(repo), [repo / "tests" / "cassettes"], jobs=2)
    leaky(repo, "b/zz-leak", fake_key)
    with pytest.raises(CheckFailed, match="b/zz-leak"):
        add(Project.discover(repo), [repo / "tests" / "cassettes"], jobs=2)
    assert (repo / "casstore.lock").read_text() == "[cassettes.broken\n"


