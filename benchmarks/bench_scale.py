"""Scale: the command line at 1k / 10k / 100k pins, every command a fresh process.

For each size a project of N small signed cassettes (a local-folder remote, packs as
configured by default) is built once, then timed as a user runs it:

  add      `casstore add tests/cassettes` (empty cache, no lock) vs the physical work:
           read + parse + canonicalize + sha256 + zstd + Ed25519-sign the same files in
           one process, one thread (goal: <= 1.5x); also vs that work plus the secret scan
           add runs on every file (`redaction.scan`, timed in the same process)
  lock     reading casstore.lock in a fresh process, after the import, as commands read it:
           through its index in the user's cache (goal: <= 50 ms at 10k); also the scan alone
  status   a cold `casstore status` (goal: <= 0.3 s at 1k)
  verify   `casstore verify` over the cache: cassettes/s (goal: >= 5,000/s)
  push     `casstore push` when the store already holds every object (what each push and
           pre-push hook pays to re-check what is there)
  pull     `casstore pull` of everything into an empty cache from the local store (loose:
           a local folder is never packed) vs the floor: reading the store + checking every
           signature and digest in one thread (goal: <= 2x)
  s3pull   the same from a packed S3 store (moto's ThreadedMotoServer on 127.0.0.1, no added
           latency) vs its floor: GET of every pack and index (boto3, one thread) + the checks,
           timed in this process (boto3 loaded); floor 2 adds what a fresh process pays to load
           botocore, make an S3 client and send a first request; floor 3 adds what a fresh
           casstore process pays before its first request (the interpreter, the CLI, ops.sync,
           the store backends). Also `push` of the 1k (packed, into an empty prefix) and again
           with everything present
  check    `casstore check --staged`, 10 staged of N (goal: < 0.3 s at 10k; flat from 1k to 100k)

           with everything present; and where a pull's wall time goes (one more timed pull:
           interpreter, start to fork, to the first request, requests + checks, cache write,
           exit) beside the floor's own parts (GETs, signature checks, inflate + hash)
  check    `casstore check --staged`, 10 staged of N (goal: < 0.3 s at 10k)
  import   `import casstore` in a fresh interpreter, minus the interpreter alone (goal:
           <= 0.1 s); s3fs/boto/fsspec absent after `casstore status` with a local remote
and, once: verify of large cassettes (MB/s) vs the 2-core sha256 + zstd limit (goal:
>= 50 %), and opening a cassette of many entries vs raw decompress + json.loads (time and
peak memory, each a fresh process; goal: <= 1.2x).
Linear: time(largest) / time(smallest) for each command (goal at 1k -> 100k: <= 110).

Run: ``python benchmarks/run.py scale`` or ``python benchmarks/bench_scale.py --sizes 1000,10000``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
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


def _env(base: Path, seed: str) -> dict[str, str]:
    env = dict(os.environ, CASSTORE_CACHE_DIR=str(base / "cache"), CASSTORE_CONFIG_DIR=str(base / "config"),
               HOME=str(base), GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@example.com",
               GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@example.com", CASSTORE_SIGNING_KEY=seed,
               CASSTORE_SIGNER="bench@example.com", PYTHONPATH=str(REPO))
    for k in ("CI", "CASSTORE_REMOTE", "CASSTORE_MODE", "PYTHONDONTWRITEBYTECODE"):
        env.pop(k, None)  # bytecode as an installed package has it (see _compile)
    return env


def _compile() -> None:
    """Write casstore's bytecode first, as `pip install` does: without it every process of the
    benchmark (run with PYTHONDONTWRITEBYTECODE=1, say) compiles ~70 modules at start-up,
    ~0.15-0.3 s that no installed casstore pays."""
    subprocess.run([PY, "-m", "compileall", "-q", str(REPO / "casstore")], check=True,
                   env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})


def _run(args: list[str], root: Path, env: dict[str, str]) -> float:
    t = time.perf_counter()
    r = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args[2:])} failed ({r.returncode}): {r.stdout[-800:]} {r.stderr[-800:]}")
    return took


def _run_cpu(args: list[str], root: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s of the process: user + system). On a machine shared with other work the
    CPU time stays near what the command costs while the wall time grows with the load."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = _run(args, root, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _cli(*args: str) -> list[str]:
    return [PY, "-m", "casstore.cli", *args]


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def _build(root: Path, n: int, env: dict[str, str]) -> int:
    from benchmarks.bench_check import cassette
    from casstore.store import signing

    os.environ["CASSTORE_SIGNING_KEY"] = env["CASSTORE_SIGNING_KEY"]
    key = signing.load_signing_key()
    (root / ".casstore").mkdir(parents=True)
    (root / ".casstore" / "trusted_keys").write_text(key.public_line() + "\n")
    (root / "casstore.toml").write_text('cassette_dir = "tests/cassettes"\n[remote]\nurl = ".casstore/store"\n')
    total = 0
    stamp = "2026-11-20T10:00:00Z"
    for i in range(n):
        name = f"suite{i // 1000:03d}/case{i:06d}"
        p = root / "tests" / "cassettes" / f"{name}.json"
        if i % 1000 == 0:
            p.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(cassette(name, 2, stamp), indent=2)
        p.write_text(text)
        total += len(text)
    return total


def _physical(root: Path, seed: str) -> tuple[float, float]:
    """read + parse + canonicalize + sha256 + zstd (the configured level) + sign, one thread;
    and, separately, the secret scan of the same parsed files (what add adds to that work)."""
    import zstandard
    from nacl.signing import SigningKey

    from casstore.model.redaction import RuleSet, scan

    key = SigningKey(base64.b64decode(seed))
    cctx = zstandard.ZstdCompressor(level=9, write_checksum=True, write_content_size=True)
    enc = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    files = sorted((root / "tests" / "cassettes").rglob("*.json"))
    t = time.perf_counter()
    for f in files:
        data = enc.encode(json.loads(f.read_bytes())).encode()
        digest = hashlib.sha256(data).hexdigest()
        cctx.compress(data)
        key.sign(enc.encode({"digest": "sha256:" + digest, "format": "casstore.cassette/v1", "size": len(data),
                             "type": "casstore.pin/v1"}).encode())
    physical = time.perf_counter() - t
    rules = RuleSet()
    docs = [json.loads(f.read_bytes()) for f in files]
    t = time.perf_counter()
    for doc in docs:
        scan(doc, rules)
    return physical, time.perf_counter() - t


def _cached_frames(root: Path, env: dict[str, str]) -> list[bytes]:
    """The frame of every pin, through the cache's reader (loose files or packs in the cache)."""
    from casstore.model.lock import parse_lock
    from casstore.store.cache import Cache

    cache = Cache(Path(env["CASSTORE_CACHE_DIR"]))
    return [cache.read_frame(pin.digest) for pin in parse_lock((root / "casstore.lock").read_bytes()).pins.values()]


