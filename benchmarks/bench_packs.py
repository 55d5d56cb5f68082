"""Many packs in the local cache: what each reader pays, and what merging them buys.

A team that adds and pulls every day leaves one small pack per add process and per pull in
the user's cache. This builds a cache of MEMBERS objects (the PINS pinned cassettes of a
project plus other repositories' objects) split round-robin over 1, 10, 100 and 500 packs
(at 500 that is ~64 members a pack: what 500 adds of 64 cassettes leave), and times, each
a fresh process (median of ``--runs``; wall and user+system CPU of the process):

  status   a cold `casstore status`
  verify   `casstore verify` (every pin read and checked from the cache)
  use      entering ``casstore.use(name, mode="replay")`` for one cassette (after import)

then `casstore gc` (which merges the cache's packs) on the 500-pack cache, its time, the
packs left, and the three readers again on what it left. ``--catalog`` instead times, in
one process (the least CPU of 10), what a reader pays per pack: loading the catalog and
reading the 1,000 pinned members, and the pack files it keeps open, for each --code tree
given (side by side, the same cache). ``--write`` times what a write pays when it leaves one
pack too many (a fresh process writing one pack of 64 new objects, as add and pull do,
which then merges): into 16 equal packs (all 17 rewritten: the worst case) and into one
large pack plus 16 small ones (the small ones rewritten: the usual case), each against the
same write with nothing to merge.

Run: ``python benchmarks/bench_packs.py --runs 3`` (``--packs 1,10,100,500 --members 32000``);
``--code <checkout>/`` times another tree with the same cache (before/after a change).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PY = sys.executable


def _env(base: Path, code: Path = REPO) -> dict[str, str]:
    # bytecode in a folder of its own: the tree timed (maybe another worktree) is not written to
    env = dict(os.environ, CASSTORE_CACHE_DIR=str(base / "cache"), CASSTORE_CONFIG_DIR=str(base / "config"),
               HOME=str(base), PYTHONPATH=str(code), GIT_CONFIG_NOSYSTEM="1",
               PYTHONPYCACHEPREFIX=str(base / "pycache" / code.name))
    for k in ("CI", "CASSTORE_REMOTE", "CASSTORE_MODE", "PYTHONDONTWRITEBYTECODE"):
        env.pop(k, None)
    return env


def _timed(args: list[str], cwd: Path, env: dict[str, str], ok: tuple[int, ...] = (0,)) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in ok:
        raise RuntimeError(f"{' '.join(args[1:4])} failed ({r.returncode}): {r.stdout[-800:]} {r.stderr[-800:]}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, r.stdout


def build(base: Path, pins: int, members: int) -> tuple[list[tuple[str, bytes]], Path]:
    """A project pinning ``pins`` cassettes (no working copies: readers go to the cache) and
    the (key, frame) of ``members`` cache objects, the pinned ones among them."""
    from benchmarks.bench_replay import make_cassette, make_interactions
    from casstore.model.blob import compress, digest_and_size
    from casstore.model.lock import Lock, Pin, format_lock
    from casstore.store.backends import object_key

    proj = base / "proj"
    proj.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=proj, check=True)
    (proj / "casstore.toml").write_text('cassette_dir = "tests/cassettes"\n[remote]\nurl = ".casstore/store"\n'
                                        "[trust]\nrequire_signatures = false\n")
    items: list[tuple[str, bytes]] = []
    lock_pins = []
    inter = make_interactions(2)
    for i in range(pins):
        data = make_cassette(f"c{i:05d}", inter).canonical_bytes()
        digest, size = digest_and_size(data)
        lock_pins.append(Pin(name=f"c{i:05d}", digest=digest, size=size))
        items.append((object_key(digest), compress(data, level=3)))
    rng = random.Random(5)
    for i in range(members - pins):  # other repositories' objects: small valid frames
        data = json.dumps({"other": i, "pad": rng.randbytes(300).hex()}).encode()
        items.append((object_key(digest_and_size(data)[0]), compress(data, level=3)))
    (proj / "casstore.lock").write_text(format_lock(Lock().with_pins(lock_pins)))
    return items, proj


def write_packs(cache: Path, items: list[tuple[str, bytes]], packs: int) -> None:
    from casstore.store.packs import build_pack

    if cache.exists():
        for p in cache.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        shutil.rmtree(cache)
    (cache / "packs").mkdir(parents=True)
    shuffled = list(items)
    random.Random(9).shuffle(shuffled)
    old = time.time() - 30 * 86400  # a month of daily adds
    for i in range(packs):
        pid, pack, index = build_pack(shuffled[i::packs])
        (cache / "packs" / f"{pid}.pack").write_bytes(pack)
        (cache / "packs" / f"{pid}.idx").write_bytes(index)
        os.utime(cache / "packs" / f"{pid}.pack", (old + i * 3600, old + i * 3600))


def readers(proj: Path, env: dict[str, str], runs: int) -> dict[str, float]:
    _timed([PY, "-m", "casstore.cli", "status"], proj, env, ok=(0, 1))  # bytecode written, files in the page cache
    use = ("import time, resource, casstore; casstore.use; t = time.perf_counter(); "
           "r = resource.getrusage(resource.RUSAGE_SELF); c0 = r.ru_utime + r.ru_stime; "
           "ctx = casstore.use('c00007', mode='replay'); ctx.__enter__(); "
           "r = resource.getrusage(resource.RUSAGE_SELF); "
           "print(time.perf_counter() - t, r.ru_utime + r.ru_stime - c0)")
    res: dict[str, list[float]] = {}
    for _ in range(runs):
        for label, args in (("status", [PY, "-m", "casstore.cli", "status"]),
                            ("verify", [PY, "-m", "casstore.cli", "verify"])):
            wall, cpu, _ = _timed(args, proj, env, ok=(0, 1))
            res.setdefault(f"{label}_s", []).append(wall)
            res.setdefault(f"{label}_cpu", []).append(cpu)
        _, _, out = _timed([PY, "-c", use], proj, env)
        wall_s, cpu_s = out.split()[-2:]
        res.setdefault("use_s", []).append(float(wall_s))
        res.setdefault("use_cpu", []).append(float(cpu_s))
    return {k: statistics.median(v) for k, v in res.items()}


_CATALOG = """
import json, os, sys, time
from pathlib import Path
from casstore.store.cache import Cache
keys = json.loads(Path(sys.argv[2]).read_text())
loads, reads = [], []
for _ in range(10):
    c = Cache(Path(sys.argv[1]))
    c.refresh()
    t = time.process_time(); c.store.catalog(); loads.append(time.process_time() - t)
    t = time.process_time()
    for k in keys:
        c.store.read(k)
    reads.append(time.process_time() - t)
    fds = c.store._fds
    n = len(fds)
    for v in fds.values():
        os.close(v)
    fds.clear()
