"""The local cache holding packs: `add` and `pull` of many cassettes write one pack per
process instead of one file per object, and every reader of the cache sees loose and
packed objects as one namespace; a bad member is dropped (its pack rewritten) and fetched
again, never trusted; a killed add leaves a usable cache; two repositories sharing one
cache add and pull at once safely; gc sweeps packed members and packs left without index.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from casstore.model.lock import parse_lock
from casstore.project import Project
from casstore.store.cache import CACHE_PACK_THRESHOLD, Cache
from tests.helpers.cassettes import damage_cached, make_cassette, write_cassette
from tests.helpers.commands import git, init_repo, run_casstore_subprocess

N = CACHE_PACK_THRESHOLD + 6  # enough for `add` and `pull` to pack


def _cache() -> Path:
    return Path(os.environ["CASSTORE_CACHE_DIR"])


def _loose_objects(cache: Path) -> list[Path]:
    return [p for p in (cache / "objects").rglob("*") if p.is_file()] if (cache / "objects").exists() else []


def _packs(cache: Path) -> list[Path]:
    return sorted((cache / "packs").glob("*.pack")) if (cache / "packs").exists() else []


def _members(cache: Path) -> set[str]:
    return {m[0] for idx in (cache / "packs").glob("*.idx") for m in json.loads(idx.read_text())["members"]}


def _pins(repo: Path) -> dict:  # type: ignore[type-arg]
    return dict(parse_lock((repo / "casstore.lock").read_bytes()).pins)


def _many(repo: Path, n: int = N, prefix: str = "many/c") -> list[str]:
    names = [f"{prefix}{i:03d}" for i in range(n)]
    for name in names:
        write_cassette(repo, name)
    return names


def test_add_of_many_writes_packs_and_every_reader_sees_them(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    names = _many(repo)
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    cache = _cache()
    assert _loose_objects(cache) == [] and _packs(cache), "one pack per process, no file per object"
    assert all(p.with_suffix(".idx").is_file() for p in _packs(cache))
    assert "verified %d/%d" % (N, N) in casstore("verify", cwd=repo).stdout
    status = casstore("status", "--json", cwd=repo)
    assert status.exit_code == 0 and all(c["cached"] for c in status.json["pins"]), status.stdout
    assert casstore("push", cwd=repo).exit_code == 0  # reads every frame from the packs
    assert casstore("verify", "--remote", cwd=repo).exit_code == 0
    pulled = casstore("pull", "--json", cwd=repo)
    assert pulled.exit_code == 0 and pulled.json["done"] == [] and len(pulled.json["skipped"]) == N
    assert casstore("show", names[5], cwd=repo).exit_code == 0
    assert Project.discover(repo).load_pinned(_pins(repo)[names[7]]).name == names[7]
    packs = _packs(cache)
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    assert _packs(cache) == packs and _loose_objects(cache) == [], "a second add finds them all cached"
    # a fresh cache: pull writes one pack too, and everything reads back
    os.environ["CASSTORE_CACHE_DIR"] = str(cache.parent / "cache2")
    pulled = casstore("pull", "--json", cwd=repo)
    assert pulled.exit_code == 0 and len(pulled.json["done"]) == N
    assert _loose_objects(_cache()) == [] and len(_packs(_cache())) == 1
    assert "verified %d/%d" % (N, N) in casstore("verify", cwd=repo).stdout


def test_few_objects_stay_loose(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    _many(repo, 3)
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    assert len(_loose_objects(_cache())) == 3 and _packs(_cache()) == []


def test_a_corrupt_pack_member_is_dropped_and_fetched_again(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    names = _many(repo)
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    assert casstore("push", cwd=repo).exit_code == 0
    pins, cache = _pins(repo), _cache()

    # verify: dropped from its pack (rewritten without it), fetched again, verified
    bad = pins[names[3]]
    assert damage_cached(cache, bad.digest) == "packed"
    r = casstore("verify", "--json", cwd=repo)
    assert r.exit_code == 0 and r.json["refetched"] == [names[3]], r.stdout
    key = f"objects/sha256/{bad.digest[7:9]}/{bad.digest[9:]}"
    assert key not in _members(cache) and Cache(cache).verified(bad.digest, bad.size) == "ok"
    assert len(_members(cache)) == N - 1  # the others stay packed

    # pull: the same
    bad = pins[names[10]]
    assert damage_cached(cache, bad.digest) == "packed"
    r = casstore("pull", "--json", cwd=repo)
    assert r.exit_code == 0 and r.json["refetched"] == [names[10]] and r.json["done"] == [names[10]], r.stdout

    # a read for replay: the bad copy is never used; the store's copy is
    bad = pins[names[20]]
    assert damage_cached(cache, bad.digest) == "packed"
    assert Project.discover(repo).load_pinned(bad).name == names[20]

    # nothing to fetch it from: verify fails loudly, the bad bytes are gone from the cache
    bad = pins[names[30]]
    assert damage_cached(cache, bad.digest) == "packed"
    store_obj = repo / ".casstore" / "store" / "objects" / "sha256" / bad.digest[7:9] / bad.digest[9:]
    store_obj.chmod(0o644)
    store_obj.unlink()
    r = casstore("verify", cwd=repo)
    assert r.exit_code == 1 and names[30] in r.stderr and "corrupt (dropped)" in r.stderr, r.stderr
    assert not Cache(cache).has(bad.digest)
    assert "verified %d/%d" % (N - 1, N) in casstore("verify", cwd=repo).stdout


def test_a_hostile_index_is_never_trusted(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    names = _many(repo)
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    assert casstore("push", cwd=repo).exit_code == 0
    cache = _cache()
    idx = sorted((cache / "packs").glob("*.idx"))[0]
    doc = json.loads(idx.read_text())
    a, b = doc["members"][0], doc["members"][1]  # two objects' ranges swapped: valid ranges, wrong bytes
    a[1:], b[1:] = b[1:], a[1:]
    idx.chmod(0o644)
    idx.write_text(json.dumps(doc))
    r = run_casstore_subprocess("verify", "--json", cwd=repo)  # a new process reads the index as it is now
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    assert len(rep["refetched"]) == 2 and len(rep["ok"]) == len(names)
    assert "verified %d/%d" % (N, N) in casstore("verify", cwd=repo).stdout


def _spawn_add(root: Path) -> subprocess.Popen:  # type: ignore[type-arg]
    return subprocess.Popen([sys.executable, "-m", "casstore.cli", "add", "tests/cassettes"], cwd=root,
                            env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_kill_during_a_packed_add_leaves_a_usable_cache(tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    killed = []
    for seed in range(3):
        rng = random.Random(seed)
        root = tmp_path / f"add{seed}"
        root.mkdir()
        git("init", "-q", cwd=root)
        assert casstore("init", cwd=root).exit_code == 0
        cdir = root / "tests" / "cassettes"
        cdir.mkdir(parents=True, exist_ok=True)
        for i in range(2 * N):  # new objects for each seed (the cache is shared)
            doc = make_cassette(f"k{i:03d}", n=8, body={"answer": f"seed {seed} #{i}" * 40})
            (cdir / f"k{i:03d}.json").write_text(json.dumps(doc))
        proc = _spawn_add(root)
        deadline = time.monotonic() + 30  # until the first pack (or its temp file) shows, then a random moment
        while proc.poll() is None and time.monotonic() < deadline and not list((_cache() / "packs").glob(".*.tmp")) \
                and not _packs(_cache()):
            time.sleep(0.0005)
        time.sleep(rng.random() * 0.02)
        killed.append(proc.poll() is None)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        pinned = set(_pins(root)) if (root / "casstore.lock").exists() else set()
        assert pinned in (set(), {f"k{i:03d}" for i in range(2 * N)}), "add is all or nothing"
        if pinned:
            assert casstore("verify", cwd=root).exit_code == 0
        r = casstore("add", "tests/cassettes", cwd=root)
        assert r.exit_code == 0, r.stderr
        r = casstore("verify", cwd=root)
        assert r.exit_code == 0 and f"verified {2 * N}/{2 * N}" in r.stdout, r.stderr
    assert any(killed), "no kill landed while add ran"


def test_two_repositories_add_and_pull_into_one_cache_at_once(tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    roots = []
    for side in ("a", "b"):
        root = init_repo(tmp_path / side, casstore)
        _many(root, N, prefix="shared/c")  # the same cassettes in both: the same objects
        _many(root, N, prefix=f"own-{side}/c")
        roots.append(root)
    procs = [_spawn_add(root) for root in roots]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    for root in roots:
        r = casstore("verify", cwd=root)
        assert r.exit_code == 0 and f"verified {2 * N}/{2 * N}" in r.stdout, r.stderr
        assert casstore("push", cwd=root).exit_code == 0
    os.environ["CASSTORE_CACHE_DIR"] = str(_cache().parent / "fresh-cache")
    procs = [subprocess.Popen([sys.executable, "-m", "casstore.cli", "pull"], cwd=root, env=os.environ.copy(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for root in roots]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    assert _loose_objects(_cache()) == [] and len(_packs(_cache())) == 2
    for root in roots:
        r = run_casstore_subprocess("verify", cwd=root)
        assert r.returncode == 0 and f"verified {2 * N}/{2 * N}" in r.stdout, r.stderr


def test_gc_sweeps_packed_members_and_packs_without_index(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    names = _many(repo)
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    assert casstore("push", cwd=repo).exit_code == 0
    cache = _cache()
    gone = names[:5]  # unpinned: only the cache and the store still hold them
    lock = parse_lock((repo / "casstore.lock").read_bytes())
    digests = {n: lock.pins[n].digest for n in gone}
    project = Project.discover(repo)
    with project.locked():
        project.save_lock(replace(lock, pins={k: v for k, v in lock.pins.items() if k not in gone}))
    stray = cache / "packs" / ("0" * 64 + ".pack")  # an add killed between its pack and its index
    stray.write_bytes(b"CASSTORE-PACK/1\n")
    old = time.time() - 10 * 86400
    for p in (cache / "packs").iterdir():
        os.utime(p, (old, old))
    r = casstore("gc", "--grace", "1d", "--json", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert sorted(i["digest"] for i in r.json["deleted"] if i["where"] == "cache") == sorted(digests.values())
    assert not stray.exists()
    c = Cache(cache)
    assert not any(c.has(d) for d in digests.values())
    assert "verified %d/%d" % (N - 5, N - 5) in casstore("verify", cwd=repo).stdout



def test_a_bad_packed_copy_never_takes_a_good_loose_copy_with_it(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    # a cache shared by two repositories may hold one object twice (a small add writes it
    # loose, a large one packs it); nothing was pushed: the cache holds the only copies
    names = _many(repo)
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    cache = _cache()
    pin = _pins(repo)[names[5]]
    frame = Cache(cache).read_frame(pin.digest)
    assert damage_cached(cache, pin.digest) == "packed"
    loose = cache / "objects" / "sha256" / pin.digest[7:9] / pin.digest[9:]
    loose.parent.mkdir(parents=True, exist_ok=True)
    loose.write_bytes(frame)  # the good copy, loose
    r = casstore("verify", "--json", cwd=repo)
    assert r.exit_code == 0 and r.json["problems"] == [], r.stdout + r.stderr
    key = f"objects/sha256/{pin.digest[7:9]}/{pin.digest[9:]}"
    assert key not in _members(cache) and loose.read_bytes() == frame  # only the bad copy went
    assert Project.discover(repo).load_pinned(pin).name == names[5]


def test_lacking_answers_as_has_and_without_a_stat_per_digest_when_nothing_is_loose(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import hashlib

    from casstore.model.blob import compress
    from casstore.store.backends import object_key

    datas = [f"cassette {i}".encode() for i in range(6)]
    digests = ["sha256:" + hashlib.sha256(d).hexdigest() for d in datas]
    items = [(object_key(dg), compress(d)) for dg, d in zip(digests, datas, strict=True)]
    cache = Cache(tmp_path / "cache")
    assert cache.lacking(digests) == set(digests)  # a new cache: no folder at all
    cache.store.write_packed(items[:3])  # packed only: still no loose objects folder
    cache.refresh()
    cache.load()
    stats: list[str] = []
    real_isfile = os.path.isfile
    monkeypatch.setattr(os.path, "isfile", lambda p: stats.append(p) or real_isfile(p))
    assert cache.lacking(digests) == set(digests[3:]) == {d for d in digests if not cache.has(d)}
    stats.clear()
    assert cache.lacking(digests) == set(digests[3:]) and stats == []  # no stat per digest
    cache.loose.write_once(*items[4])  # one loose object: every digest is looked for again
    assert cache.lacking(digests) == {digests[3], digests[5]} == {d for d in digests if not cache.has(d)}
    assert len(stats) >= len(digests)
