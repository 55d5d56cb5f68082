"""Transfer benchmark: casstore push/pull vs plain s3fs, against a real S3 server on loopback.

The moto S3 server runs on 127.0.0.1 behind a small forwarding proxy (``tests/helpers/faultproxy.py``)
that adds a fixed latency to every request: real object stores are latency-bound, moto on
its own is CPU-bound and would measure moto. Compared in one run, on the same keys:

* ``casstore push`` / ``casstore pull`` (the function API the CLI calls) with the loose layout
  (``pack_threshold = 0``) at ``--jobs`` 1, 4, 16, 64 — push uploads each object *and* its
  signature envelope, after one listing — and with packs (the default for 64+ objects);
* the packed pull as a user runs it: ``casstore pull --frozen``, a fresh process (start-up,
  imports and the S3 client's start included);
* a plain sequential s3fs loop: ``fs.pipe_file`` / ``fs.cat_file`` per key (the anchor);
* fsspec's own batched ``fs.pipe({...})`` / ``fs.cat([...])`` of the same keys, through s3fs and
  (where obstore is installed) through obstore's fsspec filesystem;
* the ideal ``requests × latency / jobs``.

s3fs is not one of casstore's dependencies: the s3fs anchors run in the benchmark's own
virtualenv (``benchmarks/.venv-s3fs``, created on first use: ``pip install s3fs``), one
process per measurement, timed inside that process (its imports not counted).

Run: ``python benchmarks/run.py transfer`` (or this file directly; ``--packed-only`` skips
the loose layout's ``--jobs`` sweep).
"""

from __future__ import annotations

import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
S3FS_VENV = REPO / "benchmarks" / ".venv-s3fs"

# one s3fs measurement, run by the s3fs venv's python: the arguments as JSON on stdin, the
# seconds it took (and s3fs's version) as JSON on stdout
_S3FS_ANCHOR = r"""
import json, sys, time
import s3fs
a = json.loads(sys.stdin.read())
fs = s3fs.S3FileSystem(endpoint_url=a["endpoint"], skip_instance_cache=True)
keys = a["keys"]
if a["op"].endswith("pipe"):
    data = fs.cat(keys)
    data = {a["dst"] + "/" + k.split("/", 1)[1]: data[k] for k in keys}
    fs = s3fs.S3FileSystem(endpoint_url=a["endpoint"], skip_instance_cache=True)
t = time.perf_counter()
if a["op"] == "sequential_cat":
    for k in keys:
        fs.cat_file(k)
elif a["op"] == "batched_cat":
    fs.cat(keys)
elif a["op"] == "sequential_pipe":
    for k, v in data.items():
        fs.pipe_file(k, v)
else:
    fs.pipe(data)
print(json.dumps({"s": time.perf_counter() - t, "s3fs": s3fs.__version__}))
"""


