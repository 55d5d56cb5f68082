"""Merging the local cache's packs (casstore/store/cache_packs.py): a write that leaves many
packs merges the small ones, `gc` merges them, and nothing is ever lost or hidden: a kill -9
at every step of a merge leaves a readable cache holding every object, a reader that read
the old catalog before a merge still reads everything after it, a corrupt member is not
copied, two repositories sharing the cache add at once while their writes merge.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore.model.blob import compress, digest_and_size
from casstore.model.lock import parse_lock
from casstore.store.backends import object_key
from casstore.store.cache import CACHE_PACK_THRESHOLD, Cache
from casstore.store.cache_packs import MERGE_AT, MERGE_FACTOR, plan_merge
from casstore.store.packs import build_pack
from tests.helpers.cassettes import damage_cached, write_cassette
from tests.helpers.commands import git, init_repo, run_casstore_subprocess

N = CACHE_PACK_THRESHOLD + 6  # enough for `add` to pack
REPO = Path(__file__).resolve().parents[2]


def _cache() -> Path:
    return Path(os.environ["CASSTORE_CACHE_DIR"])


def _indexed(cache: Path) -> list[str]:
    return sorted(p.stem for p in (cache / "packs").glob("*.idx"))


def _members(cache: Path) -> list[str]:
    return [m[0] for idx in (cache / "packs").glob("*.idx") for m in json.loads(idx.read_text())["members"]]


def _pins(repo: Path) -> dict:  # type: ignore[type-arg]
    return dict(parse_lock((repo / "casstore.lock").read_bytes()).pins)


def _add_many(repo: Path, casstore, n: int = N, prefix: str = "many/c") -> None:  # type: ignore[no-untyped-def]
    for i in range(n):
        write_cassette(repo, f"{prefix}{i:03d}")
    r = casstore("add", "tests/cassettes", cwd=repo)
    assert r.exit_code == 0, r.stderr


def _split_packs(cache: Path, packs: int) -> None:
    """Rewrite the cache's packed members as ``packs`` packs (what many small adds and pulls
    leave; an older casstore never merged them)."""
    c = Cache(cache)
    items = [(key, c.store.read(key)) for key in sorted(c.store.catalog().members)]
    for p in (cache / "packs").iterdir():
        if not p.name.startswith("."):
            p.unlink()
    for i in range(packs):
        pid, pack, index = build_pack(items[i::packs])
        (cache / "packs" / f"{pid}.pack").write_bytes(pack)
        (cache / "packs" / f"{pid}.idx").write_bytes(index)


def _all_cached(repo: Path) -> None:
    """Every pin reads back verified from the cache alone (nothing was pushed: the cache
    holds the only copies)."""
    cache = Cache(_cache())
    cache.refresh()
    bad = [n for n, p in _pins(repo).items() if cache.verified(p.digest, p.size) != "ok"]
    assert bad == []


def test_plan_merge_leaves_a_geometric_progression() -> None:
    assert plan_merge({"a": 10, "b": 10}, at=MERGE_AT) == []  # few packs: nothing to do
    sizes = {f"p{i:02d}": 100 for i in range(MERGE_AT + 1)}
    assert sorted(plan_merge(sizes)) == sorted(sizes)  # equal small packs: all merged
    big = {"big": 10_000, **{f"p{i:02d}": 100 for i in range(MERGE_AT)}}
    assert "big" not in plan_merge(big)  # a large pack is not rewritten for small ones


@given(st.lists(st.integers(1, 10**9), min_size=2, max_size=60))
@settings(max_examples=200, deadline=None)
def test_plan_merge_property(sizes_list: list[int]) -> None:
    sizes = {f"p{i:03d}": s for i, s in enumerate(sizes_list)}
    plan = plan_merge(sizes, at=1)
    after = [s for p, s in sizes.items() if p not in plan] + ([sum(sizes[p] for p in plan)] if plan else [])
    after.sort()
    assert all(b >= MERGE_FACTOR * a for a, b in zip(after, after[1:], strict=False)), (sizes_list, plan)
    assert plan == [] or len(plan) >= 2


def test_a_write_that_leaves_many_packs_merges_them_and_gc_merges_too(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    _add_many(repo, casstore)
    cache = _cache()
    _split_packs(cache, MERGE_AT + 4)  # a cache that gathered many small packs
    assert len(_indexed(cache)) == MERGE_AT + 4
    r = casstore("verify", cwd=repo)
    assert r.exit_code == 0 and f"verified {N}/{N}" in r.stdout, r.stderr
    _add_many(repo, casstore, prefix="more/c")  # this add's pack makes one too many: merged
    left = _indexed(cache)
    assert len(left) <= 3, left
    assert sorted(_members(cache)) == sorted(set(_members(cache))), "one copy of each member"
    assert not [p for p in (cache / "packs").iterdir() if p.suffix == ".pack" and p.stem not in left]
    r = run_casstore_subprocess("verify", cwd=repo)
    assert r.returncode == 0 and f"verified {2 * N}/{2 * N}" in r.stdout, r.stderr
    _all_cached(repo)

    _split_packs(cache, 5)  # gc merges whatever is not geometric, however few
    r = casstore("gc", "--dry-run", "--json", cwd=repo)
    assert r.exit_code == 0 and r.json["packs_merged"] == 5 and len(_indexed(cache)) == 5
    r = casstore("gc", cwd=repo)
    assert r.exit_code == 0 and "merged 5 cache pack(s) into one" in r.stdout, r.stdout + r.stderr
    assert len(_indexed(cache)) == 1
    _all_cached(repo)


def test_a_corrupt_member_is_not_copied_and_is_fetched_again(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    _add_many(repo, casstore)
    assert casstore("push", cwd=repo).exit_code == 0
    cache = _cache()
    _split_packs(cache, 4)
    pins = _pins(repo)
    bad = pins["many/c007"]
    assert damage_cached(cache, bad.digest) == "packed"
    r = casstore("gc", "--json", cwd=repo)
    assert r.exit_code == 0 and r.json["packs_merged"] == 4, r.stdout
    key = f"objects/sha256/{bad.digest[7:9]}/{bad.digest[9:]}"
    assert any(key in note for note in r.json["notes"]), r.json["notes"]
    assert key not in _members(cache) and len(_members(cache)) == N - 1
    assert not Cache(cache).has(bad.digest)
    r = casstore("pull", "--json", cwd=repo)
    assert r.exit_code == 0 and r.json["done"] == ["many/c007"], r.stdout
    r = run_casstore_subprocess("verify", cwd=repo)
    assert r.returncode == 0 and f"verified {N}/{N}" in r.stdout, r.stderr


_KILLER = textwrap.dedent("""
    import os, pathlib, signal, sys
    target, calls = int(sys.argv[2]), [0]
    accessor = getattr(pathlib, "_NormalAccessor", None)  # Python 3.10: Path's methods call os through it
    def wrap(name):
        real = getattr(os, name)
        def step(*args, **kwargs):
            calls[0] += 1
            if calls[0] == target:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)
        setattr(os, name, step)
        if accessor is not None and hasattr(accessor, name):
            setattr(accessor, name, staticmethod(step))
    for name in ("replace", "rename", "link", "unlink", "fsync", "utime"):
        wrap(name)
    from casstore.store.cache import Cache
    rep = Cache(sys.argv[1]).store.merge(at=1)
    print(calls[0], len(rep.sources) if rep else 0)
