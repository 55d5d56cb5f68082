"""One command for every casstore benchmark, side by side with the anchors.

    python benchmarks/run.py                 # everything (about 10-15 minutes on 2 cores)
    python benchmarks/run.py replay verify   # some sections
    python benchmarks/run.py --quick         # small sizes, to check the harness works

Prints one table per section (medians of repeated runs, min–max) and writes all figures,
with the machine and versions, to ``benchmarks/results/latest.json``. Sections:

  replay    casstore vs httpx MockTransport vs vcrpy; cassette open vs raw decompress+parse
  transfer  push/pull of 1,000 cassettes via a 20 ms latency proxy vs sequential s3fs and
            fsspec batched cat/pipe, --jobs 1/4/16/64
  suite     one test = open its own cassette + replay one call, in a project of 1,000
            cassettes: casstore use() vs vcrpy use_cassette()
  dvc       casstore vs dvc push/pull of the same 1,000 files (dvc in its own venv)
  verify    casstore verify MB/s vs the sha256 + zstd limit
  check     casstore check --staged, 10 of 1,000 cassettes staged (benchmarks/bench_check.py)
  gc        casstore gc --dry-run over 2,000 commits (benchmarks/bench_gc.py)
  scale     the command line at 1k / 10k / 100k pins, each command a fresh process: add vs
            the physical work, lock read, status, verify, pull, check --staged, import
            time, large-cassette verify vs the 2-core limit, opening 100k entries
            (benchmarks/bench_scale.py)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
SECTIONS = ("replay", "suite", "transfer", "dvc", "verify", "check", "gc", "scale")


def machine() -> dict[str, object]:
    def ver(pkg: str) -> str:
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return "-"

    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "python": platform.python_version(), "platform": platform.platform(), "cpu": cpu,
        "cores": os.cpu_count(), "load_avg_at_start": os.getloadavg(),
        "versions": {p: ver(p) for p in ("casstore", "httpx", "requests", "vcrpy", "s3fs", "fsspec", "moto",
                                         "zstandard", "openai", "anthropic")},
    }


def script(name: str, *args: str) -> str:
    r = subprocess.run([sys.executable, str(HERE / name), *args], capture_output=True, text=True)
    if r.returncode != 0:
        return f"FAILED ({r.returncode}):\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}"
    return r.stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sections", nargs="*", choices=[*SECTIONS, []], help="default: all")
    ap.add_argument("--quick", action="store_true", help="small sizes: check the harness, not the figures")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "latest.json")
    ns = ap.parse_args()
    wanted = ns.sections or list(SECTIONS)
    quick = ns.quick
    results: dict[str, object] = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                                  "quick": quick}
    print(f"machine: {results['machine']['cpu']}, {results['machine']['cores']} cores, "  # type: ignore[index]
          f"Python {results['machine']['python']}")  # type: ignore[index]
    def section(name: str, fn) -> None:  # type: ignore[no-untyped-def]
        """Run one section; a failure is reported and recorded, the other sections still run."""
        if name not in wanted:
            return
        try:
            res, text = fn()
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - report and go on
            res, text = {"error": repr(exc)}, f"FAILED: {exc!r}"
        results[name] = res
        print(f"\n## {name}\n{text}", flush=True)
        ns.out.parent.mkdir(parents=True, exist_ok=True)
        ns.out.write_text(json.dumps(results, indent=2, default=str))

    def replay():  # type: ignore[no-untyped-def]
        from benchmarks import bench_replay

        res = bench_replay.run([100, 1000] if quick else [100, 1000, 10_000, 100_000],
                               repeat=3 if quick else 5, sample=200 if quick else 1000,
                               vcr_calls=12 if quick else 40)
        return res, bench_replay.table(res)

    def suite():  # type: ignore[no-untyped-def]
        from benchmarks import bench_suite

        res = bench_suite.run(200 if quick else 1000, tests=50 if quick else 200, repeat=2 if quick else 5)
        return res, bench_suite.table(res)

    def transfer():  # type: ignore[no-untyped-def]
        from benchmarks import bench_transfer

        res = bench_transfer.run(100 if quick else 1000, 0.02, repeat=1 if quick else 3)
        return res, bench_transfer.table(res)

    def dvc():  # type: ignore[no-untyped-def]
        from benchmarks import bench_dvc

        res = bench_dvc.run(100 if quick else 1000, repeat=1 if quick else 3)
        return res, bench_dvc.table(res)

    def verify():  # type: ignore[no-untyped-def]
        from benchmarks import bench_verify

        res = bench_verify.run(20 if quick else 100, repeat=3 if quick else 5)
        return res, bench_verify.table(res)

    def check():  # type: ignore[no-untyped-def]
        out = script("bench_check.py", *(["--cassettes", "200", "--runs", "3"] if quick else ["--runs", "9"]))
        return out, out

    def gc():  # type: ignore[no-untyped-def]
        out = script("bench_gc.py", *(["--commits", "200"] if quick else []))
        return out, out

    def scale():  # type: ignore[no-untyped-def]
        from benchmarks import bench_scale

        res = bench_scale.run([200, 1000] if quick else [1000, 10_000, 100_000], runs=1 if quick else 3,
                              check_sizes=(200, 1000) if quick else (1000, 10_000, 100_000),
                              big=(4, 500) if quick else (40, 2000), open_entries=2000 if quick else 100_000)
        return res, bench_scale.table(res)

    for name, fn in (("replay", replay), ("suite", suite), ("transfer", transfer), ("dvc", dvc), ("verify", verify),
                     ("check", check), ("gc", gc), ("scale", scale)):
        section(name, fn)
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(results, indent=2, default=str))
    print(f"\nwrote {ns.out.relative_to(REPO) if ns.out.is_relative_to(REPO) else ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
