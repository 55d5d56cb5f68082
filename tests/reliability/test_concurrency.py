"""Concurrent writers: nothing lost, no torn file.

- 8 processes push overlapping sets of cassettes to one bucket (moto on 127.0.0.1) and to
  one local folder store at the same moment: every object arrives whole, exactly once.
- 2 processes pin cassettes in one repository at the same time (many read-modify-write
  cycles of ``casstore.lock`` each), while a reader keeps parsing the lock: every pin of
  both writers is kept, and the reader never sees a torn lock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from casstore.model import cassette
from casstore.model.blob import decompress_verified
from casstore.model.lock import parse_lock
from casstore.store.backends import object_key
from tests.helpers.cassettes import make_cassette
from tests.helpers.commands import git
from tests.helpers.figures import record

SECTION = "concurrent writers"
WRITERS = 8


def _write_many(root: Path, n: int, *, prefix: str = "c", entries: int = 6) -> list[str]:
    cdir = root / "tests" / "cassettes"
    cdir.mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(n):
        name = f"{prefix}{i:03d}"
        (cdir / f"{name}.json").write_text(json.dumps(make_cassette(name, n=entries)))
        names.append(name)
    return names


def _run_all(cmds: list[list[str]], cwd: Path) -> list[subprocess.CompletedProcess]:
    """Start every command at once, wait for all."""
    env = os.environ.copy()
    procs = [subprocess.Popen(c, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c in cmds]
    out = []
    for p, c in zip(procs, cmds, strict=True):
        so, se = p.communicate(timeout=240)
        out.append(subprocess.CompletedProcess(c, p.returncode, so, se))
    return out


@pytest.mark.parametrize("backend", ["s3", "local"])
def test_eight_processes_push_overlapping_cassettes(tmp_path, repo, casstore, s3_server, s3_url, backend,
                                                    monkeypatch):
    n = 40
    names = _write_many(repo, n)
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    remote = s3_url if backend == "s3" else str(tmp_path / "shared-store")
    monkeypatch.setenv("CASSTORE_REMOTE", remote)
    # writer i pushes 15 names starting at 5*i: every cassette is pushed by 3 writers at once
    subsets = [[names[(5 * i + j) % n] for j in range(15)] for i in range(WRITERS)]
    cmds = [[sys.executable, "-m", "casstore.cli", "push", "-q", "--jobs", "4", *s] for s in subsets]
    results = _run_all(cmds, repo)
    for r in results:
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr
    pushed = sum(int(r.stdout.split()[1]) for r in results)  # "pushed N cassette(s), ..."
    assert pushed >= n  # each object uploaded at least once (races may upload one twice)
    r = casstore("verify", "--remote", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert f"verified {n}/{n}" in r.stdout
    lock = parse_lock((repo / "casstore.lock").read_bytes())
    if backend == "s3":
        bucket, prefix = s3_url[len("s3://"):].split("/", 1)
        s3 = s3_server.client()
        for pin in lock.pins.values():
            body = s3.get_object(Bucket=bucket, Key=f"{prefix}/{object_key(pin.digest)}")["Body"].read()
            decompress_verified(body, pin.digest, pin.size)
    else:
        store = Path(remote)
        for pin in lock.pins.values():
            decompress_verified((store / object_key(pin.digest)).read_bytes(), pin.digest, pin.size)
        assert not [p for p in store.rglob(".*") if p.is_file()], "temp files left by concurrent writers"
    record(SECTION, push_processes=WRITERS, push_overlapping_uploads=WRITERS * 15, cassettes_lost=0)


ADDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from casstore.ops.add import add
    from casstore.project import Project

    root = Path(sys.argv[1])
    for path in sys.argv[2:]:
        add(Project.discover(root), [Path(path)])  # one read-modify-write of the lock each
    print("ok", flush=True)
    """
)