""")


def _merge_killed_at(cache: Path, step: int) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", _KILLER, str(cache), str(step)], env=env,
                          capture_output=True, text=True, timeout=120)


def test_kill_at_every_step_of_a_merge_loses_nothing(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    _add_many(repo, casstore)  # not pushed: the cache holds the only copies
    cache = _cache()
    _split_packs(cache, 4)
    snap = cache.parent / "snapshot"
    shutil.copytree(cache, snap)
    done = _merge_killed_at(cache, 0)  # no kill: how many steps a whole merge takes
    assert done.returncode == 0, done.stderr
    steps, merged = (int(x) for x in done.stdout.split())
    assert merged == 4 and steps >= 12, done.stdout  # 2 renames + 3 fsyncs + mark + utime + 8 unlinks, at least
    _all_cached(repo)
    for step in range(1, steps + 1):
        shutil.rmtree(cache)
        shutil.copytree(snap, cache)
        r = _merge_killed_at(cache, step)
        assert r.returncode == -9, (step, r.returncode, r.stderr)
        _all_cached(repo)  # every object reads back, verified, from whatever the kill left
        names = {p.name for p in (cache / "packs").iterdir()}
        for n in names:  # packs, their indexes (never one without its pack), temp files (gc's to sweep)
            assert n in (".guard", ".merged") or n.endswith((".tmp", ".pack")) or \
                (n.endswith(".idx") and n[:-4] + ".pack" in names), (step, n)
        again = Cache(cache)  # the next merge (here, in this process) finishes the work
        again.refresh()
        again.store.merge(at=1)
        assert len(_indexed(cache)) == 1, (step, _indexed(cache))
        assert sorted(_members(cache)) == sorted(set(_members(cache))), f"step {step}: a member twice"
        _all_cached(repo)
    r = run_casstore_subprocess("verify", cwd=repo)
    assert r.returncode == 0 and f"verified {N}/{N}" in r.stdout, r.stderr


_READER = textwrap.dedent("""
    import sys
    from casstore.store.cache import Cache
    cache = Cache(sys.argv[1])
    keys = sorted(cache.store.catalog().members)
    first = int(sys.argv[2])
    for key in keys[:first]:  # these packs are open before the merge
        cache.store.read(key)
    print(len(keys), flush=True)
    sys.stdin.readline()  # the merge runs now
    bad = []
    for key in keys:
        data = cache.store.read(key)
        if key.startswith("objects/"):
            import zstandard, hashlib
            if "sha256:" + hashlib.sha256(zstandard.ZstdDecompressor().decompress(data)).hexdigest() != \\
                    "sha256:" + key.split("/")[2] + key.split("/")[3]:
                bad.append(key)
    print("read", len(keys), "bad", len(bad), flush=True)