def _pull_floor(root: Path, env: dict[str, str]) -> float:
    """Read every pack (or loose object) of the store, check every pin's signature and digest."""
    import zstandard

    from casstore.model.lock import parse_lock
    from casstore.store import signing

    store = root / ".casstore" / "store"
    t = time.perf_counter()
    lock = parse_lock((root / "casstore.lock").read_bytes())
    trusted = signing.TrustedKeys.load(root / ".casstore" / "trusted_keys")
    blobs = [p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()]
    for pin in lock.pins.values():
        signing.verify_pin(pin, trusted, required=True)
    d = zstandard.ZstdDecompressor()
    done = 0
    for b in blobs:  # the frames inside the packs: decompress + hash each one
        if b[:4] == b"\x28\xb5\x2f\xfd":  # a loose object
            hashlib.sha256(d.decompress(b)).digest()
            done += 1
    if done == 0:  # packs: decompress + hash the same amount of content
        for f in _cached_frames(root, env):
            hashlib.sha256(d.decompress(f)).digest()
    return time.perf_counter() - t


class _S3:
    """moto's S3 server on 127.0.0.1 (in this process), a bucket, and the env that points at it."""

    def __enter__(self) -> _S3:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
        self.fake = {"AWS_ACCESS_KEY_ID": "testing-" + "x" * 8, "AWS_SECRET_ACCESS_KEY": "testing-" + "y" * 16,
                     "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}  # obviously fake
        os.environ.update(self.fake)
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self.bucket = "bench-scale"
        self.client().create_bucket(Bucket=self.bucket)
        return self

    def client(self):  # type: ignore[no-untyped-def]
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return dict(base, **self.fake, AWS_ENDPOINT_URL=self.endpoint, CASSTORE_REMOTE=f"s3://{self.bucket}/store")

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


def _s3_pull_floor(root: Path, s3: _S3, env: dict[str, str], parts: dict[str, list[float]] | None = None) -> float:
    """GET every stored file (packs and their indexes) in one thread, check every pin's
    signature, and decompress + hash the same content (from the cache a pull filled).
    ``parts`` collects the three parts' times (gets, checks, inflate)."""
    import zstandard

    from casstore.model.lock import parse_lock
    from casstore.store import signing

    client = s3.client()
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=s3.bucket, Prefix="store/")
            for o in page.get("Contents", [])]
    frames = _cached_frames(root, env)  # loose files or packs in the cache the pull filled
    t = time.perf_counter()
    lock = parse_lock((root / "casstore.lock").read_bytes())
    trusted = signing.TrustedKeys.load(root / ".casstore" / "trusted_keys")
    for k in keys:
        client.get_object(Bucket=s3.bucket, Key=k)["Body"].read()
    t_gets = time.perf_counter()
    for pin in lock.pins.values():
        signing.verify_pin(pin, trusted, required=True)
    t_checks = time.perf_counter()
    d = zstandard.ZstdDecompressor()
    for f in frames:
        hashlib.sha256(d.decompress(f)).digest()
    end = time.perf_counter()
    if parts is not None:
        for name, took in (("gets", t_gets - t), ("checks", t_checks - t_gets), ("inflate", end - t_checks)):
            parts.setdefault(name, []).append(took)
    return end - t


# A pull as the user runs it, with a clock at each step (audit hooks, os.waitpid wrapped):
# what the process spends before its first request, on the requests and checks, on the
# cache write and on its exit; the interpreter's own start and end are the rest of the wall.
_TIMELINE = r"""
import atexit, json, os, sys, time
t0, me, ev, where = time.perf_counter(), os.getpid(), {}, sys.argv[1]
def hook(name, args):
    if os.getpid() != me:
        return
    now = time.perf_counter() - t0
    if name == "os.fork":
        ev.setdefault("fork", now)
    elif name == "socket.connect":
        ev.setdefault("first_request", now)
    elif name == "os.rename":
        ev["last_rename"] = now
sys.addaudithook(hook)
_waitpid = os.waitpid
def waitpid(*args):
    got = _waitpid(*args)
    if os.getpid() == me:
        ev["checks_joined"] = time.perf_counter() - t0
    return got
os.waitpid = waitpid
def done():
    ev["exit"] = time.perf_counter() - t0
    with open(where, "w") as f:
        json.dump(ev, f)
atexit.register(done)
sys.argv = ["casstore", "pull"]
import runpy
runpy.run_module("casstore.cli", run_name="__main__", alter_sys=True)
"""