def ensure_s3fs() -> Path:
    python = S3FS_VENV / "bin" / "python"
    if not python.exists():
        print("  transfer: creating benchmarks/.venv-s3fs (pip install s3fs) ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(S3FS_VENV)], check=True)
        subprocess.run([str(S3FS_VENV / "bin" / "pip"), "install", "-q", "s3fs"], check=True)
    return python


def s3fs_anchor(op: str, endpoint: str, keys: list[str], dst: str = "") -> tuple[float, str]:
    """(seconds, s3fs version) of one s3fs measurement in the s3fs venv."""
    r = subprocess.run([str(ensure_s3fs()), "-c", _S3FS_ANCHOR], input=json.dumps(
        {"op": op, "endpoint": endpoint, "keys": keys, "dst": dst}), capture_output=True, text=True, check=False,
        env=dict(os.environ, AWS_ENDPOINT_URL=endpoint))
    if r.returncode != 0:
        raise SystemExit(f"benchmark transfer: s3fs {op} failed:\n{r.stderr[-2000:]}")
    got = json.loads(r.stdout.strip().splitlines()[-1])
    return float(got["s"]), str(got["s3fs"])


def _fake_aws() -> None:
    os.environ.update({
        "AWS_ACCESS_KEY_ID": "bench-" + "x" * 10, "AWS_SECRET_ACCESS_KEY": "bench-" + "y" * 20,
        "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
    })


class Servers:
    """moto on loopback, and the latency proxy in front of it."""

    def __init__(self, latency: float) -> None:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise

        from tests.helpers.faultproxy import FaultPlan, FaultProxy

        _fake_aws()
        self.moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.moto.start()
        host, port = self.moto.get_host_and_port()
        self.direct = f"http://{host}:{port}"
        self.proxy = FaultProxy(self.direct, FaultPlan(latency=latency))
        self.proxy.start()
        self.endpoint = self.proxy.url if latency else self.direct

    def new_bucket(self) -> str:
        import boto3

        name = f"bench-{uuid.uuid4().hex[:10]}"
        boto3.client("s3", endpoint_url=self.direct, region_name="us-east-1").create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        self.proxy.stop()
        self.moto.stop()


def make_project(root: Path, n: int) -> list[str]:
    """A project with ``n`` cassettes added (signed). Returns their names."""
    from casstore.ops.add import add
    from casstore.project import Project
    from tests.helpers.cassettes import make_cassette

    root.mkdir(parents=True)
    (root / "casstore.toml").write_text('[remote]\nurl = "s3://placeholder/x"\n')
    seed = base64.b64encode(os.urandom(32)).decode()
    os.environ["CASSTORE_SIGNING_KEY"] = seed
    os.environ["CASSTORE_SIGNER"] = "bench@example.com"
    from casstore.store import signing

    key = signing.load_signing_key()
    (root / ".casstore").mkdir()
    (root / ".casstore" / "trusted_keys").write_text(key.public_line() + "\n")
    cdir = root / "tests" / "cassettes"
    cdir.mkdir(parents=True)
    names = []
    for i in range(n):
        name = f"c{i:04d}"
        (cdir / f"{name}.json").write_text(json.dumps(make_cassette(name, n=3)))
        names.append(name)
    add(Project.discover(root), [cdir])
    return names


def _stats(xs: list[float]) -> dict[str, float]:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "runs": len(xs)}