""")


@pytest.mark.parametrize("opened_first", [0, 10])
def test_a_reader_holding_the_old_catalog_reads_everything_after_a_merge(
        repo: Path, casstore, opened_first: int) -> None:  # type: ignore[no-untyped-def]
    _add_many(repo, casstore)
    cache = _cache()
    _split_packs(cache, 6)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    reader = subprocess.Popen([sys.executable, "-c", _READER, str(cache), str(opened_first)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert reader.stdout is not None and reader.stdin is not None
    try:
        total = int(reader.stdout.readline())
        old = _indexed(cache)
        r = run_casstore_subprocess("gc", cwd=repo)  # another process merges every pack the reader knows
        assert r.returncode == 0 and "merged 6 cache pack(s)" in r.stdout, r.stdout + r.stderr
        assert not set(old) & set(_indexed(cache)) and not any((cache / "packs" / f"{p}.pack").exists() for p in old)
        reader.stdin.write("go\n")
        reader.stdin.flush()
        out, err = reader.communicate(timeout=120)
    finally:
        if reader.poll() is None:
            reader.kill()
    assert reader.returncode == 0, err
    assert out.split() == ["read", str(total), "bad", "0"], out + err


def test_two_repositories_add_into_one_cache_while_it_merges(tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    roots = [init_repo(tmp_path / side, casstore) for side in ("a", "b")]
    _add_many(roots[0], casstore, prefix="first/c")
    _split_packs(_cache(), MERGE_AT + 2)  # the next write of either repository merges
    for side, root in zip("ab", roots, strict=True):
        for i in range(N):
            write_cassette(root, f"shared/c{i:03d}")  # the same objects in both
            write_cassette(root, f"own-{side}/c{i:03d}")
    procs = [subprocess.Popen([sys.executable, "-m", "casstore.cli", "add", "tests/cassettes"], cwd=root,
                              env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for root in roots]
    for proc in procs:
        assert proc.wait(timeout=180) == 0, proc.stderr.read() if proc.stderr else ""
    assert len(_indexed(_cache())) < MERGE_AT
    for root, n in zip(roots, (3 * N, 2 * N), strict=True):
        r = run_casstore_subprocess("verify", cwd=root)
        assert r.returncode == 0 and f"verified {n}/{n}" in r.stdout, r.stdout + r.stderr
        _all_cached(root)


_WRITER = textwrap.dedent("""
    import sys
    from casstore.model.blob import compress, digest_and_size
    from casstore.store.backends import object_key
    from casstore.store.cache import Cache
    cache = Cache(sys.argv[1])
    fillers = open(sys.argv[2]).read().split()
    for i, digest in enumerate(fillers):
        cache.drop(digest)  # the pack holding it, and every wanted member in it, rewritten: moved
        if i % 10 == 0:  # now and then a small pack, and a merge
            data = ("writer %d " % i).encode() * 20
            cache.store.write_packed([(object_key(digest_and_size(data)[0]), compress(data))])
            cache.store.merge(at=1)
    print("done", flush=True)
