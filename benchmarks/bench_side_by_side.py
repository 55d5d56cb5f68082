"""`add` of 1k pins and `check --staged` (10 of 10k staged) for two source trees, run by run.

Each run is a fresh process, alternating the trees (a slow moment of a shared machine hits
both), with the project, environment and command of bench_scale.py. Prints wall and CPU time
(user + system of the process and its children: on a loaded machine the CPU time stays near
what the command costs while the wall time grows with the load).

    python benchmarks/bench_side_by_side.py --before /tmp/main --after . --runs 9

A tree is a folder holding ``casstore/`` (``git archive main casstore | tar -x -C /tmp/main``).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import bench_scale as bs  # noqa: E402
from benchmarks.bench_check import cassette  # noqa: E402


def _run(args: list[str], root: Path, env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args[2:])} failed ({r.returncode}): {r.stderr[-800:]}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, type=Path)
    ap.add_argument("--after", required=True, type=Path)
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    sides = {"before": str(args.before.resolve()), "after": str(args.after.resolve())}
    for tree in sides.values():  # bytecode first, as an installed package has it
        subprocess.run([sys.executable, "-m", "compileall", "-q", tree + "/casstore"], check=True)
    seed = base64.b64encode(hashlib.sha256(b"casstore-bench-scale").digest()).decode()
    res: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="casstore-side-") as tmp:
        for n, what in ((1000, "add"), (10_000, "check --staged")):
            base = Path(tmp) / str(n)
            env = bs._env(base, seed)
            root = base / "repo"
            root.mkdir(parents=True)
            bs._build(root, n, env)
            cache = Path(env["CASSTORE_CACHE_DIR"])
            envs = {side: dict(env, PYTHONPATH=tree) for side, tree in sides.items()}
            if what != "add":
                _run(bs._cli("add", "tests/cassettes"), root, envs["before"])
                for git_args in (("init", "-q"), ("add", "-A"), ("commit", "-q", "-m", "cassettes")):
                    bs._git(root, env, *git_args)
                for i in range(10):
                    name = f"suite{i // 1000:03d}/case{i:06d}"
                    text = json.dumps(cassette(name, 2, "2026-11-20T10:00:00Z", salt="re-recorded"), indent=2)
                    (root / "tests" / "cassettes" / f"{name}.json").write_text(text)
                bs._git(root, env, "add", "-A")
            for r in range(args.runs):
                for side in ("before", "after") if r % 2 == 0 else ("after", "before"):
                    if what == "add":
                        shutil.rmtree(cache, ignore_errors=True)
                        (root / "casstore.lock").unlink(missing_ok=True)
                    cmd = bs._cli("add", "tests/cassettes") if what == "add" else bs._cli("check", "--staged")
                    res.setdefault(f"{what} {n} {side}", []).append(_run(cmd, root, envs[side]))
            shutil.rmtree(base, ignore_errors=True)
    for label, runs in res.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(f"{label:26} wall median {statistics.median(walls):.3f} s (min {min(walls):.3f})  "
              f"CPU median {statistics.median(cpus):.3f} s (min {min(cpus):.3f})  runs {len(runs)}")
    print("load average", " ".join(f"{x:.1f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