print(min(loads), min(reads), n)
"""


_WRITE = """
import sys, time
from pathlib import Path
from casstore.model.blob import compress, digest_and_size
from casstore.store.backends import object_key
from casstore.store.cache import Cache
items = []
for i in range(64):
    data = (f"new object {i} " * 40).encode()
    items.append((object_key(digest_and_size(data)[0]), compress(data)))
cache = Cache(Path(sys.argv[1]))
t = time.process_time()
cache.store.write_packed(items)
print(time.process_time() - t, len(list(Path(sys.argv[1], "packs").glob("*.idx"))))
"""


def write_cost(base: Path, items: list[tuple[str, bytes]], code: Path) -> list[dict[str, Any]]:
    from casstore.store.packs import build_pack

    rows = []
    for label, shape in (("16 equal packs", [len(items) // 16] * 16), ("1 large + 16 small packs", None),
                         ("15 equal packs (no merge)", [len(items) // 15] * 15)):
        if shape is None:
            small = len(items) // 256
            shape = [len(items) - 16 * small] + [small] * 16
        write_packs(base / "cache", [], 0)
        at = 0
        for n in shape:
            pid, pack, index = build_pack(items[at : at + n])
            at += n
            (base / "cache" / "packs" / f"{pid}.pack").write_bytes(pack)
            (base / "cache" / "packs" / f"{pid}.idx").write_bytes(index)
        wall, _, out = _timed([PY, "-c", _WRITE, str(base / "cache")], base, _env(base, code.resolve()))
        cpu, left = out.split()
        rows.append({"cache": label, "write_s": wall, "write_cpu": float(cpu), "packs_after": int(left)})
        print(f"one pack written into {label}: {wall:.2f} s wall, {float(cpu):.2f} s CPU, {left} packs after",
              flush=True)
    return rows


def catalog_cost(base: Path, items: list[tuple[str, bytes]], pins: int, counts: list[int],
                 codes: list[Path]) -> list[dict[str, Any]]:
    keys = base / "keys.json"
    keys.write_text(json.dumps([k for k, _ in items[:pins]]))
    rows = []
    for n in counts:
        write_packs(base / "cache", items, n)
        for code in codes:
            env = _env(base, code.resolve())
            _, _, out = _timed([PY, "-c", _CATALOG, str(base / "cache"), str(keys)], base, env)
            load, read, fds = out.split()
            rows.append({"packs": n, "code": str(code), "catalog_s": float(load), "reads_s": float(read),
                         "open_files": int(fds)})
            print(f"{n:>5} packs  {code}: catalog {float(load) * 1000:.1f} ms CPU, {pins} member reads "
                  f"{float(read) * 1000:.1f} ms CPU, {fds} pack files open", flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packs", default="1,10,100,500")
    ap.add_argument("--pins", type=int, default=1000)
    ap.add_argument("--members", type=int, default=32_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--code", type=Path, action="append", help="the casstore tree(s) to time (default: this one)")
    ap.add_argument("--catalog", action="store_true", help="the per-pack cost in one process, per --code tree")
    ap.add_argument("--write", action="store_true", help="what a write that merges pays")
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args()
    counts = [int(x) for x in ns.packs.split(",")]
    base = Path(tempfile.mkdtemp(prefix="casstore-bench-packs-"))
    out: dict[str, Any] = {"code": [str(c) for c in ns.code or [REPO]], "pins": ns.pins, "members": ns.members, "load": os.getloadavg(), "rows": []}
    try:
        codes = ns.code or [REPO]
        items, proj = build(base, ns.pins, ns.members)
        if ns.catalog:
            out["catalog"] = catalog_cost(base, items, ns.pins, counts, codes)
        elif ns.write:
            out["write"] = write_cost(base, items, codes[0])
        else:
            readers_and_merge(base, items, proj, counts, codes[0], ns.runs, out, quiet=ns.json)
    finally:
        for p in base.rglob("*"):
            if not p.is_symlink():
                p.chmod(0o755 if p.is_dir() else 0o644)
        shutil.rmtree(base, ignore_errors=True)
    out["load_end"] = os.getloadavg()
    if ns.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"load average {out['load'][0]:.1f} at start, {out['load_end'][0]:.1f} at end")
    return 0


def readers_and_merge(base: Path, items: list[tuple[str, bytes]], proj: Path, counts: list[int], code: Path,
                      runs: int, out: dict[str, Any], *, quiet: bool) -> None:
    env = _env(base, code.resolve())
    for n in counts:
        write_packs(base / "cache", items, n)
        row = {"packs": n, **readers(proj, env, runs)}
        out["rows"].append(row)
        if not quiet:
            print(_line(row), flush=True)
    n = max(counts)
    write_packs(base / "cache", items, n)
    wall, cpu, _ = _timed([PY, "-m", "casstore.cli", "gc", "--grace", "1d"], proj, env)
    left = len(list((base / "cache" / "packs").glob("*.pack")))
    merged = {"packs": left, "from": n, "gc_s": wall, "gc_cpu": cpu, **readers(proj, env, runs)}
    out["merged"] = merged
    if not quiet:
        print(f"gc merged {n} packs into {left}: {wall:.2f} s wall, {cpu:.2f} s CPU")
        print(_line(merged))


def _line(row: dict[str, Any]) -> str:
    return (f"{row['packs']:>4} packs: status {row['status_s']:.3f} s ({row['status_cpu']:.3f} CPU)  "
            f"verify {row['verify_s']:.3f} s ({row['verify_cpu']:.3f} CPU)  "
            f"use {row['use_s'] * 1000:.1f} ms ({row['use_cpu'] * 1000:.1f} ms CPU)")


if __name__ == "__main__":
    sys.exit(main())