""")

_LISTER = textwrap.dedent("""
    import sys, random
    from casstore.store.cache import Cache
    root, want = sys.argv[1], set(sys.stdin.read().split())
    rng, lists = random.Random(1), 0
    while True:
        cache = Cache(root)
        cache.refresh()
        members = cache.store.catalog().members
        lists += 1
        missing = want - set(members)
        if missing:
            print("listing", lists, "missed", sorted(missing)[:3], flush=True)
            sys.exit(1)
        key = rng.choice(sorted(want))
        cache.store.read(key)  # the pack it names may be merged away meanwhile: read anyway
        if lists % 25 == 0 and open(sys.argv[2]).read().strip() == "done":
            break
    print("lists", lists, flush=True)
""")


@pytest.mark.slow
def test_listings_racing_many_merges_never_miss_a_member(repo: Path, casstore, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _add_many(repo, casstore)
    cache = _cache()
    want = "\n".join(sorted(set(_members(cache))))
    fillers = []
    for i in range(150):  # other objects in the same packs, each dropped in turn by the writer
        data = f"filler {i} ".encode() * 20
        fillers.append((object_key(digest_and_size(data)[0]), compress(data)))
    Cache(cache).store.write_packed(fillers)
    _split_packs(cache, 4)
    (tmp_path / "fillers").write_text(" ".join("sha256:" + k[15:17] + k[18:] for k, _ in fillers))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    flag = tmp_path / "writer.out"
    flag.write_text("")
    with flag.open("w") as out:
        writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(cache), str(tmp_path / "fillers")], env=env,
                                  stdout=out, stderr=subprocess.PIPE, text=True)
        lister = subprocess.run([sys.executable, "-c", _LISTER, str(cache), str(flag)], env=env, input=want,
                                capture_output=True, text=True, timeout=600)
        assert writer.wait(timeout=600) == 0, writer.stderr.read() if writer.stderr else ""
    assert lister.returncode == 0, lister.stdout + lister.stderr
    assert not set(_members(cache)) & {k for k, _ in fillers}
    _all_cached(repo)


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_NOFILE is POSIX")
def test_many_packs_stay_readable_under_a_low_open_files_limit(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    import resource

    _add_many(repo, casstore, 2 * N)
    cache = _cache()
    members = len(_members(cache))
    _split_packs(cache, members)  # one pack a member: more packs than the process may open files
    limit = 96
    assert members > limit

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    cmd = [sys.executable, "-m", "casstore.cli", "verify"]
    r = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, preexec_fn=low_limit, timeout=300)
    assert r.returncode == 0 and f"verified {2 * N}/{2 * N}" in r.stdout, r.stdout + r.stderr


def test_a_bad_packed_copy_never_takes_a_good_packed_copy_with_it(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    # two repositories adding the same cassettes at once pack the same objects twice; one
    # copy rots; nothing was pushed: the cache holds the only copies
    _add_many(repo, casstore)
    cache = _cache()
    c = Cache(cache)
    items = [(key, c.store.read(key)) for key in sorted(c.store.catalog().members)]
    pid, pack, index = build_pack(items[:-1])  # the other writer's pack: the same members, but one
    (cache / "packs" / f"{pid}.pack").write_bytes(pack)
    (cache / "packs" / f"{pid}.idx").write_bytes(index)
    pin = _pins(repo)["many/c005"]
    assert damage_cached(cache, pin.digest) == "packed"  # the copy readers take first
    r = run_casstore_subprocess("verify", "--json", cwd=repo)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["problems"] == []
    key = f"objects/sha256/{pin.digest[7:9]}/{pin.digest[9:]}"
    assert _members(cache).count(key) == 1, "the bad copy went, the good one stayed"
    _all_cached(repo)


@pytest.mark.slow
def test_kill_during_an_add_that_merges_loses_nothing(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    import random
    import signal
    import time

    _add_many(repo, casstore)  # not pushed: the cache holds the only copies
    cache = _cache()
    before = _pins(repo)
    killed = []
    for seed in range(3):
        _split_packs(cache, MERGE_AT + 1)  # the add's own pack makes one too many: it merges
        for i in range(N):
            write_cassette(repo, f"round{seed}/c{i:03d}")
        proc = subprocess.Popen([sys.executable, "-m", "casstore.cli", "add", "tests/cassettes"], cwd=repo,
                                env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(200_000):  # until the merge's temp file shows (or the add ends), then a random moment
            if proc.poll() is not None or list((cache / "packs").glob(".merge.*")):
                break
            time.sleep(0.0005)
        time.sleep(random.Random(seed).random() * 0.05)
        killed.append(proc.poll() is None)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        cached = Cache(cache)
        cached.refresh()
        assert [n for n, p in before.items() if cached.verified(p.digest, p.size) != "ok"] == [], seed
        r = casstore("add", "tests/cassettes", cwd=repo)
        assert r.exit_code == 0, r.stderr
        _all_cached(repo)
    assert any(killed), "no kill landed while add ran"
    r = run_casstore_subprocess("verify", cwd=repo)
    assert r.returncode == 0 and f"verified {4 * N}/{4 * N}" in r.stdout, r.stdout + r.stderr


_PAUSED_ADD = textwrap.dedent("""
    import os, signal, sys
    pid_file = sys.argv[1]
    def pausing(real):
        def put(src, dst, *args, **kwargs):  # the add's pack is in place, its index not yet
            out = real(src, dst, *args, **kwargs)
            if str(dst).endswith(".pack") and os.path.basename(os.path.dirname(str(dst))) == "packs":
                with open(pid_file + ".tmp", "w") as fh:
                    fh.write(str(os.getpid()))
                real_replace(pid_file + ".tmp", pid_file)
                os.kill(os.getpid(), signal.SIGSTOP)
            return out
        return put
    real_replace = os.replace
    os.link, os.replace = pausing(os.link), pausing(os.replace)
    sys.argv = ["casstore", "add", "tests/cassettes"]
    from casstore.cli import main
    main()
