"""pytest start-up with casstore's plugin against the same run without it (``-p no:casstore``).

A casstore project (``casstore init``, N working copies) with one trivial test; each run is a
fresh ``python -m pytest`` process, with and without the plugin in turn, for every tree given
(a folder holding ``casstore/``; the installed casstore supplies the entry point). Prints CPU
time (user + system: it stays near the cost on a loaded machine, where wall time does not) and,
with ``--instructions``, callgrind's instruction count of one run each (deterministic).

    python benchmarks/bench_startup.py --tree before=/tmp/base --tree after=. --runs 15
    python benchmarks/bench_startup.py --no-pyc-cache --instructions

``--no-pyc-cache`` runs as a container with ``PYTHONDONTWRITEBYTECODE=1`` does: pytest rewrites
an installed plugin's modules for its assertions and cannot keep them, so every run pays it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TEST = "def test_a():\n    assert True\n"


def _project(root: Path, cassettes: int) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([sys.executable, "-m", "casstore.cli", "init"], cwd=root, check=True, capture_output=True)
    folder = root / "tests" / "cassettes"
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(cassettes):
        (folder / f"c{i}.json").write_text("{}\n")
    (root / "test_a.py").write_text(TEST)


def _env(tree: str, no_cache: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "CASSTORE_"))}
    env.update(PYTHONPATH=tree, PYTHONHASHSEED="0")
    env.pop("CI", None)  # a local run: the end-of-run pin is armed
    if no_cache:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _args(with_plugin: bool) -> list[str]:
    return ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "test_a.py",
            *([] if with_plugin else ["-p", "no:casstore"])]


def _forget_rewrites(tree: str) -> None:
    for pyc in Path(tree, "casstore").rglob("*-pytest-*.pyc"):
        pyc.unlink()


def _cpu(root: Path, env: dict[str, str], with_plugin: bool) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, *_args(with_plugin)], cwd=root, env=env, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _instructions(root: Path, env: dict[str, str], with_plugin: bool) -> int:
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
                        *_args(with_plugin)], cwd=root, env=env, check=True, capture_output=True, text=True)
    return int(next(line for line in r.stderr.splitlines() if "Collected" in line).split()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=PATH",
                    help="a source tree to measure (repeatable; default: this checkout)")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--cassettes", type=int, default=1000, help="working copies in the project")
    ap.add_argument("--no-pyc-cache", action="store_true", help="PYTHONDONTWRITEBYTECODE=1, rewritten modules forgotten")
    ap.add_argument("--instructions", action="store_true", help="also count instructions (valgrind)")
    args = ap.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree) or {"this": str(Path(__file__).resolve().parents[1])}
    trees = {name: str(Path(path).resolve()) for name, path in trees.items()}
    if args.instructions and shutil.which("valgrind") is None:
        ap.error("--instructions needs valgrind on PATH")
    with tempfile.TemporaryDirectory(prefix="casstore-startup-") as tmp:
        root = Path(tmp)
        _project(root, args.cassettes)
        for tree in trees.values():  # bytecode first, as an installed package has it
            subprocess.run([sys.executable, "-m", "compileall", "-q", tree + "/casstore"], check=True)
            subprocess.run([sys.executable, *_args(True)], cwd=root, env=_env(tree, False), check=True,
                           capture_output=True)  # pytest's rewritten modules kept, as after a first run
        cpu: dict[tuple[str, bool], list[float]] = {(n, w): [] for n in trees for w in (True, False)}
        for _ in range(args.runs):
            for name, tree in trees.items():
                for with_plugin in (True, False):
                    if args.no_pyc_cache:
                        _forget_rewrites(tree)
                    cpu[name, with_plugin].append(_cpu(root, _env(tree, args.no_pyc_cache), with_plugin))
        print(f"pytest start-up, one trivial test, {args.cassettes} working copies, {args.runs} runs each"
              f"{', no bytecode cache' if args.no_pyc_cache else ''}; CPU ms, median (min)")
        for name, tree in trees.items():
            w, wo = cpu[name, True], cpu[name, False]
            line = (f"  {name}: with {statistics.median(w) * 1e3:.0f} ({min(w) * 1e3:.0f}), without "
                    f"{statistics.median(wo) * 1e3:.0f} ({min(wo) * 1e3:.0f}), the plugin "
                    f"{(statistics.median(w) - statistics.median(wo)) * 1e3:+.0f} ms")
            if args.instructions:
                counts = []
                for with_plugin in (True, False):
                    if args.no_pyc_cache:
                        _forget_rewrites(tree)
                    counts.append(_instructions(root, _env(tree, args.no_pyc_cache), with_plugin))
                line += f"; instructions {counts[0]:,} - {counts[1]:,} = {counts[0] - counts[1]:,}"
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
