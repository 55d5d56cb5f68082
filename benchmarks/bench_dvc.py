"""casstore vs dvc: push and pull of the same 1,000 cassette files to the same S3 server.

No latency proxy here: both tools talk to the moto S3 server on 127.0.0.1 directly, each
run as the command line a user types (a fresh process, start-up included). dvc and dvc-s3
live in the benchmark's own virtualenv (``benchmarks/.venv-dvc``, created on first use:
``python -m venv benchmarks/.venv-dvc && benchmarks/.venv-dvc/bin/pip install dvc dvc-s3``),
never in casstore's dependencies.

Run: ``python benchmarks/run.py dvc`` (or this file directly).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DVC_VENV = REPO / "benchmarks" / ".venv-dvc"


def ensure_dvc() -> Path:
    dvc = DVC_VENV / "bin" / "dvc"
    if not dvc.exists():
        print("  dvc: creating benchmarks/.venv-dvc (pip install dvc dvc-s3) ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(DVC_VENV)], check=True)
        subprocess.run([str(DVC_VENV / "bin" / "pip"), "install", "-q", "dvc", "dvc-s3"], check=True)
    return dvc


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return dt


def run(n: int = 1000, repeat: int = 3) -> dict[str, Any]:
    from benchmarks.bench_transfer import Servers
    from tests.helpers.cassettes import make_cassette

    dvc = ensure_dvc()
    servers = Servers(latency=0.0)
    tmp = Path(tempfile.mkdtemp(prefix="casstore-bench-dvc-"))
    out: dict[str, Any] = {"files": n, "casstore": {}, "dvc": {}}
    try:
        env = os.environ.copy()
        env["AWS_ENDPOINT_URL"] = servers.direct
        env.pop("CASSTORE_REMOTE", None)
        env["CI"] = "true"  # quiet progress output for both tools
        for r in range(repeat):
            # -- the same files for both tools -------------------------------------------
            work = tmp / f"run{r}"
            data = work / "casstore" / "tests" / "cassettes"
            data.mkdir(parents=True)
            for i in range(n):
                (data / f"c{i:04d}.json").write_text(json.dumps(make_cassette(f"c{i:04d}", n=3), indent=2))
            dvc_dir = work / "dvc"
            shutil.copytree(data, dvc_dir / "data")
            out["bytes"] = sum(p.stat().st_size for p in data.iterdir())

            # -- casstore --------------------------------------------------------------
            cs = work / "casstore"
            cenv = dict(env, CASSTORE_CACHE_DIR=str(work / "cs-cache"), CASSTORE_CONFIG_DIR=str(work / "cs-config"))
            bucket = servers.new_bucket()
            cli = [sys.executable, "-m", "casstore.cli"]
            _run(cli + ["init", "--remote", f"s3://{bucket}/cas", "--identity", "bench@example.com"], cs, cenv)
            t_add = _run(cli + ["add", "tests/cassettes"], cs, cenv)
            t_push = _run(cli + ["push", "-q"], cs, cenv)
            cenv["CASSTORE_CACHE_DIR"] = str(work / "cs-cache-2")
            t_pull = _run(cli + ["pull", "--frozen", "-q"], cs, cenv)
            for k, v in (("add", t_add), ("push", t_push), ("pull", t_pull)):
                out["casstore"].setdefault(k, []).append(v)

            # -- dvc -------------------------------------------------------------------
            denv = dict(env, DVC_NO_ANALYTICS="1", DVC_SITE_CACHE_DIR=str(work / "dvc-site"))
            dbucket = servers.new_bucket()
            _run([str(dvc), "init", "--no-scm", "-q"], dvc_dir, denv)
            _run([str(dvc), "remote", "add", "-d", "bench", f"s3://{dbucket}/dvc"], dvc_dir, denv)
            _run([str(dvc), "remote", "modify", "bench", "endpointurl", servers.direct], dvc_dir, denv)
            t_add = _run([str(dvc), "add", "-q", "data"], dvc_dir, denv)
            t_push = _run([str(dvc), "push", "-q"], dvc_dir, denv)
            shutil.rmtree(dvc_dir / ".dvc" / "cache")
            shutil.rmtree(dvc_dir / "data")
            t_pull = _run([str(dvc), "pull", "-q"], dvc_dir, denv)
            assert len(list((dvc_dir / "data").iterdir())) == n
            for k, v in (("add", t_add), ("push", t_push), ("pull", t_pull)):
                out["dvc"].setdefault(k, []).append(v)
            print(f"  dvc: run {r + 1}/{repeat} done", file=sys.stderr, flush=True)
        ver = subprocess.run([str(dvc), "--version"], capture_output=True, text=True).stdout.strip()
        out["dvc_version"] = ver
        return out
    finally:
        servers.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def table(res: dict[str, Any]) -> str:
    import statistics

    def cell(xs: list[float]) -> str:
        return f"{statistics.median(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})"

    c, d = res["casstore"], res["dvc"]
    lines = [f"{res['files']:,} cassette files ({res['bytes'] / 1024:,.0f} KiB), moto S3 on 127.0.0.1, no added latency; "
             f"dvc {res.get('dvc_version', '?')}; medians of {len(c['push'])} runs, seconds, whole CLI processes",
             "", "| step | casstore | dvc | casstore / dvc |", "|---|---:|---:|---:|"]
    for k in ("add", "push", "pull"):
        lines.append(f"| {k} | {cell(c[k])} | {cell(d[k])} | "
                     f"{statistics.median(c[k]) / statistics.median(d[k]):.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ns = ap.parse_args()
    print(table(run(ns.n, ns.repeat)))