""")


@pytest.mark.skipif(sys.platform == "win32", reason="SIGSTOP is POSIX")
def test_gc_with_no_grace_leaves_a_pack_still_being_written(repo: Path, casstore, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`gc --grace 0` while an add is between its pack and the pack's index (a real add,
    stopped there): the pack is a running write's, not a killed one's; removing it left the
    add pinning objects no cache held (nothing pushed: the only copies)."""
    _add_many(repo, casstore, prefix="old/c")
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "pins", cwd=repo)
    for i in range(N):
        write_cassette(repo, f"new/c{i:03d}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    pid_file = tmp_path / "paused"
    add = subprocess.Popen([sys.executable, "-c", _PAUSED_ADD, str(pid_file)], cwd=repo, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not pid_file.exists() and add.poll() is None:
            time.sleep(0.05)
        assert add.poll() is None, add.communicate()
        paused = int(pid_file.read_text())
        while Path(f"/proc/{paused}/stat").exists() and \
                Path(f"/proc/{paused}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
            time.sleep(0.05)
        r = run_casstore_subprocess("gc", "--grace", "0", cwd=repo)
        assert r.returncode == 0, r.stdout + r.stderr
        os.kill(paused, signal.SIGCONT)
        out, err = add.communicate(timeout=180)
    finally:
        if add.poll() is None:
            add.kill()
    assert add.returncode == 0, out + err
    r = run_casstore_subprocess("verify", cwd=repo)
    assert r.returncode == 0 and f"verified {2 * N}/{2 * N}" in r.stdout, r.stdout + r.stderr
    _all_cached(repo)


_FULL_DISK = textwrap.dedent("""
    import resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
    limit = int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    from casstore.errors import StoreError
    from casstore.store.cache import Cache
    try:
        Cache(sys.argv[1]).store.merge(at=1)
    except StoreError as exc:
        print("refused:", exc)
""")


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_merge_that_cannot_write_its_pack_leaves_the_old_ones(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    _add_many(repo, casstore)  # not pushed: the cache holds the only copies
    cache = _cache()
    _split_packs(cache, 4)
    def names() -> list[str]:
        return sorted(p.name for p in (cache / "packs").iterdir() if p.name not in (".guard", ".merged"))

    before = names()
    largest = max(p.stat().st_size for p in (cache / "packs").iterdir())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", _FULL_DISK, str(cache), str(largest + 1)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("refused: cannot write a merged pack"), r.stdout + r.stderr
    assert names() == before  # no temp file left, no pack removed
    _all_cached(repo)
    r = run_casstore_subprocess("verify", cwd=repo)
    assert r.returncode == 0 and f"verified {N}/{N}" in r.stdout, r.stderr