def _time(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(n: int = 1000, latency: float = 0.02, jobs: tuple[int, ...] = (1, 4, 16, 64), repeat: int = 3,
        slow_repeat: int = 1, loose: bool = True, s3fs: bool = True) -> dict[str, Any]:
    from casstore.ops import sync
    from casstore.project import Project
    from casstore.store.backends import object_key

    out: dict[str, Any] = {"objects": n, "latency_s": latency, "jobs": list(jobs)}
    servers = Servers(latency)
    tmp = tempfile.TemporaryDirectory(prefix="casstore-bench-transfer-")
    try:
        root = Path(tmp.name) / "proj"
        os.environ["CASSTORE_CACHE_DIR"] = str(Path(tmp.name) / "cache-src")
        os.environ["AWS_ENDPOINT_URL"] = servers.endpoint
        print(f"  transfer: adding {n} cassettes ...", file=sys.stderr, flush=True)
        make_project(root, n)
        project = Project.discover(root)
        frames = {object_key(p.digest): project.cache.read_frame(p.digest) for p in project.load_lock().pins.values()}
        out["bytes"] = sum(len(v) for v in frames.values())

        def fresh_prefix() -> str:
            return f"s3://{servers.new_bucket()}/cas"

        def layout(threshold: int) -> None:
            (root / "casstore.toml").write_text(f'[remote]\nurl = "s3://placeholder/x"\npack_threshold = {threshold}\n')

        # casstore twice: the loose layout (one PUT per object and per envelope, one GET per
        # object) over the --jobs sweep, then the default, packs, at the default --jobs
        push: dict[str, Any] = {}
        pull: dict[str, Any] = {}
        src = ""

        def measure(what: str, name: str, sweep: tuple[int, ...], results: dict[str, Any],
                    prepare: Callable[[int, int], None], step: Callable[[Project, int], Any]) -> None:
            for j in sweep:
                times = []
                for r in range(slow_repeat if j == 1 else repeat):
                    prepare(j, r)
                    p = Project.discover(root)
                    seen0 = servers.proxy.counters.seen
                    times.append(_time(lambda p=p, j=j: _ok(step(p, j))))
                    results[f"{name}requests"] = servers.proxy.counters.seen - seen0
                results[f"casstore_{name}jobs{j}"] = _stats(times)
                print(f"  transfer: {what} {name}--jobs {j}: {statistics.median(times):.2f}s",
                      file=sys.stderr, flush=True)

        layouts = ((("", 0, jobs),) if loose else ()) + (("packs_", 64, (16,)),)
        for name, threshold, sweep in layouts:
            layout(threshold)

            def to_fresh_prefix(j: int, r: int) -> None:
                os.environ["CASSTORE_REMOTE"] = fresh_prefix()

            def to_fresh_cache(j: int, r: int, name: str = name) -> None:
                os.environ["CASSTORE_CACHE_DIR"] = str(Path(tmp.name) / f"cache-pull-{name}{j}-{r}")

            measure("push", name, sweep, push, to_fresh_prefix, lambda p, j: sync.push(p, jobs=j))
            # a fully pushed prefix for the pulls (and, loose, for the baselines' reads)
            os.environ["CASSTORE_REMOTE"] = prefix = fresh_prefix()
            _ok(sync.push(Project.discover(root), jobs=64))
            src = src or (prefix if not threshold else "")
            measure("pull", name, sweep, pull, to_fresh_cache, lambda p, j: sync.pull(p, jobs=j))
        pull["cli_packs"] = _stats([cli_pull(root, Path(tmp.name) / f"cache-cli-{r}") for r in range(repeat)])
        print(f"  transfer: casstore pull --frozen (a fresh process), packs: {pull['cli_packs']['median']:.2f}s",
              file=sys.stderr, flush=True)
        out["push"], out["pull"] = push, pull
        if not loose:  # the anchors read loose objects: push them once, loose
            layout(0)
            os.environ["CASSTORE_REMOTE"] = src = fresh_prefix()
            _ok(sync.push(Project.discover(root), jobs=64))
        bucket_root = src[len("s3://"):]
        keys = [f"{bucket_root}/{k}" for k in frames]

        # -- the anchors: plain s3fs (its own venv, a process each), obstore's fsspec filesystem --
        def anchor(op: str, dst: str = "") -> tuple[float, int]:
            seen0 = servers.proxy.counters.seen
            took, out["s3fs_version"] = s3fs_anchor(op, servers.endpoint, keys, dst)
            print(f"  transfer: s3fs {op}: {took:.2f}s", file=sys.stderr, flush=True)
            return took, servers.proxy.counters.seen - seen0

        obstore_cat = obstore_batched_cat(servers.endpoint, keys, repeat)
        if obstore_cat:
            out["pull"]["obstore_fsspec_batched_cat"] = _stats(obstore_cat)
        if s3fs:
            took, out["pull"]["s3fs_sequential_requests"] = anchor("sequential_cat")
            out["pull"]["s3fs_sequential_cat_file"] = _stats([took])
            times = []
            for _ in range(repeat):
                took, out["pull"]["fsspec_batched_requests"] = anchor("batched_cat")
                times.append(took)
            out["pull"]["fsspec_batched_cat"] = _stats(times)
            out["push"]["s3fs_sequential_pipe_file"] = _stats([anchor("sequential_pipe",
                                                                      f"{servers.new_bucket()}/cas")[0]])
            out["push"]["fsspec_batched_pipe"] = _stats([anchor("batched_pipe", f"{servers.new_bucket()}/cas")[0]
                                                         for _ in range(repeat)])
        out["ideal_pull"] = {f"jobs{j}": n * latency / j for j in jobs}
        out["ideal_push"] = {f"jobs{j}": 2 * n * latency / j for j in jobs}
        return out
    finally:
        servers.stop()
        tmp.cleanup()
        for k in ("CASSTORE_REMOTE", "CASSTORE_SIGNING_KEY", "CASSTORE_SIGNER"):
            os.environ.pop(k, None)


def cli_pull(root: Path, cache: Path) -> float:
    """Seconds of ``casstore pull --frozen -q`` as a user runs it: a fresh process, empty cache."""
    env = dict(os.environ, CASSTORE_CACHE_DIR=str(cache), PYTHONPATH=str(REPO))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "casstore.cli", "pull", "--frozen", "-q"], cwd=root, env=env,
                       capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"benchmark transfer: casstore pull failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return took


