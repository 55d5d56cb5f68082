"""Benchmark: `casstore check --staged` (what the pre-commit hook runs) in a repository with
1,000 committed cassettes of which 10 are changed and staged.

    python benchmarks/bench_check.py [--cassettes 1000] [--staged 10] [--runs 7]

Prints the median wall time of the real command (a fresh process each run, as git runs
the hook) and, for reference, of the in-process function alone and of the bare
interpreter start-up + `import casstore.cli`. Everything happens in a temporary folder
with its own cache and config dirs; nothing touches the network.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cassette(name: str, n: int, stamp: str, salt: str = "") -> dict:
    entries = []
    for i in range(n):
        req = {"method": "POST", "url": "https://api.openai.com/v1/chat/completions",
               "headers": {"content-type": "application/json", "authorization": "Bearer [REDACTED:authorization]"},
               "body": {"model": "gpt-4o-mini", "max_tokens": 256,
                        "messages": [{"role": "user", "content": f"{name} question {i} {salt}"}]}}
        entries.append({
            "identity": hashlib.sha256(json.dumps(req, sort_keys=True).encode()).hexdigest(),
            "seq": i, "kind": "llm", "target": "POST https://api.openai.com/v1/chat/completions",
            "request": req,
            "response": {"status": 200, "headers": {"content-type": "application/json",
                                                    "x-request-id": "req_" + hashlib.md5(f"{name}{i}".encode()).hexdigest()},
                         "body": {"id": f"chatcmpl-{i}", "model": "gpt-4o-mini",
                                  "choices": [{"index": 0, "message": {"role": "assistant",
                                                                       "content": "An answer of ordinary length. " * 20}}],
                                  "usage": {"prompt_tokens": 12, "completion_tokens": 120, "total_tokens": 132}}},
            "recorded_at": stamp, "duration_ms": 420,
        })
    return {"format": "casstore.cassette/v1", "name": name, "meta": {"recorded_at": stamp, "recorder": "bench"},
            "entries": entries, "redaction": {"rules": ["authorization"], "hits": {"authorization": n}}}


def git(*args: str, cwd: Path, env: dict[str, str]) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cassettes", type=int, default=1000)
    ap.add_argument("--staged", type=int, default=10)
    ap.add_argument("--entries", type=int, default=4)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="casstore-bench-") as tmp:
        base = Path(tmp)
        env = dict(os.environ, CASSTORE_CACHE_DIR=str(base / "cache"), CASSTORE_CONFIG_DIR=str(base / "config"),
                   HOME=str(base), GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@example.com",
                   GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@example.com")
        env.pop("CI", None)
        root = base / "repo"
        (root / "tests" / "cassettes").mkdir(parents=True)
        (root / "casstore.toml").write_text('cassette_dir = "tests/cassettes"\n[hygiene]\nmax_age_days = 90\n')
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for i in range(args.cassettes):
            name = f"suite{i // 100:02d}/case{i:04d}"
            p = root / "tests" / "cassettes" / f"{name}.json"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps(cassette(name, args.entries, stamp), indent=2))
        git("init", "-q", cwd=root, env=env)
        git("add", "-A", cwd=root, env=env)
        git("commit", "-q", "-m", "1000 cassettes", cwd=root, env=env)
        for i in range(args.staged):
            name = f"suite{i // 100:02d}/case{i:04d}"
            p = root / "tests" / "cassettes" / f"{name}.json"
            p.write_text(json.dumps(cassette(name, args.entries, stamp, salt="re-recorded"), indent=2))
        git("add", "-A", cwd=root, env=env)
        size = sum(p.stat().st_size for p in (root / "tests" / "cassettes").rglob("*.json"))

        cmd = [sys.executable, "-m", "casstore.cli", "check", "--staged"]
        out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"checked {args.staged} staged file(s)" in out.stdout, out.stdout
        times = []
        for _ in range(args.runs):
            t = time.perf_counter()
            subprocess.run(cmd, cwd=root, env=env, capture_output=True, check=True)
            times.append(time.perf_counter() - t)
        startup = []
        for _ in range(args.runs):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import casstore.cli"], env=env, check=True)
            startup.append(time.perf_counter() - t)

        os.environ.update({k: env[k] for k in ("CASSTORE_CACHE_DIR", "CASSTORE_CONFIG_DIR", "HOME")})
        from casstore.ops.check import check
        from casstore.project import Project

        inproc = []
        for _ in range(args.runs):
            t = time.perf_counter()
            rep = check(Project.discover(root), staged=True)
            inproc.append(time.perf_counter() - t)
            assert rep.ok and len(rep.files) == args.staged

    med = statistics.median(times)
    print(f"repo: {args.cassettes} cassettes ({size / 1e6:.1f} MB of working copies), {args.staged} staged")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpu, Python {platform.python_version()}, "
          f"{platform.system()} {platform.release()}")
    print(f"casstore check --staged (fresh process, as the hook runs it): median {med:.3f} s "
          f"(min {min(times):.3f}, max {max(times):.3f}, {args.runs} runs)")
    print(f"  of which interpreter start + import casstore.cli: median {statistics.median(startup):.3f} s")
    print(f"  check(project, staged=True) in process: median {statistics.median(inproc) * 1000:.0f} ms")
    print("target: < 1 s -> " + ("OK" if med < 1.0 else "MISSED"))
    return 0 if med < 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