def _pull_timeline(root: Path, env: dict[str, str]) -> dict[str, float]:
    """The phases of one fresh `casstore pull` (wall s): interpreter (its start and exit),
    start to fork (imports, config, lock, keys), fork to first request (the store backend's
    imports), requests + checks (to the children's join), cache write, exit."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
        out = Path(tmp.name)
    try:
        wall = _run([PY, "-c", _TIMELINE, str(out)], root, env)
        ev = json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)
    fork = ev.get("fork", 0.0)
    first = ev.get("first_request", fork)
    joined = max(ev.get("checks_joined", first), first)
    written = max(ev.get("last_rename", joined), joined)
    return {"interpreter": wall - ev["exit"], "to_fork": fork, "to_first_request": first - fork,
            "requests_checks": joined - first, "cache_write": written - joined, "exit": ev["exit"] - written}


def _s3_client_start(s3: _S3, env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) a fresh process spends to load the cheapest complete S3 client
    (botocore: credentials chain, endpoint rules, signing) and send its first request (a
    LIST), minus a bare interpreter: what any process that reads S3 pays before the floor."""
    code = ("import botocore.session; c = botocore.session.get_session().create_client('s3'); "
            f"c.list_objects_v2(Bucket={s3.bucket!r}, Prefix='store/packs/')")
    bare = [_run_cpu([PY, "-c", "pass"], REPO, env) for _ in range(3)]
    full = [_run_cpu([PY, "-c", code], REPO, env) for _ in range(3)]
    return (min(w for w, _ in full) - min(w for w, _ in bare), min(c for _, c in full) - min(c for _, c in bare))


