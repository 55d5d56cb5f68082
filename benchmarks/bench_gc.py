"""Benchmark: `casstore gc --dry-run` over a history of 2,000 commits touching casstore.lock.

Builds a scratch repository with `git fast-import` (seconds, not minutes): a lock of
50 cassettes, 2,000 commits on main each re-pinning one cassette, plus 3 feature branches,
2 tags and a remote-tracking ref branching off along the way. The local store holds every
pinned object plus 200 old orphans (file contents are dummies: gc only lists and dates
objects). Then it times the real `casstore` command, as a user runs it.

    python benchmarks/bench_gc.py [--commits 2000] [--cassettes 50] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from casstore.model.lock import Lock, Pin, Signature, format_lock


def digest(tag: str) -> str:
    return "sha256:" + hashlib.sha256(tag.encode()).hexdigest()


def build(root: Path, commits: int, cassettes: int) -> set[str]:
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    (root / "casstore.toml").write_text('[remote]\nurl = ".casstore/store"\n')
    sig = (Signature(keyid="0123456789abcdef", signer="bench@example.com", sig="A" * 86 + "=="),)
    pins = {f"suite/case_{i:03d}": Pin(name=f"suite/case_{i:03d}", digest=digest(f"c{i}-0"), size=4096,
                                       entries=12, models=("gpt-4o",), signatures=sig) for i in range(cassettes)}
    pinned: set[str] = set()  # every digest some commit's lock pins
    out = bytearray()

    def data(b: bytes) -> None:
        out.extend(b"data %d\n" % len(b) + b + b"\n")

    cfg = (root / "casstore.toml").read_bytes()
    out.extend(b"blob\nmark :1\n")
    data(cfg)
    t0 = 1_700_000_000
    branch_at = {commits // 4: "feature-a", commits // 2: "feature-b", 3 * commits // 4: "feature-c"}
    tag_at = {commits // 3: "v1", 2 * commits // 3: "v2"}
    extra_refs: list[tuple[str, int]] = []
    for n in range(commits):
        i = n % cassettes
        name = f"suite/case_{i:03d}"
        new = digest(f"c{i}-{n + 1}")
        pins[name] = Pin(name=name, digest=new, size=4096 + n, entries=12, models=("gpt-4o",), signatures=sig)
        pinned.update(p.digest for p in pins.values())
        blob_mark, commit_mark = 2 * n + 2, 2 * n + 3
        out.extend(b"blob\nmark :%d\n" % blob_mark)
        data(format_lock(Lock(pins=dict(sorted(pins.items())))).encode())
        out.extend(b"commit refs/heads/main\nmark :%d\n" % commit_mark)
        out.extend(b"committer Bench <bench@example.com> %d +0000\n" % (t0 + n * 60))
        data(f"re-record {name}".encode())
        if n:
            out.extend(b"from :%d\n" % (commit_mark - 2))
        else:
            out.extend(b"M 100644 :1 casstore.toml\n")
        out.extend(b"M 100644 :%d casstore.lock\n" % blob_mark)
        if n in branch_at:
            extra_refs.append((f"refs/heads/{branch_at[n]}", commit_mark))
        if n in tag_at:
            extra_refs.append((f"refs/tags/{tag_at[n]}", commit_mark))
        if n == commits - 10:
            extra_refs.append(("refs/remotes/origin/main", commit_mark))
    for ref, mark in extra_refs:
        out.extend(f"reset {ref}\nfrom :{mark}\n\n".encode())
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input=bytes(out), check=True)
    subprocess.run(["git", "checkout", "-q", "-f", "main"], cwd=root, check=True)
    store = root / ".casstore" / "store" / "objects" / "sha256"
    old = time.time() - 30 * 86400
    for d in sorted(pinned) + [digest(f"orphan-{k}") for k in range(200)]:
        h = d[7:]
        p = store / h[:2] / h[2:]
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
        os.utime(p, (old, old))
    return pinned


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", type=int, default=2000)
    ap.add_argument("--cassettes", type=int, default=50)
    ap.add_argument("--keep", type=Path, help="build the repository here and keep it")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="casstore-bench-gc-"))
    root = args.keep or tmp / "repo"
    env = {**os.environ, "CASSTORE_CACHE_DIR": str(tmp / "cache"), "CASSTORE_CONFIG_DIR": str(tmp / "config"),
           "GIT_CONFIG_NOSYSTEM": "1"}
    try:
        t = time.perf_counter()
        pinned = build(root, args.commits, args.cassettes)
        built = time.perf_counter() - t
        exe = shutil.which("casstore")
        cmd = [exe] if exe else [sys.executable, "-m", "casstore.cli"]
        times, cpu = [], []
        for _ in range(3):
            t = time.perf_counter()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            r = subprocess.run([*cmd, "gc", "--dry-run", "--remote"], cwd=root, env=env, capture_output=True,
                               text=True, check=False)
            times.append(time.perf_counter() - t)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            if r.returncode != 0:
                sys.exit(f"gc failed: {r.stderr}")
        summary = r.stdout.strip().splitlines()[-1]
        assert "would delete 200 object(s)" in summary, summary
        print(f"repository: {args.commits} commits touching casstore.lock, {args.cassettes} cassettes, "
              f"{len(pinned)} pinned digests, +200 orphans (built in {built:.1f} s)")
        print(f"casstore gc --dry-run --remote: wall best {min(times):.2f} s (runs "
              f"{', '.join(f'{x:.2f}' for x in times)}), CPU best {min(cpu):.2f} s; "
              f"load average {os.getloadavg()[0]:.1f}")
        print(f"  {summary}")
        print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
              f"Python {platform.python_version()}, {platform.system()} {platform.release()}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
