"""Verify throughput: `casstore verify` over the local cache vs the sha256 + zstd limit.

The limit is measured on the same frames in the same run: one thread doing nothing but
``sha256(zstd_decompress(frame))``. casstore verify also checks every signature, reads
the files from the cache and runs a few threads (zstd and hashlib release the GIL).

Run: ``python benchmarks/run.py verify`` (or this file directly).
"""

from __future__ import annotations

import hashlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import zstandard

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def run(cassettes: int = 100, entries: int = 400, repeat: int = 5) -> dict[str, Any]:
    from benchmarks.bench_replay import make_cassette, make_interactions
    from casstore.ops.add import add
    from casstore.ops.verify import verify as verify_pins
    from casstore.project import Project

    with tempfile.TemporaryDirectory(prefix="casstore-bench-verify-") as tmp:
        root = Path(tmp) / "proj"
        os.environ["CASSTORE_CACHE_DIR"] = str(Path(tmp) / "cache")
        root.mkdir()
        (root / "casstore.toml").write_text('[trust]\nrequire_signatures = false\n')
        cdir = root / "tests" / "cassettes"
        cdir.mkdir(parents=True)
        inter = make_interactions(entries * 4)
        for i in range(cassettes):
            lo = (i * entries) % (len(inter) - entries)
            make_cassette(f"v{i:03d}", inter[lo:lo + entries]).write_file(cdir / f"v{i:03d}.json")
        project = Project.discover(root)
        print(f"  verify: adding {cassettes} cassettes ...", file=sys.stderr, flush=True)
        add(project, [cdir])
        pins = list(project.load_lock().pins.values())
        total = sum(p.size for p in pins)
        frames = [project.cache.read_frame(p.digest) for p in pins]

        def limit() -> None:
            d = zstandard.ZstdDecompressor()
            for f in frames:
                hashlib.sha256(d.decompress(f)).hexdigest()

        def verify() -> None:
            rep = verify_pins(Project.discover(root))
            assert not rep.problems, rep.problems

        out: dict[str, Any] = {"cassettes": cassettes, "bytes": total,
                               "frame_bytes": sum(len(f) for f in frames)}
        for name, fn in (("limit_sha256_zstd_1thread", limit), ("casstore_verify", verify)):
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            mbs = [total / t / 1e6 for t in times]
            out[name] = {"median_mb_s": statistics.median(mbs), "min_mb_s": min(mbs), "max_mb_s": max(mbs),
                         "runs": repeat}
        return out


def table(res: dict[str, Any]) -> str:
    lim, cv = res["limit_sha256_zstd_1thread"], res["casstore_verify"]
    return "\n".join([
        f"{res['cassettes']} cassettes, {res['bytes'] / 1e6:.0f} MB canonical ({res['frame_bytes'] / 1e6:.1f} MB zstd)",
        "", "| what | MB/s median (min–max) |", "|---|---:|",
        f"| sha256 + zstd decompress, one thread (the limit) | {lim['median_mb_s']:.0f} ({lim['min_mb_s']:.0f}–{lim['max_mb_s']:.0f}) |",
        f"| `casstore verify` (cache, signatures checked) | {cv['median_mb_s']:.0f} ({cv['min_mb_s']:.0f}–{cv['max_mb_s']:.0f}) |",
        "", f"casstore verify = {cv['median_mb_s'] / lim['median_mb_s'] * 100:.0f}% of the limit",
    ])


if __name__ == "__main__":
    print(table(run()))
