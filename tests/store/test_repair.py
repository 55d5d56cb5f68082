"""Issue #16, item 6: repair.

* `push` replaces a corrupt object in the store with the verified local copy (the name is its
  digest, so the right bytes are the ones we hold) and never overwrites a good one, even a
  good one stored as other bytes (another zstd level);
* `pull` and `verify` drop a corrupt cache object and fetch it again;
* `verify --remote` says which command repairs what.

On a local-folder store and on the moto S3 server on loopback (loose and packed).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from casstore.model.blob import compress
from casstore.project import Project
from casstore.store.backends import object_key, open_store
from tests.helpers.commands import git
from tests.helpers.figures import record
from tests.helpers.gitrepo import commit, pin

SECTION = "repair"


def _flip(data: bytes) -> bytes:
    """Same length, one byte of the compressed payload changed: only hashing can tell."""
    i = len(data) // 2
    return data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1:]


@pytest.fixture(params=["local", "s3", "s3-packed"])
def project(request, tmp_path: Path, casstore):  # type: ignore[no-untyped-def]
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    if request.param == "local":
        url = str(tmp_path / "store")
    else:
        url = request.getfixturevalue("s3_url")
    assert casstore("init", "--remote", url, cwd=repo).exit_code == 0
    if request.param == "s3-packed":
        cfg = repo / "casstore.toml"
        cfg.write_text(cfg.read_text().replace("[remote]\n", "[remote]\npack_threshold = 2\n"))
    digests = {n: pin(casstore, repo, n, answer=f"answer {n}") for n in ("a", "b", "c")}
    commit(repo, "pins")
    assert casstore("push", "-q", cwd=repo).exit_code == 0
    return repo, url, digests, request.param


def _store(url: str, repo: Path):  # type: ignore[no-untyped-def]
    return open_store(url, base=repo)


def _corrupt_in_store(url: str, repo: Path, digest: str, kind: str) -> bytes:
    """Damage the stored object of ``digest`` in place (same size); return the bad bytes."""
    store = _store(url, repo)
    key = object_key(digest)
    good = store.read(key)
    bad = _flip(good)
    if kind == "s3-packed":
        # rewrite the pack with the member damaged (a bit flip on the bucket's disk)
        member = store.catalog().members[key]
        pack_key = f"packs/{member.pack}.pack"
        pack = store.inner.read(pack_key)
        pack = pack[:member.offset] + bad + pack[member.offset + member.length:]
        store.inner.write_once(pack_key, pack, checked=True)
    elif kind == "local":
        path = Path(url) / key
        path.chmod(0o644)
        path.write_bytes(bad)
    else:
        store.inner.write_once(key, bad, checked=True)
    assert _store(url, repo).read(key) == bad
    return bad


def test_push_replaces_a_corrupt_object_and_verify_says_how(project, casstore) -> None:  # type: ignore[no-untyped-def]
    repo, url, d, kind = project
    _corrupt_in_store(url, repo, d["b"], kind)
    r = casstore("verify", "--remote", cwd=repo)
    assert r.exit_code == 1, r.stdout
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len([e for e in errors if e.startswith("error: b:")]) == 1, r.stderr
    line = next(e for e in errors if e.startswith("error: b:"))
    assert "`casstore push`" in line and "replaces" in line, line
    r = casstore("push", "--json", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert r.json["repaired"] == ["b"] and r.json["done"] == [], r.stdout
    assert casstore("verify", "--remote", cwd=repo).exit_code == 0
    # a fresh machine gets the right bytes
    cache = Project.discover(repo).cache.root
    for f in sorted(cache.rglob("*"), reverse=True):
        if f.is_file():
            f.chmod(0o644)
            f.unlink()
    r = casstore("pull", "--frozen", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert casstore("verify", cwd=repo).exit_code == 0
    # and the next push finds nothing to repair: it never rewrites a good object
    r = casstore("push", "--json", cwd=repo)
    assert r.json["repaired"] == [] and r.json["done"] == [], r.stdout
    record(SECTION, **{f"corrupt_store_objects_repaired_{kind}": 1})


def test_push_never_overwrites_a_good_object(project, casstore) -> None:  # type: ignore[no-untyped-def]
    repo, url, d, kind = project
    if kind == "s3-packed":
        pytest.skip("a good packed member is never rewritten by push: covered by the corrupt case")
    store = _store(url, repo)
    key = object_key(d["a"])
    proj = Project.discover(repo)
    pinned = proj.load_lock().pins["a"]
    data = proj.cache.get(pinned.digest, pinned.size)
    assert data is not None
    other = compress(data, level=1)  # the same content, other bytes (another zstd level)
    assert other != store.read(key)
    store.inner.write_once(key, other, checked=True)
    for _ in range(2):
        r = casstore("push", "--json", cwd=repo)
        assert r.exit_code == 0 and r.json["repaired"] == [] and r.json["done"] == [], r.stdout
        assert _store(url, repo).read(key) == other, "push overwrote a good object"
    assert casstore("verify", "--remote", cwd=repo).exit_code == 0


def test_pull_and_verify_drop_a_corrupt_cache_object_and_fetch_it_again(project, casstore) -> None:  # type: ignore[no-untyped-def]
    repo, _url, d, kind = project
    cache = Project.discover(repo).cache.root
    for name, cmd in (("a", ("pull", "--frozen")), ("b", ("pull",)), ("c", ("verify",))):
        path = cache / object_key(d[name])
        path.chmod(0o644)
        path.write_bytes(_flip(path.read_bytes()))
        r = casstore(*cmd, cwd=repo)
        assert r.exit_code == 0, (cmd, r.stdout, r.stderr)
        assert f"{name}:" in r.stdout + r.stderr and "fetched it again" in r.stdout + r.stderr, (cmd, r.stdout, r.stderr)
        assert casstore("verify", cwd=repo).exit_code == 0
    record(SECTION, **{f"corrupt_cache_objects_refetched_{kind}": 3})


def test_verify_says_what_repairs_what_when_the_store_cannot_help(project, casstore, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    repo, url, d, kind = project
    if kind != "local":
        pytest.skip("one store kind is enough for the wording")
    cache = Project.discover(repo).cache.root
    # the cache and the store both bad: verify cannot repair; it says what does
    path = cache / object_key(d["a"])
    path.chmod(0o644)
    path.write_bytes(_flip(path.read_bytes()))
    _corrupt_in_store(url, repo, d["a"], kind)
    r = casstore("verify", cwd=repo)
    assert r.exit_code == 1
    line = next(ln for ln in r.stderr.splitlines() if ln.startswith("error: a:"))
    assert "casstore add" in line and "casstore push" in line, line
    # missing from the store: push uploads it
    store = _store(url, repo)
    store.inner.delete(object_key(d["c"]))
    r = casstore("verify", "--remote", cwd=repo)
    line = next(ln for ln in r.stderr.splitlines() if ln.startswith("error: c:"))
    assert "`casstore push`" in line and "uploads" in line, line


def test_push_reads_back_only_what_changed_since_it_last_verified(project, casstore) -> None:  # type: ignore[no-untyped-def]
    """Objects read back and verified once are remembered by (key, size, mtime or ETag): the
    next push does not read them again; one rewritten since is read and repaired; bytes
    changed in place with size and mtime kept wait for `verify --remote`, after which push
    repairs them (docs/design.md, Repair)."""
    repo, url, d, kind = project
    if kind != "local":
        pytest.skip("the mtime of a local file is what can be kept while its bytes change")
    r = casstore("push", "--json", cwd=repo)  # everything present: read back, verified, remembered
    assert r.json["repaired"] == [] and r.json["skipped"] == ["a", "b", "c"], r.stdout
    checked = Project.discover(repo).cache.checked(_store(url, repo).url)
    assert all(checked.has(_store(url, repo).inner.info(object_key(d[n]))) for n in "abc")
    # rewritten (a new mtime): the next push reads it back and replaces it
    _corrupt_in_store(url, repo, d["a"], kind)
    r = casstore("push", "--json", cwd=repo)
    assert r.json["repaired"] == ["a"], r.stdout
    # changed in place, size and mtime kept: push trusts what it verified before ...
    path = Path(url) / object_key(d["b"])
    st = path.stat()
    _corrupt_in_store(url, repo, d["b"], kind)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = casstore("push", "--json", cwd=repo)
    assert r.json["repaired"] == [], r.stdout
    # ... until verify --remote, which reads everything, finds it and says push repairs it
    r = casstore("verify", "--remote", cwd=repo)
    assert r.exit_code == 1 and "error: b:" in r.stderr and "`casstore push`" in r.stderr, r.stderr
    r = casstore("push", "--json", cwd=repo)
    assert r.json["repaired"] == ["b"], r.stdout
    assert casstore("verify", "--remote", cwd=repo).exit_code == 0


def test_push_remembers_what_it_uploaded_to_a_local_folder(project, casstore) -> None:  # type: ignore[no-untyped-def]
    """The objects a push wrote to a local folder are its own verified bytes: remembered as
    checked at once, so the first push that finds them present reads none back (at 100k pins
    that read-back was a third of the push). What changes them later is found as before."""
    repo, url, d, kind = project
    if kind != "local":
        pytest.skip("S3 lists the MD5 of a single PUT as its ETag, which push compares instead")
    store = _store(url, repo)
    checked = Project.discover(repo).cache.checked(store.url)
    assert all(checked.has(store.inner.info(object_key(d[n]))) for n in "abc")
    # not read back: bytes changed in place, size and mtime kept, are not seen by push ...
    path = Path(url) / object_key(d["b"])
    st = path.stat()
    _corrupt_in_store(url, repo, d["b"], kind)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = casstore("push", "--json", cwd=repo)
    assert r.json["repaired"] == [] and r.json["skipped"] == ["a", "b", "c"], r.stdout
    # ... but by verify --remote, after which push repairs them
    assert casstore("verify", "--remote", cwd=repo).exit_code == 1
    assert casstore("push", "--json", cwd=repo).json["repaired"] == ["b"]
    assert casstore("verify", "--remote", cwd=repo).exit_code == 0