def test_two_processes_add_to_one_repo(tmp_path, repo, casstore):
    per = 25
    a = _write_many(repo, per, prefix="a")
    b = _write_many(repo, per, prefix="b")
    script = tmp_path / "adder.py"
    script.write_text(ADDER)
    files = {k: [str(repo / "tests" / "cassettes" / f"{x}.json") for x in v] for k, v in (("a", a), ("b", b))}
    stop = threading.Event()
    seen = {"reads": 0, "torn": 0, "shrank": 0}

    def reader() -> None:
        last = 0
        lock = repo / "casstore.lock"
        while not stop.is_set():
            try:
                data = lock.read_bytes()
            except FileNotFoundError:
                continue
            try:
                count = len(parse_lock(data).pins)
            except Exception:
                seen["torn"] += 1
                continue
            seen["reads"] += 1
            if count < last:
                seen["shrank"] += 1
            last = max(last, count)
            time.sleep(0.001)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        results = _run_all([[sys.executable, str(script), str(repo), *files["a"]],
                            [sys.executable, str(script), str(repo), *files["b"]]], repo)
    finally:
        stop.set()
        t.join(timeout=10)
    for r in results:
        assert r.returncode == 0, r.stderr
    pins = set(parse_lock((repo / "casstore.lock").read_bytes()).pins)
    assert pins == set(a) | set(b), f"lost pins: {sorted(set(a) | set(b) - pins)}"
    assert seen["torn"] == 0 and seen["shrank"] == 0, seen
    assert seen["reads"] > 0
    r = casstore("verify", cwd=repo)
    assert r.exit_code == 0 and f"verified {2 * per}/{2 * per}" in r.stdout, r.stderr
    record(SECTION, add_processes=2, lock_updates=2 * per, pins_kept=len(pins), lock_reads_while_writing=seen["reads"],
           torn_lock_reads=0)


def test_two_cli_adds_at_once(tmp_path, repo, casstore):
    a = _write_many(repo, 20, prefix="x")
    b = _write_many(repo, 20, prefix="y")
    cdir = repo / "tests" / "cassettes"
    cmd = [sys.executable, "-m", "casstore.cli", "add"]
    results = _run_all([cmd + [str(cdir / f"{x}.json") for x in a], cmd + [str(cdir / f"{x}.json") for x in b]],
                       repo)
    for r in results:
        assert r.returncode == 0, r.stderr
    assert set(parse_lock((repo / "casstore.lock").read_bytes()).pins) == set(a) | set(b)
    git("status", cwd=repo)


XDIST_RECORD = textwrap.dedent(
    """
    import casstore
    import pytest


    def double(x):
        return {"v": x * 2, "pad": "x" * 400}


    @pytest.mark.parametrize("i", range(32))
    def test_record_distinct(i):
        with casstore.use(f"w/c{i:02d}", mode="record"):
            for j in range(5):
                assert casstore.tool("double", double)(i * 10 + j)["v"] == (i * 10 + j) * 2


    def test_record_shared():
        with casstore.use("shared/one", mode="record"):
            casstore.tool("double", double)(21)
    """
)

XDIST_REPLAY = textwrap.dedent(
    """
    import casstore
    import pytest


    def boom(x):
        raise AssertionError("replay must not run the tool")


    @pytest.mark.parametrize("i", range(32))
    def test_replay_shared(i):
        with casstore.use("shared/one", mode="replay"):
            assert casstore.tool("double", boom)(21)["v"] == 42
    """
)


def _pytest_n(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **(env or {})}
    full.pop("CI", None)
    full.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                           "casstore.replay.pytest_plugin", "-p", "xdist.plugin", "-n", str(WRITERS), *args],
                          cwd=cwd, env=full, capture_output=True, text=True, timeout=300, check=False)


def test_eight_xdist_workers_record_distinct_and_replay_one(tmp_path, repo, casstore, monkeypatch):
    (repo / "test_rec.py").write_text(XDIST_RECORD)
    (repo / "test_rep.py").write_text(XDIST_REPLAY)
    run = _pytest_n(repo, "test_rec.py")
    assert "33 passed" in run.stdout, run.stdout + run.stderr
    cdir = repo / "tests" / "cassettes"
    for i in range(32):  # every worker's cassette is there, whole, with all its calls
        cas = cassette.load_file(cdir / "w" / f"c{i:02d}.json")
        assert len(cas.entries) == 5
    assert not [p for p in cdir.rglob(".*") if p.is_file()], "temp files left by the workers"
    r = casstore("add", "tests/cassettes", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert casstore("push", cwd=repo).exit_code == 0
    # a fresh CI machine: 8 workers replay one pinned cassette, all fetching it lazily at once
    (cdir / "shared" / "one.json").unlink()  # no working copy: the pinned object must be used
    fresh = tmp_path / "ci-cache"
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(fresh))
    run = _pytest_n(repo, "test_rep.py", env={"CASSTORE_OFFLINE": "1"})
    assert "32 passed" in run.stdout, run.stdout + run.stderr
    objects = [p for p in fresh.rglob("*") if p.is_file() and "objects" in p.parts]
    assert len(objects) == 1 and not objects[0].name.startswith(".")
    assert casstore("verify", "shared/one", cwd=repo).exit_code == 0
    record(SECTION, xdist_workers_recording=WRITERS, cassettes_recorded_in_parallel=33,
           xdist_workers_replaying_one=WRITERS, replays=32)