def _casstore_start(env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of a fresh process that imports what every pull loads before its first
    request (the CLI, ops.sync, the store backends), the interpreter included: what any
    `casstore pull` pays before it does any of the floor's work."""
    code = "import casstore.cli.main, casstore.ops.sync, casstore.store.backends, casstore.store.s3"
    runs = [_run_cpu([PY, "-c", code], REPO, env) for _ in range(3)]
    return min(w for w, _ in runs), min(c for _, c in runs)


def _s3_decomposition(s: dict[str, Any]) -> str:
    """Where a fresh S3 pull's wall time goes, beside the floor's own parts (medians)."""
    ph, fl = s["s3_pull_phases_s"], s["s3_floor_parts_s"]
    return (f"S3 pull phases (a timed run, wall s): interpreter start + exit {ph['interpreter']:.3f}, start to fork "
            f"(imports, config, lock, keys) {ph['to_fork']:.3f}, fork to first request (the backend's imports) "
            f"{ph['to_first_request']:.3f}, requests + checks (two processes) {ph['requests_checks']:.3f}, cache "
            f"write {ph['cache_write']:.3f}, exit {ph['exit']:.3f}; floor {s['s3_pull_floor_s']:.3f} = GETs "
            f"{fl['gets']:.3f} + signature checks {fl['checks']:.3f} + inflate and hash {fl['inflate']:.3f} (one thread, "
            f"in a process that has everything loaded)")


def _chmod_rm(path: Path) -> None:
    if path.exists():
        for p in path.rglob("*"):
            if p.is_file() and not p.is_symlink():
                p.chmod(0o644)
        shutil.rmtree(path)


def _git(root: Path, env: dict[str, str], *args: str) -> None:
    # no background `git gc --auto` (10k new objects start one): it deleted folders under
    # _chmod_rm's feet at the end of a size
    subprocess.run(["git", "-c", "gc.auto=0", *args], cwd=root, env=env, check=True, capture_output=True)


STEPS = ("add", "lock", "status", "verify", "push", "pull", "s3pull", "check", "import", "large", "open")


def bench_size(n: int, base: Path, *, runs: int, check: bool, steps: tuple[str, ...] = STEPS) -> dict[str, Any]:
    seed = base64.b64encode(hashlib.sha256(b"casstore-bench-scale").digest()).decode()
    env = _env(base, seed)
    root = base / "repo"
    root.mkdir(parents=True)
    t = time.perf_counter()
    text_bytes = _build(root, n, env)
    out: dict[str, Any] = {"pins": n, "working_copy_mb": text_bytes / 1e6, "build_s": time.perf_counter() - t}
    print(f"  scale {n}: built in {out['build_s']:.0f} s", file=sys.stderr, flush=True)
    cache = Path(env["CASSTORE_CACHE_DIR"])

    add_t, phys_t, scan_t, loads = [], [], [], []
    for _ in range(runs if "add" in steps else 1):
        _chmod_rm(cache)
        (root / "casstore.lock").unlink(missing_ok=True)
        if "add" in steps:
            phys, scanned = _physical(root, seed)
            phys_t.append(phys)
            scan_t.append(scanned)
            loads.append(os.getloadavg()[0])
        add_t.append(_run(_cli("add", "tests/cassettes"), root, env))
    if "add" in steps:
        out["add_s"], out["physical_s"], out["scan_s"] = _median(add_t), _median(phys_t), _median(scan_t)
        out["add_ratio"] = _median([a / p for a, p in zip(add_t, phys_t, strict=True)])
        out["add_ratio_with_scan"] = _median([a / (p + sc) for a, p, sc in zip(add_t, phys_t, scan_t, strict=True)])
        out["add_load"] = _median(loads)
        print(f"  scale {n}: add {out['add_s']:.2f} s ({out['add_ratio']:.2f}x physical, "
              f"{out['add_ratio_with_scan']:.2f}x with the scan; load {out['add_load']:.1f})", file=sys.stderr, flush=True)

    # read as every command reads it (Project.load_lock)
    # cache, written by `add`), then every Pin built; and the scan of the same bytes, no index
    lock_code = ("import time; from casstore.project import Project; "
                 "p = Project.discover(); t = time.perf_counter(); "
                 "lock = p.load_lock(); t1 = time.perf_counter(); "
                 "n = len(list(lock.pins.values())); print(t1 - t, n, time.perf_counter() - t)")
    scan_code = ("import time; from casstore.model.lock import parse_lock; t = time.perf_counter(); "
                 "lock = parse_lock(open('casstore.lock', 'rb').read()); print(time.perf_counter() - t, len(lock.pins))")
    # the same, as CPU time of the process (time.process_time)
    lock_cpu_code = lock_code.replace("time.perf_counter()", "time.process_time()")
    lock_t, lock_all_t, lock_cpu_t, scan_t = [], [], [], []
    for _ in range(runs if "lock" in steps else 0):
        r = subprocess.run([PY, "-c", lock_code], cwd=root, env=env, capture_output=True, text=True, check=True)
        took, pins, all_pins = r.stdout.split()
        assert int(pins) == n
        lock_t.append(float(took))
        lock_all_t.append(float(all_pins))
        r = subprocess.run([PY, "-c", lock_cpu_code], cwd=root, env=env, capture_output=True, text=True, check=True)
        lock_cpu_t.append(float(r.stdout.split()[0]))
        r = subprocess.run([PY, "-c", scan_code], cwd=root, env=env, capture_output=True, text=True, check=True)
        scan_t.append(float(r.stdout.split()[0]))
    if lock_t:
        out["lock_read_ms"] = _median(lock_t) * 1000
        out["lock_read_all_pins_ms"] = _median(lock_all_t) * 1000
        out["lock_read_cpu_ms"] = _median(lock_cpu_t) * 1000
        out["lock_scan_ms"] = _median(scan_t) * 1000
        print(f"  scale {n}: lock read {out['lock_read_ms']:.1f} ms ({out['lock_read_cpu_ms']:.1f} ms CPU; "
              f"the scan without the index {out['lock_scan_ms']:.1f} ms; load {os.getloadavg()[0]:.1f})",
              file=sys.stderr, flush=True)
    out["lock_mb"] = (root / "casstore.lock").stat().st_size / 1e6

    if "status" in steps:
        # after `add` (which remembers the digests it computed), then as after a fresh clone:
        # nothing remembered, every working copy read once
        warm = [_run_cpu(_cli("status"), root, env) for _ in range(runs)]
        cold = []
        for _ in range(runs):
            shutil.rmtree(cache / "worktrees", ignore_errors=True)
            cold.append(_run_cpu(_cli("status"), root, env))
        out["status_s"], out["status_cpu_s"] = _median([w for w, _ in warm]), _median([c for _, c in warm])
        out["status_unremembered_s"] = _median([w for w, _ in cold])
        out["status_unremembered_cpu_s"] = _median([c for _, c in cold])
    if "verify" in steps:
        ver = [_run(_cli("verify"), root, env) for _ in range(runs)]
        out["verify_s"] = _median(ver)
        out["verify_per_s"] = n / out["verify_s"]

    if {"push", "pull"} & set(steps):
        _run(_cli("push"), root, env)
    if "push" in steps:  # everything is there now: what a push pays to re-check it
        out["push_present_load"] = os.getloadavg()[0]
        pushes = [_run_cpu(_cli("push"), root, env) for _ in range(runs)]
        out["push_present_s"] = _median([w for w, _ in pushes])
        out["push_present_cpu_s"] = _median([c for _, c in pushes])
        print(f"  scale {n}: push, all present, {out['push_present_s']:.2f} s ({out['push_present_cpu_s']:.2f} s CPU; "
              f"load {out['push_present_load']:.1f})", file=sys.stderr, flush=True)
    pull_t, floor_t = [], []
    for _ in range(runs if "pull" in steps else 0):
        floor_t.append(_pull_floor(root, env))
        _chmod_rm(cache)
        pull_t.append(_run(_cli("pull"), root, env))
    if pull_t:
        out["pull_s"], out["pull_floor_s"] = _median(pull_t), _median(floor_t)
        out["pull_ratio"] = _median([a / p for a, p in zip(pull_t, floor_t, strict=True)])
        out["store_files"] = sum(1 for p in (root / ".casstore" / "store").rglob("*") if p.is_file())
        print(f"  scale {n}: verify {out.get('verify_s', 0):.2f} s, pull {out['pull_s']:.2f} s", file=sys.stderr,
              flush=True)
    if "s3pull" in steps:
        with _S3() as s3:
            s3env = s3.env(env)
            out["s3_push_load"] = os.getloadavg()[0]
            # packed: more objects than pack_threshold; then again, everything present
            out["s3_push_s"], out["s3_push_cpu_s"] = _run_cpu(_cli("push"), root, s3env)
            out["s3_push_present_s"], out["s3_push_present_cpu_s"] = _run_cpu(_cli("push"), root, s3env)
            pull_t, pull_cpu, floor_t, start_t, start_cpu, own_t = [], [], [], [], [], []
            floor_parts: dict[str, list[float]] = {}
            phases: dict[str, list[float]] = {}
            for i in range(runs):
                # a new cache folder per run: one removed just before (1,000 files) makes ext4
                # look through the recently deleted inodes for every file created next (perf:
                # ~30 % of a pull's samples, 1.5 s of system time), which no real first pull pays
                run_env = dict(s3env, CASSTORE_CACHE_DIR=str(base / f"cache-s3-{i}"))
                wall, cpu = _run_cpu(_cli("pull"), root, run_env)
                pull_t.append(wall)
                pull_cpu.append(cpu)
                floor_t.append(_s3_pull_floor(root, s3, run_env, floor_parts))
                for name, took in _pull_timeline(root, dict(run_env, CASSTORE_CACHE_DIR=str(base / f"cache-s3t-{i}"))).items():
                    phases.setdefault(name, []).append(took)
                wall, cpu = _s3_client_start(s3, s3env)
                start_t.append(wall)
                start_cpu.append(cpu)
                own_t.append(_casstore_start(s3env)[0])
            out["s3_pull_s"], out["s3_pull_floor_s"] = _median(pull_t), _median(floor_t)
            out["s3_pull_cpu_s"] = _median(pull_cpu)
            out["s3_pull_ratio"] = _median([a / p for a, p in zip(pull_t, floor_t, strict=True)])
            # the second floor: a fresh process must load some S3 client before its first request
            out["s3_client_start_s"], out["s3_client_start_cpu_s"] = _median(start_t), _median(start_cpu)
            out["s3_pull_floor2_s"] = _median([f + c for f, c in zip(floor_t, start_t, strict=True)])
            out["s3_pull_ratio2"] = _median([a / (f + c) for a, f, c in zip(pull_t, floor_t, start_t, strict=True)])
            # the third: the floor + what a fresh casstore process pays before its first request
            out["casstore_start_s"] = _median(own_t)
            out["s3_pull_floor3_s"] = _median([f + c for f, c in zip(floor_t, own_t, strict=True)])
            out["s3_pull_ratio3"] = _median([a / (f + c) for a, f, c in zip(pull_t, floor_t, own_t, strict=True)])
            out["s3_floor_parts_s"] = {k: _median(v) for k, v in floor_parts.items()}
            out["s3_pull_phases_s"] = {k: _median(v) for k, v in phases.items()}
            out["s3_files"] = sum(1 for page in s3.client().get_paginator("list_objects_v2").paginate(
                Bucket=s3.bucket) for _ in page.get("Contents", []))
        print(f"  scale {n}: S3 packed push {out['s3_push_s']:.2f} s ({out['s3_push_cpu_s']:.2f} s CPU; all present "
              f"{out['s3_push_present_s']:.2f} s), pull {out['s3_pull_s']:.2f} s ({out['s3_pull_cpu_s']:.2f} s CPU; "
              f"{out['s3_pull_ratio']:.2f}x floor, {out['s3_pull_ratio2']:.2f}x floor + botocore client start "
              f"{out['s3_client_start_s']:.2f} s, {out['s3_pull_ratio3']:.2f}x floor + casstore start "
              f"{out['casstore_start_s']:.2f} s), {out['s3_files']} stored files", file=sys.stderr, flush=True)
        print(f"  scale {n}: {_s3_decomposition(out)}", file=sys.stderr, flush=True)

    if check and "check" in steps:
        from benchmarks.bench_check import cassette

        _git(root, env, "init", "-q")
        _git(root, env, "add", "-A")
        _git(root, env, "commit", "-q", "-m", "cassettes")
        stamp = "2026-11-20T10:00:00Z"
        for i in range(10):
            name = f"suite{i // 1000:03d}/case{i:06d}"
            p = root / "tests" / "cassettes" / f"{name}.json"
            p.write_text(json.dumps(cassette(name, 2, stamp, salt="re-recorded"), indent=2))
        _git(root, env, "add", "-A")
        chk = [_run_cpu(_cli("check", "--staged"), root, env) for _ in range(runs)]
        out["check_staged_s"], out["check_staged_cpu_s"] = _median([w for w, _ in chk]), _median([c for _, c in chk])
    _chmod_rm(base)
    return out


def bench_import(runs: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    # interleaved and the fastest of each (a difference of ~10 ms between two ~60 ms process
    # starts: medians of a few runs on a shared machine came out negative)
    times: dict[str, list[float]] = {"pass": [], "import casstore": [], "import casstore; casstore.use": []}
    for _ in range(max(runs, 10)):
        for code, got in times.items():
            got.append(_run([PY, "-c", code], REPO, env))
    bare, imp, use = (min(v) for v in times.values())
    return {"interpreter_s": bare, "import_casstore_s": imp - bare, "import_casstore_use_s": use - bare}


def bench_heavy_imports(base: Path) -> list[str]:
    """Third-party modules loaded by `casstore status`, `verify` and `pull` with a local remote."""
    seed = base64.b64encode(hashlib.sha256(b"casstore-bench-scale").digest()).decode()
    env = _env(base, seed)
    root = base / "repo"
    root.mkdir(parents=True)
    _build(root, 3, env)
    _run(_cli("add", "tests/cassettes"), root, env)
    code = ("import sys, runpy; sys.argv = ['casstore'] + sys.argv[1:]\n"
            "try:\n    runpy.run_module('casstore.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print('MODULES:' + ' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('s3fs', 'boto3', 'botocore', 'fsspec', 'aiobotocore', 'httpx', 'aiohttp'))))")
    found = set()
    for cmd in (["status"], ["verify"], ["push"], ["pull"]):
        r = subprocess.run([PY, "-c", code, *cmd], cwd=root, env=env, capture_output=True, text=True, check=True)
        found |= set(r.stdout.rsplit("MODULES:", 1)[-1].split())
    _chmod_rm(base)
    return sorted(found)


def bench_large_verify(base: Path, cassettes: int, entries: int, runs: int) -> dict[str, Any]:
    """verify of large cassettes, fresh process, vs sha256(zstd_decompress) on 2 threads."""
    from concurrent.futures import ThreadPoolExecutor

    import zstandard

    from benchmarks.bench_replay import make_cassette, make_interactions

    seed = base64.b64encode(hashlib.sha256(b"casstore-bench-scale").digest()).decode()
    env = _env(base, seed)
    root = base / "repo"
    root.mkdir(parents=True)
    from casstore.store import signing

    os.environ["CASSTORE_SIGNING_KEY"] = seed
    (root / ".casstore").mkdir()
    (root / ".casstore" / "trusted_keys").write_text(signing.load_signing_key().public_line() + "\n")
    (root / "casstore.toml").write_text('cassette_dir = "tests/cassettes"\n')
    cdir = root / "tests" / "cassettes"
    cdir.mkdir(parents=True)
    inter = make_interactions(entries * 2)
    for i in range(cassettes):
        lo = (i * 37) % entries
        path = cdir / f"big{i:03d}.json"
        make_cassette(f"big{i:03d}", inter[lo:lo + entries]).write_file(path)
        # as the recorder leaves it: the (fake) bearer token redacted, or add refuses the file
        path.write_text(path.read_text().replace("Bearer sk-bench-not-a-key", "Bearer [REDACTED:authorization]"))
    _run(_cli("add", "tests/cassettes"), root, env)
    # through the cache's reader: an add of large cassettes may have written them as a pack
    from casstore.model.lock import parse_lock
    from casstore.store.cache import Cache

    cache = Cache(Path(env["CASSTORE_CACHE_DIR"]))
    lock = parse_lock((root / "casstore.lock").read_bytes())
    frames = [cache.read_frame(pin.digest) for pin in lock.pins.values()]
    assert len(frames) == cassettes, f"{len(frames)} of {cassettes} cassettes pinned"
    total = sum(zstandard.get_frame_parameters(f).content_size for f in frames)

    def one(f: bytes) -> None:
        hashlib.sha256(zstandard.ZstdDecompressor().decompress(f)).digest()

    def limit() -> float:
        t = time.perf_counter()
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(one, frames))
        return time.perf_counter() - t

    lim, ver = [], []
    for _ in range(runs):
        lim.append(limit())
        ver.append(_run(_cli("verify"), root, env))
    _chmod_rm(base)
    return {"cassettes": cassettes, "mb": total / 1e6, "limit_2core_mb_s": total / _median(lim) / 1e6,
            "verify_mb_s": total / _median(ver) / 1e6,
            "fraction_of_limit": _median([lv / v for lv, v in zip(lim, ver, strict=True)])}


def bench_open(base: Path, entries: int, runs: int) -> dict[str, Any]:
    """Open a cassette of ``entries`` entries, each a fresh process: entering
    ``casstore.use(name, mode="replay")`` (cache warm, lock pinning it) vs the raw work,
    ``json.loads(zstd_decompress(frame))``. Time after imports; peak RSS of the process."""
    from benchmarks.bench_replay import make_cassette, make_interactions
    from casstore.model.blob import compress, digest_and_size
    from casstore.model.lock import Lock, Pin, format_lock

    proj = base / "proj"
    proj.mkdir(parents=True)
    cas = make_cassette("big", make_interactions(entries))
    data = cas.canonical_bytes()
    digest, size = digest_and_size(data)
    del cas
    frame = compress(data, level=3)
    del data
    hexd = digest[7:]
    obj = base / "cache" / "objects" / "sha256" / hexd[:2] / hexd[2:]
    obj.parent.mkdir(parents=True)
    obj.write_bytes(frame)
    del frame
    (proj / "casstore.toml").write_text("[trust]\nrequire_signatures = false\n")
    (proj / "casstore.lock").write_text(format_lock(Lock().with_pin(Pin(name="big", digest=digest, size=size))))
    env = dict(os.environ, PYTHONPATH=str(REPO), CASSTORE_CACHE_DIR=str(base / "cache"))
    env.pop("CI", None)
    # peak RSS is the process's own VmHWM: ru_maxrss keeps the high-water mark of the
    # process that forked it (this one, ~3 GB after building the cassette) across exec
    peak = "int([x for x in open('/proc/self/status') if x.startswith('VmHWM')][0].split()[1])"
    raw = ("import sys, time, json, zstandard; t = time.perf_counter(); c = time.process_time(); "
           "f = open(sys.argv[1], 'rb').read(); "
           "v = json.loads(zstandard.ZstdDecompressor().decompress(f)); "
           f"print(time.perf_counter() - t, time.process_time() - c, {peak})")
    ours = ("import time, casstore; casstore.use; t = time.perf_counter(); c = time.process_time(); "
            "ctx = casstore.use('big', mode='replay'); ctx.__enter__(); "
            f"print(time.perf_counter() - t, time.process_time() - c, {peak})")
    res: dict[str, list[float]] = {"raw_s": [], "raw_cpu_s": [], "raw_kb": [], "casstore_s": [], "casstore_cpu_s": [],
                                   "casstore_kb": []}
    for _ in range(runs):
        for label, code in (("raw", raw), ("casstore", ours)):
            r = subprocess.run([PY, "-c", code, str(obj)], cwd=proj, env=env, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(r.stderr[-1500:])
            took, cpu, kb = r.stdout.split()[-3:]
            res[f"{label}_s"].append(float(took))
            res[f"{label}_cpu_s"].append(float(cpu))
            res[f"{label}_kb"].append(float(kb))
    _chmod_rm(base)
    out: dict[str, Any] = {k: _median(v) for k, v in res.items()}
    out.update(entries=entries, mb=size / 1e6, time_ratio=out["casstore_s"] / out["raw_s"],
               cpu_ratio=out["casstore_cpu_s"] / out["raw_cpu_s"], memory_ratio=out["casstore_kb"] / out["raw_kb"])
    return out


def run(sizes: list[int], *, runs: int = 3, check_sizes: tuple[int, ...] = (1000, 10_000, 100_000),
        big: tuple[int, int] = (40, 2000), open_entries: int = 100_000,
        steps: tuple[str, ...] = STEPS) -> dict[str, Any]:
    res: dict[str, Any] = {"sizes": {}, "load_average": os.getloadavg()}
    _compile()
    with tempfile.TemporaryDirectory(prefix="casstore-bench-scale-") as tmp:
        base = Path(tmp)
        if "import" in steps:
            res["import"] = bench_import(max(runs, 5))
            res["heavy_imports_with_local_remote"] = bench_heavy_imports(base / "imports")
        for n in sizes:
            res["sizes"][n] = bench_size(n, base / f"n{n}", runs=runs if n < 100_000 else 1,
                                         check=n in check_sizes, steps=steps)
            res["sizes"][n]["load_average"] = os.getloadavg()
            print(f"  scale {n}: {json.dumps(res['sizes'][n])}", file=sys.stderr, flush=True)
        if "large" in steps:
            res["large_verify"] = bench_large_verify(base / "large", big[0], big[1], runs)
        if open_entries and "open" in steps:
            print(f"  scale: open {open_entries} entries", file=sys.stderr, flush=True)
            res["open"] = bench_open(base / "open", open_entries, max(1, runs - 1))
    return res


def table(res: dict[str, Any]) -> str:
    """The figures and every goal of #19 they measure; a step that was not run shows "—"."""
    sizes = res["sizes"]
    ns = sorted(sizes, key=int)

    def f(s: dict[str, Any], key: str, fmt: str, unit: str = "") -> str:
        return format(s[key], fmt) + unit if key in s else "—"

    rows = ["| pins | add s | physical s | add / physical | + scan s | add / (physical + scan) "
            "| lock read ms (every Pin built) | status s (nothing remembered) "
            "| verify s (cassettes/s) | push, all present s | pull s | pull floor s | pull / floor "
            "| S3 packed pull s | S3 floor s | S3 pull / floor | check --staged s | load avg |",
            "|---:" * 18 + "|"]
    s3rows = ["", "S3 (moto on 127.0.0.1), packed; CPU s of each process in brackets; floor 2 = floor + a fresh "
              "process's botocore client start (import, client, first request); floor 3 = floor + a fresh "
              "process's casstore start (the interpreter and the imports every pull makes):", "",
              "| pins | push s | push, all present s | pull s | floor s | pull / floor | client start s "
              "| floor 2 s | pull / floor 2 | casstore start s | pull / floor 3 |", "|---:" * 11 + "|"]
    for n in ns:
        s = sizes[n]
        rows.append(f"| {int(n):,} | {f(s, 'add_s', '.2f')} | {f(s, 'physical_s', '.2f')} | {f(s, 'add_ratio', '.2f', 'x')}"
                    f" | {f(s, 'scan_s', '.2f')} | {f(s, 'add_ratio_with_scan', '.2f', 'x')}"
                    f" | {f(s, 'lock_read_ms', '.1f')} ({f(s, 'lock_read_all_pins_ms', '.1f')}) | {f(s, 'status_s', '.2f')} ({f(s, 'status_unremembered_s', '.2f')})"
                    f" | {f(s, 'verify_s', '.2f')} ({f(s, 'verify_per_s', ',.0f')}) | {f(s, 'push_present_s', '.2f')}"
                    f" | {f(s, 'pull_s', '.2f')} | {f(s, 'pull_floor_s', '.2f')} | {f(s, 'pull_ratio', '.2f', 'x')}"
                    f" | {f(s, 's3_pull_s', '.2f')} | {f(s, 's3_pull_floor_s', '.2f')} | {f(s, 's3_pull_ratio', '.2f', 'x')}"
                    f" | {f(s, 'check_staged_s', '.2f')}"
                    f" | {' / '.join(f'{x:.1f}' for x in s.get('load_average', ()))} |")
    for n in ns:
        s = sizes[n]
        if "s3_push_s" in s:
            s3rows.append(f"| {int(n):,} | {f(s, 's3_push_s', '.2f')} ({f(s, 's3_push_cpu_s', '.2f')})"
                          f" | {f(s, 's3_push_present_s', '.2f')} ({f(s, 's3_push_present_cpu_s', '.2f')})"
                          f" | {f(s, 's3_pull_s', '.2f')} ({f(s, 's3_pull_cpu_s', '.2f')}) | {f(s, 's3_pull_floor_s', '.2f')}"
                          f" | {f(s, 's3_pull_ratio', '.2f', 'x')} | {f(s, 's3_client_start_s', '.2f')}"
                          f" ({f(s, 's3_client_start_cpu_s', '.2f')}) | {f(s, 's3_pull_floor2_s', '.2f')}"
                          f" | {f(s, 's3_pull_ratio2', '.2f', 'x')} | {f(s, 'casstore_start_s', '.2f')}"
                          f" | {f(s, 's3_pull_ratio3', '.2f', 'x')} |")
    if len(s3rows) > 5:
        rows += s3rows
        rows += [""] + [f"{int(n):,} pins: {_s3_decomposition(sizes[n])}." for n in ns if "s3_pull_phases_s" in sizes[n]]
    rows += ["", "CPU time of the same processes (user + system), which a busy machine inflates less:", "",
             "| pins | lock read CPU ms | status CPU s (nothing remembered) | push, all present CPU s "
             "| check --staged CPU s |",
             "|---:|---:|---:|---:|---:|"]
    for n in ns:
        s = sizes[n]
        rows.append(f"| {int(n):,} | {f(s, 'lock_read_cpu_ms', '.1f')} | {f(s, 'status_cpu_s', '.2f')} "
                    f"({f(s, 'status_unremembered_cpu_s', '.2f')}) | {f(s, 'push_present_cpu_s', '.2f')} "
                    f"| {f(s, 'check_staged_cpu_s', '.2f')} |")
    goals = []

    def goal(text: str, value: str, ok: bool | None) -> None:
        goals.append(f"| {text} | {value} | {'met' if ok else 'MISSED' if ok is not None else '—'} |")

    for n in ns:
        s = sizes[n]
        if int(n) in (1000, 10_000) and "add_ratio" in s:
            goal(f"add ≤ 1.5x physical work at {int(n):,} (load {s['add_load']:.1f})",
                 f"{s['add_ratio']:.2f}x ({s['add_ratio_with_scan']:.2f}x counting the scan as work)",
                 s["add_ratio"] <= 1.5)
    for n in ns:
        s = sizes[n]
        if int(n) == 10_000:
            if "lock_read_ms" in s:
                goal("reading a 10k-pin lock ≤ 50 ms", f"{s['lock_read_ms']:.1f} ms (the scan without the index: "
                     f"{s['lock_scan_ms']:.1f} ms)", s["lock_read_ms"] <= 50)
            if "check_staged_s" in s:
                goal("check --staged, 10 of 10k, < 0.3 s", f"{s['check_staged_s']:.2f} s", s["check_staged_s"] < 0.3)
        if int(n) == 1000:
            if "status_s" in s:
                goal("cold status at 1k ≤ 0.3 s (fresh process, after add)", f"{s['status_s']:.2f} s",
                     s["status_s"] <= 0.3)
                goal("… nothing remembered (as after a fresh clone)", f"{s['status_unremembered_s']:.2f} s",
                     s["status_unremembered_s"] <= 0.3)
            if "pull_ratio" in s:
                goal("pull of 1k ≤ 2x (floor), local folder (loose)", f"{s['pull_ratio']:.2f}x", s["pull_ratio"] <= 2)
            if "s3_pull_ratio" in s:
                goal("pull of 1k ≤ 2x (floor), packed S3 (moto on 127.0.0.1)", f"{s['s3_pull_ratio']:.2f}x",
                     s["s3_pull_ratio"] <= 2)
                goal("… floor 2: the floor + a fresh process's botocore client start", f"{s['s3_pull_ratio2']:.2f}x",
                     s["s3_pull_ratio2"] <= 2)
                if "s3_pull_ratio3" in s:
                    goal("… floor 3: the floor + a fresh casstore process's start", f"{s['s3_pull_ratio3']:.2f}x",
                         s["s3_pull_ratio3"] <= 2)
    for n in ns:
        if "verify_per_s" in sizes[n]:
            goal(f"verify ≥ 5,000 small cassettes/s at {int(n):,} (fresh process)",
                 f"{sizes[n]['verify_per_s']:,.0f}/s", sizes[n]["verify_per_s"] >= 5000)
    if len(ns) > 1:
        lo, hi = sizes[ns[0]], sizes[ns[-1]]
        k = int(ns[-1]) / int(ns[0])
        bound = 1.1 * k
        for cmd in ("add_s", "status_s", "verify_s", "push_present_s", "pull_s"):
            if cmd in lo and cmd in hi:
                r = hi[cmd] / lo[cmd]
                what = cmd[:-2].replace("_present", " (all present)")
                cpu = cmd[:-2] + "_cpu_s"  # where measured: the CPU ratio too (a busy box inflates wall time)
                also = f" (CPU {hi[cpu] / lo[cpu]:.1f})" if cpu in lo and cpu in hi else ""
                goal(f"{what} linear: time({int(ns[-1]):,}) / time({int(ns[0]):,}) ≤ {bound:.0f}", f"{r:.1f}{also}",
                     r <= bound)
        if "check_staged_s" in lo:
            his = [sizes[n] for n in ns if "check_staged_s" in sizes[n]][-1]
            goal("check --staged grows with what is staged (largest / smallest repo)",
                 f"{his['check_staged_s'] / lo['check_staged_s']:.1f}", None)
    if "import" in res:
        imp = res["import"]
        goal("import casstore ≤ 0.1 s (fresh interpreter, minus the interpreter)",
             f"{imp['import_casstore_s']:.3f} s", imp["import_casstore_s"] <= 0.1)
        goal("… and casstore.use reached (replay machinery loaded)", f"{imp['import_casstore_use_s']:.3f} s", None)
        heavy = res["heavy_imports_with_local_remote"]
        goal("no s3fs/boto/fsspec with a local remote (status, verify, push, pull)", ", ".join(heavy) or "none",
             not any(m.split(".")[0] in ("s3fs", "boto3", "botocore", "fsspec", "aiobotocore") for m in heavy))
    if "large_verify" in res:
        lv = res["large_verify"]
        goal(f"verify of large cassettes ≥ 50 % of the 2-core sha256+zstd limit ({lv['cassettes']} × "
             f"{lv['mb'] / lv['cassettes']:.1f} MB)", f"{lv['fraction_of_limit'] * 100:.0f} % "
             f"({lv['verify_mb_s']:.0f} of {lv['limit_2core_mb_s']:.0f} MB/s)", lv["fraction_of_limit"] >= 0.5)
    if "open" in res:
        o = res["open"]
        goal(f"open a {o['entries']:,}-entry cassette ≤ 1.2x raw decompress + parse, time", f"{o['time_ratio']:.2f}x "
             f"({o['casstore_s']:.1f} vs {o['raw_s']:.1f} s; CPU {o['cpu_ratio']:.2f}x)", o["time_ratio"] <= 1.2)
        goal("… and peak memory", f"{o['memory_ratio']:.2f}x ({o['casstore_kb'] / 1e6:.2f} vs "
             f"{o['raw_kb'] / 1e6:.2f} GB)", o["memory_ratio"] <= 1.2)
    return "\n".join(rows + ["", "| goal (issue #19) | measured | |", "|---|---|---|"] + goals)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--open-entries", type=int, default=100_000)
    ap.add_argument("--steps", default=",".join(STEPS),
                    help=f"what to time, of {','.join(STEPS)} (default: all; add runs once untimed when left out)")
    ns = ap.parse_args()
    steps = tuple(x for x in ns.steps.split(",") if x)
    if set(steps) - set(STEPS):
        ap.error(f"unknown steps: {', '.join(sorted(set(steps) - set(STEPS)))}")
    res = run([int(x) for x in ns.sizes.split(",")], runs=ns.runs, open_entries=ns.open_entries, steps=steps)
    print(table(res))
    print(json.dumps(res, indent=1, default=str), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