def obstore_batched_cat(endpoint: str, keys: list[str], repeat: int) -> list[float]:
    """fsspec's batched ``cat`` through obstore's fsspec filesystem (none without obstore)."""
    try:
        from obstore.fsspec import FsspecStore
    except ImportError:
        return []
    times = []
    for _ in range(repeat):
        fs = FsspecStore("s3", endpoint=endpoint, client_options={"allow_http": True}, skip_instance_cache=True)
        times.append(_time(lambda fs=fs: fs.cat(keys)))
    return times


def _ok(report: Any) -> Any:
    if report.problems:
        raise SystemExit("benchmark transfer failed: " + "; ".join(p.message for p in report.problems[:3]))
    return report


def table(res: dict[str, Any]) -> str:
    lat = res["latency_s"] * 1000
    lines = [f"{res['objects']:,} cassettes ({res['bytes'] / 1024:,.0f} KiB of zstd frames), "
             f"{lat:.0f} ms added to every request",
             "",
             "| what | pull s | push s |",
             "|---|---:|---:|"]
    pu, ps = res["pull"], res["push"]

    def cell(d: dict[str, Any] | None) -> str:
        if not d:
            return "—"
        return f"{d['median']:.2f}" + (f" ({d['min']:.2f}–{d['max']:.2f})" if d["runs"] > 1 else "")

    lines.append(f"| plain sequential s3fs loop (`cat_file` / `pipe_file`) | {cell(pu.get('s3fs_sequential_cat_file'))} "
                 f"| {cell(ps.get('s3fs_sequential_pipe_file'))} |")
    lines.append(f"| fsspec batched `cat` / `pipe` (s3fs) | {cell(pu.get('fsspec_batched_cat'))} | {cell(ps.get('fsspec_batched_pipe'))} |")
    if pu.get("obstore_fsspec_batched_cat"):
        lines.append(f"| fsspec batched `cat` (obstore's filesystem) | {cell(pu.get('obstore_fsspec_batched_cat'))} | — |")
    for j in (res["jobs"] if "casstore_jobs1" in pu else ()):
        lines.append(f"| casstore, loose layout, `--jobs {j}` | {cell(pu.get(f'casstore_jobs{j}'))} "
                     f"| {cell(ps.get(f'casstore_jobs{j}'))} |")
        lines.append(f"| ideal N×latency/{j} (loose) | {res['ideal_pull'][f'jobs{j}']:.2f} | {res['ideal_push'][f'jobs{j}']:.2f} |")
    lines.append(f"| **casstore, packs (the default for ≥ 64 objects), `--jobs 16`** | {cell(pu.get('casstore_packs_jobs16'))} "
                 f"| {cell(ps.get('casstore_packs_jobs16'))} |")
    lines.append(f"| **`casstore pull --frozen`, packs, a fresh process** | {cell(pu.get('cli_packs'))} | — |")
    lines.append("")
    lines.append(f"requests: casstore loose pull {pu.get('requests')}, push {ps.get('requests')} (objects + signature "
                 f"envelopes + listing); casstore packs pull {pu.get('packs_requests')}, push {ps.get('packs_requests')}; "
                 f"s3fs sequential cat_file {pu.get('s3fs_sequential_requests')}; "
                 f"fsspec batched cat {pu.get('fsspec_batched_requests')}")
    for label, key in (("loose", "casstore_jobs"), ("packs", "casstore_packs_jobs"), ("packs, CLI", "cli_packs")):
        if "s3fs_sequential_cat_file" not in pu:
            break
        found = [v["median"] for k, v in pu.items() if k.startswith(key) and (k == key or k[len(key):].isdigit())]
        if not found:
            continue
        best = min(found)
        lines.append(f"pull, {label}: best casstore {best:.2f}s = {pu['s3fs_sequential_cat_file']['median'] / best:.1f}× "
                     f"faster than the sequential loop, {best / pu['fsspec_batched_cat']['median']:.3f}× fsspec's batched cat")
    return "\n".join(lines)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--latency", type=float, default=0.02)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--packed-only", action="store_true", help="skip the loose layout's --jobs sweep")
    ap.add_argument("--no-s3fs", action="store_true", help="skip the s3fs anchors (measured by another run)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ns = ap.parse_args()
    res = run(ns.n, ns.latency, repeat=ns.repeat, loose=not ns.packed_only, s3fs=not ns.no_s3fs)
    if ns.json:
        ns.json.write_text(json.dumps(res, indent=1))
    print(table(res))
