"""Store faults: a flaky S3 (through a fault-injecting proxy), a read-only store, a full disk.

push, pull, verify and lazy fetches retry transient failures with backoff and a bounded
total time, never leave a partial object, and after the retries give one clear error that
names what failed and the last cause. Real components only: the moto S3 server on
127.0.0.1, a real proxy in front of it, real (tmpfs) file systems.
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import subprocess
from pathlib import Path

import pytest

from casstore.model.blob import decompress_verified
from casstore.model.lock import parse_lock
from casstore.store import retry
from casstore.store.backends import object_key
from tests.helpers.cassettes import make_cassette
from tests.helpers.commands import git
from tests.helpers.faultproxy import FaultPlan, FaultProxy
from tests.helpers.figures import record

SECTION = "store faults (S3 through the fault proxy)"
FAST_RETRIES = {
    "CASSTORE_RETRY_BASE_DELAY": "0.005",
    "CASSTORE_RETRY_MAX_DELAY": "0.05",
    "CASSTORE_RETRY_ATTEMPTS": "12",
    "CASSTORE_RETRY_DEADLINE": "30",
}


@pytest.fixture
def proxy(s3_server, s3_url, monkeypatch):
    """A fault proxy in front of moto; AWS_ENDPOINT_URL points at the proxy."""
    p = FaultProxy(s3_server.endpoint).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", p.url)
    for k, v in FAST_RETRIES.items():
        monkeypatch.setenv(k, v)
    before = retry.STATS.snapshot()
    try:
        yield p
    finally:
        p.stop()
        c = p.counters
        after = retry.STATS.snapshot()
        record(SECTION, requests=c.seen, failed=c.failed,
               **{f"failed_{k}": v for k, v in sorted(c.by_kind.items())},
               retries=after["retries"] - before["retries"],
               calls_recovered=after["recovered"] - before["recovered"],
               calls_given_up=after["gave_up"] - before["gave_up"])


def _init(root: Path, casstore, s3_url: str, *, timeout: float = 2.0) -> Path:
    root.mkdir()
    git("init", "-q", cwd=root)
    r = casstore("init", "--remote", s3_url, cwd=root)
    assert r.exit_code == 0, r.stderr
    cfg = root / "casstore.toml"
    text = cfg.read_text().replace(
        "# options = ",
        f"options = {{ config_kwargs = {{ connect_timeout = {timeout}, read_timeout = {timeout} }} }}\n# ",
    )
    cfg.write_text(text)
    return root


def _add_many(root: Path, casstore, n: int, *, entries: int = 3, prefix: str = "c") -> list[str]:
    names = []
    for i in range(n):
        name = f"{prefix}{i:03d}"
        path = root / "tests" / "cassettes" / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(make_cassette(name, n=entries)))
        names.append(name)
    r = casstore("add", "tests/cassettes", cwd=root)
    assert r.exit_code == 0, r.stderr
    return names


def _bucket_objects(s3_server, s3_url: str) -> dict[str, bytes]:
    """Everything under the store prefix, read straight from moto (no proxy)."""
    bucket, prefix = s3_url[len("s3://"):].split("/", 1)
    s3 = s3_server.client()
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for o in page.get("Contents", []):
            out[o["Key"][len(prefix) + 1:]] = s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
    return out


def _assert_store_complete(s3_server, s3_url: str, root: Path, names: list[str]) -> None:
    lock = parse_lock((root / "casstore.lock").read_bytes())
    objs = _bucket_objects(s3_server, s3_url)
    for name in names:
        pin = lock.pins[name]
        frame = objs.get(object_key(pin.digest))
        assert frame is not None, f"{name} lost"
        decompress_verified(frame, pin.digest, pin.size)  # complete and exact, or raises
    for key in objs:
        assert not key.rsplit("/", 1)[-1].startswith("."), f"temp object left: {key}"


def _error_lines(r) -> list[str]:  # type: ignore[no-untyped-def]
    assert "Traceback" not in r.stderr, r.stderr
    return [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]


def test_push_pull_verify_survive_a_flaky_store(tmp_path, casstore, s3_server, s3_url, proxy, monkeypatch):
    root = _init(tmp_path / "work", casstore, s3_url)
    names = _add_many(root, casstore, 30)
    before = retry.STATS.snapshot()
    proxy.set_plan(FaultPlan(share=0.3, kinds=("500", "503", "reset"), seed=7, after_share=0.3))
    r = casstore("push", "--jobs", "8", cwd=root)
    assert r.exit_code == 0, r.stderr
    assert "pushed 30 cassette(s)" in r.stdout
    _assert_store_complete(s3_server, s3_url, root, names)
    r = casstore("verify", "--remote", cwd=root)
    assert r.exit_code == 0, r.stderr
    assert "verified 30/30" in r.stdout
    # a fresh machine pulls everything through the same flaky store
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(tmp_path / "fresh-cache"))
    r = casstore("pull", "--frozen", "--jobs", "8", cwd=root)
    assert r.exit_code == 0, r.stderr
    assert "fetched 30 cassette(s)" in r.stdout
    r = casstore("verify", cwd=root)
    assert r.exit_code == 0 and "verified 30/30" in r.stdout, r.stderr
    after = retry.STATS.snapshot()
    retried = after["retries"] - before["retries"]
    assert proxy.counters.failed > 10, proxy.counters  # the faults really happened ...
    assert retried >= proxy.counters.failed * 0.5, (retried, proxy.counters)  # ... and were retried
    assert after["gave_up"] == before["gave_up"]
    record(SECTION, cassettes_through_faults=60, cassettes_lost=0)


def test_stalled_responses_time_out_and_are_retried(tmp_path, casstore, s3_server, s3_url, proxy):
    root = _init(tmp_path / "work", casstore, s3_url, timeout=0.3)
    names = _add_many(root, casstore, 6)
    proxy.set_plan(FaultPlan(share=0.15, kinds=("stall",), seed=3, stall_seconds=2))
    r = casstore("push", "--jobs", "4", cwd=root)
    assert r.exit_code == 0, r.stderr
    assert proxy.counters.by_kind["stall"] >= 1, proxy.counters  # stalled, timed out, retried, done
    _assert_store_complete(s3_server, s3_url, root, names)


def test_a_dead_store_gives_one_clear_error_in_bounded_time(tmp_path, casstore, s3_server, s3_url, proxy,
                                                            monkeypatch):
    root = _init(tmp_path / "work", casstore, s3_url)
    _add_many(root, casstore, 12)
    monkeypatch.setenv("CASSTORE_RETRY_ATTEMPTS", "4")
    monkeypatch.setenv("CASSTORE_RETRY_DEADLINE", "2")
    # every request fails: the listing gives up, push stops with one line
    proxy.set_plan(FaultPlan(share=1.0, kinds=("503",), seed=1))
    r = casstore("push", cwd=root)
    assert r.exit_code == 1
    lines = _error_lines(r)
    assert len(lines) == 2 and lines[-1] == "error: 1 cassette(s) failed", lines
    # 4 attempts, or fewer when a loaded machine spends the 2 s deadline on the first ones
    assert "cannot list objects/" in lines[0] and re.search(r"gave up after [1-4] attempts?", lines[0]), lines
    assert "SlowDown (HTTP 503)" in lines[0], lines
    # only PUTs fail: each cassette names its key and the last cause; the breaker keeps it short
    proxy.set_plan(FaultPlan(share=1.0, kinds=("500",), methods=("PUT",), seed=2))
    puts_before = proxy.counters.by_method["PUT"]
    r = casstore("push", cwd=root)
    puts = proxy.counters.by_method["PUT"] - puts_before
    assert r.exit_code == 1
    lines = _error_lines(r)
    # twelve cassettes failing for one cause (retries given up, or the breaker open): a
    # couple named in full per cause, the rest counted
    assert 4 <= len(lines) <= 8 and lines[-1] == "error: 12 cassette(s) failed", lines
    counted = 0
    for ln in lines[:-1]:
        assert "HTTP 500" in ln, ln
        m = re.match(r"error: … and (\d+) more cassette\(s\) with the same error \(", ln)
        if m:
            counted += int(m.group(1))
        else:
            assert "upload of objects/sha256/" in ln, ln
            counted += 1
    assert counted == 12, lines
    assert puts <= 12 * 4, puts  # bounded by the attempts (fewer once the breaker opens), not by a clock
    assert _bucket_objects(s3_server, s3_url) == {}  # nothing partial, nothing at all
    record(SECTION, clear_errors_after_retries=13)


def test_pull_and_lazy_fetch_name_the_cassette_after_retries(tmp_path, casstore, s3_server, s3_url, proxy,
                                                            monkeypatch):
    root = _init(tmp_path / "work", casstore, s3_url)
    _add_many(root, casstore, 3)
    assert casstore("push", cwd=root).exit_code == 0
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(tmp_path / "fresh-cache"))
    monkeypatch.setenv("CASSTORE_RETRY_ATTEMPTS", "3")
    monkeypatch.setenv("CASSTORE_RETRY_DEADLINE", "2")
    # lazy fetch (what replay does for a pinned cassette missing from the cache) recovers ...
    proxy.set_plan(FaultPlan(share=0.5, kinds=("500", "reset"), methods=("GET",), seed=11))
    from casstore.project import Project

    monkeypatch.setenv("CASSTORE_RETRY_ATTEMPTS", "20")
    project = Project.discover(root)
    cas = project.resolve_cassette("c001")
    assert cas is not None and cas.name == "c001"
    # ... and, when the store keeps failing, says which cassette and why
    monkeypatch.setenv("CASSTORE_RETRY_ATTEMPTS", "3")
    proxy.set_plan(FaultPlan(share=1.0, kinds=("503",), methods=("GET",), seed=12))
    r = casstore("show", "c002", cwd=root)
    assert r.exit_code == 1
    (line,) = _error_lines(r)
    assert line.startswith("error: c002: cannot read objects/sha256/"), line
    assert "gave up after 3 attempts" in line and "SlowDown" in line, line
    r = casstore("pull", "--frozen", cwd=root)
    assert r.exit_code == 1
    lines = _error_lines(r)
    assert lines[:-1] and all("gave up after" in ln for ln in lines[:-1]), lines
    assert {ln.split(":")[1].strip() for ln in lines[:-1]} == {"c000", "c002"}, lines
    cached = [p for p in (tmp_path / "fresh-cache").rglob("*") if p.is_file()]
    assert all("c001" not in str(p) for p in cached)
    assert len([p for p in cached if "/objects/" in p.as_posix()]) == 1  # only the one fetched


def test_retry_policy_is_bounded_and_classifies():
    policy = retry.RetryPolicy(attempts=100, base_delay=0.5, max_delay=2, deadline=3)
    clock = [0.0]
    slept = []

    def sleep(s: float) -> None:
        slept.append(s)
        clock[0] += s

    def fail() -> None:
        raise ConnectionResetError(104, "Connection reset by peer")

    with pytest.raises(Exception) as ei:
        retry.call(fail, what="cannot read k from u", policy=policy, sleep=sleep, clock=lambda: clock[0])
    assert "gave up after" in str(ei.value) and "Connection reset by peer" in str(ei.value)
    assert clock[0] <= 3 and all(s <= 2 for s in slept)
    calls = []

    def missing() -> None:
        calls.append(1)
        raise FileNotFoundError("nope")

    with pytest.raises(FileNotFoundError):
        retry.call(missing, what="x", policy=policy, sleep=sleep)
    assert len(calls) == 1  # permanent errors are not retried
    assert retry.is_transient(TimeoutError()) and not retry.is_transient(PermissionError())


# -- local store: read-only and full ----------------------------------------------------
def _mount_tmpfs(path: Path, *options: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs (a size-limited file system)")
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(("size=1m", *options)), "tmpfs", str(path)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in this sandbox: {r.stderr.strip()}")


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "small"
    _mount_tmpfs(mnt)
    yield mnt
    _umount(mnt)


def _noise_cassette(name: str, rng: random.Random, kib: int) -> dict:
    data = make_cassette(name, n=1)
    data["entries"][0]["response"]["body"] = {"noise": rng.randbytes(kib * 1024).hex()}
    return data


def test_full_disk_store_fails_cleanly(tmp_path, casstore, small_disk):
    root = tmp_path / "work"
    root.mkdir()
    git("init", "-q", cwd=root)
    assert casstore("init", "--remote", str(small_disk / "store"), cwd=root).exit_code == 0
    rng = random.Random(5)
    cdir = root / "tests" / "cassettes"
    cdir.mkdir(parents=True, exist_ok=True)
    for i in range(12):  # ~12 x 140 KiB of barely compressible frames onto a 1 MiB disk
        (cdir / f"n{i:02d}.json").write_text(json.dumps(_noise_cassette(f"n{i:02d}", rng, 128)))
    assert casstore("add", "tests/cassettes", cwd=root).exit_code == 0
    r = casstore("push", "--jobs", "4", cwd=root)
    assert r.exit_code == 1
    lines = _error_lines(r)
    assert lines and all(os.strerror(errno.ENOSPC) in ln for ln in lines[:-1]), lines
    assert lines[-1].endswith("cassette(s) failed")
    written = [p for p in (small_disk / "store").rglob("*") if p.is_file()]
    assert not [p for p in written if p.name.startswith(".")], "temp files left behind"
    # what is under a final name is complete; verify --remote reports only missing objects
    r = casstore("verify", "--remote", cwd=root)
    problems = _error_lines(r)
    assert problems and all("missing" in ln for ln in problems), problems
    # free the disk (another store) and a rerun completes
    cfg = root / "casstore.toml"
    cfg.write_text(cfg.read_text().replace(str(small_disk / "store"), str(tmp_path / "big-store")))
    assert casstore("push", cwd=root).exit_code == 0
    r = casstore("verify", "--remote", cwd=root)
    assert r.exit_code == 0 and "verified 12/12" in r.stdout, r.stderr
    record("local store faults", full_disk_pushes=1, partial_objects_left=0)


def test_full_disk_cache_and_lock_fail_cleanly(tmp_path, casstore, small_disk, monkeypatch):
    root = tmp_path / "work"
    root.mkdir()
    git("init", "-q", cwd=root)
    assert casstore("init", cwd=root).exit_code == 0
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(small_disk / "cache"))
    rng = random.Random(6)
    cdir = root / "tests" / "cassettes"
    cdir.mkdir(parents=True, exist_ok=True)
    for i in range(12):
        (cdir / f"n{i:02d}.json").write_text(json.dumps(_noise_cassette(f"n{i:02d}", rng, 128)))
    r = casstore("add", "tests/cassettes", cwd=root)
    assert r.exit_code == 1
    (line,) = _error_lines(r)
    assert os.strerror(errno.ENOSPC) in line, line
    assert not (root / "casstore.lock").exists()  # all or nothing
    leftovers = [p for p in (small_disk / "cache").rglob(".*") if p.is_file()]
    assert not leftovers, leftovers


def test_read_only_store_fails_cleanly(tmp_path, casstore):
    root = tmp_path / "work"
    root.mkdir()
    git("init", "-q", cwd=root)
    store = tmp_path / "ro-store"
    assert casstore("init", "--remote", str(store), cwd=root).exit_code == 0
    _add_many(root, casstore, 2, prefix="a")
    assert casstore("push", cwd=root).exit_code == 0
    if os.geteuid() == 0:  # root ignores permission bits: make it a read-only mount instead
        r = subprocess.run(["mount", "--bind", "-o", "ro", str(store), str(store)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot make a read-only bind mount here: {r.stderr.strip()}")
        undo = lambda: _umount(store)  # noqa: E731
    else:
        for d in [store, *store.rglob("*")]:
            if d.is_dir():
                d.chmod(0o555)
        undo = lambda: [d.chmod(0o755) for d in [store, *store.rglob("*")] if d.is_dir()]  # noqa: E731
    try:
        _add_many(root, casstore, 3, prefix="b")
        r = casstore("push", cwd=root)
        assert r.exit_code == 1
        lines = _error_lines(r)
        assert len(lines) == 4, lines
        for ln in lines[:-1]:
            assert "upload of objects/sha256/" in ln
            assert os.strerror(errno.EROFS) in ln or os.strerror(errno.EACCES) in ln, ln
        # reading still works: a fresh cache pulls the two that were pushed
        r = casstore("pull", "a000", "a001", cwd=root)
        assert r.exit_code == 0, r.stderr
    finally:
        undo()
    assert not [p for p in store.rglob(".*") if p.is_file()]
    record("local store faults", read_only_pushes=1, partial_objects_left=0)


@pytest.mark.parametrize("code", ["\u00b2", "\u0665\u0660\u0660", "AccessDenied", "5" * 5000])
def test_an_error_code_of_unicode_digits_is_neither_a_crash_nor_a_5xx(monkeypatch, code):
    """The retry classifier read an S3 error's Code with str.isdigit() and int(): "²" (a
    digit to isdigit, not to int) made every store call fail with "invalid literal for
    int()" in place of the server's answer, and "٥٠٠" was taken for 500 and retried. A stub
    S3 on 127.0.0.1 answers every request 403 with that code; 5000 ASCII digits went past
    int()'s digit limit ("Exceeds the limit ... for integer string conversion") likewise."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from casstore.errors import CasstoreError
    from casstore.store.fsspec_store import FsspecStore

    body = f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>no</Message></Error>".encode()

    class Stub(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.send_response(403)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_HEAD = do_PUT = _answer  # noqa: N815

        def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
            pass

    for var, value in (("AWS_ACCESS_KEY_ID", "testing-" + "x" * 8), ("AWS_SECRET_ACCESS_KEY", "testing-" + "y" * 16),
                       ("AWS_DEFAULT_REGION", "us-east-1"), *FAST_RETRIES.items()):
        monkeypatch.setenv(var, value)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        store = FsspecStore("s3://bkt-stub/cassettes", {"endpoint_url": f"http://127.0.0.1:{server.server_address[1]}"})
        with pytest.raises((CasstoreError, OSError)) as exc:
            store.read("objects/sha256/ab/" + "c" * 62)
        # the server's answer, not retried (a 403): as for the control, AccessDenied
        # (a 5000-digit code: int()'s digit limit, "integer string conversion"; the message keeps its start)
        text = str(exc.value)
        assert code[:100] in text and "invalid literal" not in text and "string conversion" not in text, text[:300]
        assert "gave up after" not in str(exc.value), exc.value
    finally:
        server.shutdown()
        server.server_close()
