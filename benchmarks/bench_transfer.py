"""Transfer benchmark: casstore push/pull vs plain s3fs, against a real S3 server on loopback.

The moto S3 server runs on 127.0.0.1 behind a small forwarding proxy (``tests/helpers/faultproxy.py``)
that adds a fixed latency to every request: real object stores are latency-bound, moto on
its own is CPU-bound and would measure moto. Compared in one run, on the same keys:

* ``casstore push`` / ``casstore pull`` (the function API the CLI calls) with the loose layout
  (``pack_threshold = 0``) at ``--jobs`` 1, 4, 16, 64 — push uploads each object *and* its
  signature envelope, after one listing — and with packs (the default for 64+ objects);
* a plain sequential s3fs loop: ``fs.pipe_file`` / ``fs.cat_file`` per key (the anchor);
* fsspec's own batched ``fs.pipe({...})`` / ``fs.cat([...])`` of the same keys;
* the ideal ``requests × latency / jobs``.

Run: ``python benchmarks/run.py transfer`` (or this file directly).
"""

from __future__ import annotations

import base64
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


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
    from casstore import signing

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
        slow_repeat: int = 1) -> dict[str, Any]:
    import s3fs

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

        for name, threshold, sweep in (("", 0, jobs), ("packs_", 64, (16,))):
            layout(threshold)

            def to_fresh_prefix(j: int, r: int) -> None:
                os.environ["CASSTORE_REMOTE"] = fresh_prefix()

            def to_fresh_cache(j: int, r: int, name: str = name) -> None:
                os.environ["CASSTORE_CACHE_DIR"] = str(Path(tmp.name) / f"cache-pull-{name}{j}-{r}")

            measure("push", name, sweep, push, to_fresh_prefix, lambda p, j: sync.push(p, jobs=j))
            # a fully pushed prefix for the pulls (and, loose, for the baselines' reads)
            os.environ["CASSTORE_REMOTE"] = prefix = fresh_prefix()
            _ok(sync.push(Project.discover(root), jobs=64))
            src = src or prefix
            measure("pull", name, sweep, pull, to_fresh_cache, lambda p, j: sync.pull(p, jobs=j))
        out["push"], out["pull"] = push, pull
        bucket_root = src[len("s3://"):]
        keys = [f"{bucket_root}/{k}" for k in frames]

        # -- the anchors: plain s3fs --------------------------------------------------------
        fs = s3fs.S3FileSystem(endpoint_url=servers.endpoint)
        seen0 = servers.proxy.counters.seen
        t = _time(lambda: [fs.cat_file(k) for k in keys])
        out["pull"]["s3fs_sequential_cat_file"] = _stats([t])
        out["pull"]["s3fs_sequential_requests"] = servers.proxy.counters.seen - seen0
        print(f"  transfer: s3fs sequential cat_file: {t:.2f}s", file=sys.stderr, flush=True)
        times = []
        for _ in range(repeat):
            fs2 = s3fs.S3FileSystem(endpoint_url=servers.endpoint, skip_instance_cache=True)
            seen0 = servers.proxy.counters.seen
            times.append(_time(lambda fs2=fs2: fs2.cat(keys)))
            out["pull"]["fsspec_batched_requests"] = servers.proxy.counters.seen - seen0
        out["pull"]["fsspec_batched_cat"] = _stats(times)

        dst = servers.new_bucket()
        data = {f"{dst}/cas/{k}": v for k, v in frames.items()}
        t = _time(lambda: [fs.pipe_file(k, v) for k, v in data.items()])
        out["push"]["s3fs_sequential_pipe_file"] = _stats([t])
        times = []
        for _ in range(repeat):
            dst = servers.new_bucket()
            data = {f"{dst}/cas/{k}": v for k, v in frames.items()}
            fs2 = s3fs.S3FileSystem(endpoint_url=servers.endpoint, skip_instance_cache=True)
            times.append(_time(lambda fs2=fs2, data=data: fs2.pipe(data)))
        out["push"]["fsspec_batched_pipe"] = _stats(times)
        out["ideal_pull"] = {f"jobs{j}": n * latency / j for j in jobs}
        out["ideal_push"] = {f"jobs{j}": 2 * n * latency / j for j in jobs}
        return out
    finally:
        servers.stop()
        tmp.cleanup()
        for k in ("CASSTORE_REMOTE", "CASSTORE_SIGNING_KEY", "CASSTORE_SIGNER"):
            os.environ.pop(k, None)


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
    lines.append(f"| fsspec batched `cat` / `pipe` | {cell(pu.get('fsspec_batched_cat'))} | {cell(ps.get('fsspec_batched_pipe'))} |")
    for j in res["jobs"]:
        lines.append(f"| casstore, loose layout, `--jobs {j}` | {cell(pu.get(f'casstore_jobs{j}'))} "
                     f"| {cell(ps.get(f'casstore_jobs{j}'))} |")
        lines.append(f"| ideal N×latency/{j} (loose) | {res['ideal_pull'][f'jobs{j}']:.2f} | {res['ideal_push'][f'jobs{j}']:.2f} |")
    lines.append(f"| **casstore, packs (the default for ≥ 64 objects), `--jobs 16`** | {cell(pu.get('casstore_packs_jobs16'))} "
                 f"| {cell(ps.get('casstore_packs_jobs16'))} |")
    lines.append("")
    lines.append(f"requests: casstore loose pull {pu.get('requests')}, push {ps.get('requests')} (objects + signature "
                 f"envelopes + listing); casstore packs pull {pu.get('packs_requests')}, push {ps.get('packs_requests')}; "
                 f"s3fs sequential cat_file {pu.get('s3fs_sequential_requests')}; "
                 f"fsspec batched cat {pu.get('fsspec_batched_requests')}")
    for label, key in (("loose", "casstore_jobs"), ("packs", "casstore_packs_jobs")):
        best = min(v["median"] for k, v in pu.items() if k.startswith(key) and k[len(key):].isdigit())
        lines.append(f"pull, {label}: best casstore {best:.2f}s = {pu['s3fs_sequential_cat_file']['median'] / best:.1f}× "
                     f"faster than the sequential loop, {best / pu['fsspec_batched_cat']['median']:.3f}× fsspec's batched cat")
    return "\n".join(lines)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--latency", type=float, default=0.02)
    ap.add_argument("--repeat", type=int, default=3)
    ns = ap.parse_args()
    res = run(ns.n, ns.latency, repeat=ns.repeat)
    print(table(res))
