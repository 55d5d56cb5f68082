"""What transfers print: a progress bar on a terminal, one summary line in CI logs.

On a terminal (a real pty, CI unset) ``push`` and ``pull`` show progress by bytes and by
objects, for loose objects and for packs alike. When stderr is not a terminal each
command prints one summary line and no line per object, unless ``-v`` asks for them.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

from tests.helpers.cassettes import write_cassette
from tests.helpers.commands import REPO, git, run_casstore_subprocess

N = 6


def _project(root: Path, casstore, remote: str | None = None, pack_threshold: int | None = None) -> Path:  # type: ignore[no-untyped-def]
    root.mkdir()
    git("init", "-q", cwd=root)
    args = ["init"] + (["--remote", remote] if remote else [])
    assert casstore(*args, cwd=root).exit_code == 0
    if pack_threshold is not None:
        cfg = root / "casstore.toml"
        text = cfg.read_text(encoding="utf-8")
        assert "[remote]" in text, text
        cfg.write_text(text.replace("[remote]\n", f"[remote]\npack_threshold = {pack_threshold}\n", 1))
    for i in range(N):
        write_cassette(root, f"case_{i}", n=3)
    assert casstore("add", "tests/cassettes", cwd=root).exit_code == 0
    return root


def _env(**extra: str) -> dict[str, str]:
    env = os.environ.copy()
    env.pop("CI", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def _on_a_terminal(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run ``casstore ARGS`` with stdout and stderr on a pty; return its exit code and screen text."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a 120-column terminal
    proc = subprocess.Popen([sys.executable, "-m", "casstore.cli", *args], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            proc.kill()
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the pty
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    code = proc.wait(timeout=60)
    return code, b"".join(chunks).decode("utf-8", "replace")


def _bar_shows_bytes_and_objects(screen: str, verb: str) -> None:
    frames = re.split(r"[\r\n]+", screen)
    last = [f for f in frames if verb in f and f"{N}/{N} objects" in f]
    assert last, screen
    assert re.search(r"\d+(\.\d+)?[kMG]?i?B/\d+(\.\d+)?[kMG]?i?B\b", last[-1]), last[-1]  # bytes done/total


def test_loose_push_and_pull_show_bytes_and_objects_on_a_terminal(tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    root = _project(tmp_path / "p", casstore, remote=str(tmp_path / "shared"))
    code, screen = _on_a_terminal(["push"], root, _env())
    assert code == 0, screen
    _bar_shows_bytes_and_objects(screen, "push")
    code, screen = _on_a_terminal(["pull"], root, _env(CASSTORE_CACHE_DIR=str(tmp_path / "cache2")))
    assert code == 0, screen
    _bar_shows_bytes_and_objects(screen, "pull")


def test_packed_push_shows_bytes_and_objects_on_a_terminal(tmp_path: Path, casstore, s3_server, s3_url: str) -> None:  # type: ignore[no-untyped-def]
    root = _project(tmp_path / "p", casstore, remote=s3_url, pack_threshold=2)
    code, screen = _on_a_terminal(["push"], root, _env())
    assert code == 0, screen
    _bar_shows_bytes_and_objects(screen, "push")
    bucket, prefix = s3_url[len("s3://"):].split("/", 1)
    keys = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert any(k.startswith(prefix + "/packs/") for k in keys), keys  # the objects went in a pack
    assert not any(k.startswith(prefix + "/objects/") for k in keys), keys
    code, screen = _on_a_terminal(["pull"], root, _env(CASSTORE_CACHE_DIR=str(tmp_path / "cache2")))
    assert code == 0, screen
    _bar_shows_bytes_and_objects(screen, "pull")


def test_not_a_terminal_one_summary_line_and_per_object_lines_only_with_v(tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    root = _project(tmp_path / "p", casstore, remote=str(tmp_path / "shared"))
    res = run_casstore_subprocess("push", cwd=root, env=_env())
    assert res.returncode == 0, res.stderr
    assert res.stderr == "", res.stderr
    assert len(res.stdout.strip().splitlines()) == 1 and f"pushed {N} cassette(s)" in res.stdout, res.stdout

    res = run_casstore_subprocess("pull", cwd=root, env=_env(CASSTORE_CACHE_DIR=str(tmp_path / "c2")))
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert len(res.stdout.strip().splitlines()) == 1 and f"fetched {N} cassette(s)" in res.stdout, res.stdout

    res = run_casstore_subprocess("pull", "-v", cwd=root, env=_env(CASSTORE_CACHE_DIR=str(tmp_path / "c3")))
    assert res.returncode == 0, res.stderr
    per_object = [line for line in res.stderr.splitlines() if line.startswith("pull: case_")]
    assert len(per_object) == N, res.stderr


def test_a_line_per_item_is_built_only_for_a_reporter_that_prints_lines() -> None:
    # a bar shows counts and bytes, a quiet run nothing: neither gets the per-item lines, so the
    # describe() that builds them is not called (a 1k pull's lines took ~4 ms to build for nothing)
    from casstore.store.transfer import BarReporter, LineReporter, NullReporter, run_parallel

    class Quiet(NullReporter):
        def __init__(self) -> None:
            self.seen: list[str] = []

        def advance(self, line: str, *, nbytes: int = 0, objects: int = 1, failed: bool = False) -> None:
            self.seen.append(line)

    class Lines(LineReporter):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []

        def advance(self, line: str, *, nbytes: int = 0, objects: int = 1, failed: bool = False) -> None:
            self.seen.append(line)

    described: list[int] = []

    def describe(item: int, res: int | None, err: BaseException | None) -> str:
        described.append(item)
        return f"item {item}"

    for reporter, jobs in ((Quiet(), 1), (Quiet(), 4), (Lines(), 1), (Lines(), 4)):
        described.clear()
        out = run_parallel(range(5), lambda x: x * 2, jobs=jobs, describe=describe, reporter=reporter, label="t")
        assert sorted(r for _, r, _ in out) == [0, 2, 4, 6, 8]
        if isinstance(reporter, Lines):
            assert sorted(reporter.seen) == [f"item {i}" for i in range(5)] and sorted(described) == list(range(5))
        else:
            assert reporter.seen == [""] * 5 and described == []
    assert BarReporter.lines is False and NullReporter.lines is False and getattr(LineReporter, "lines", True)


def test_a_failed_object_is_not_counted_as_moved(capsys) -> None:  # type: ignore[no-untyped-def]
    # the bar showed 100 % and every byte for a pull whose object had failed
    from casstore.store.transfer import BarReporter, run_parallel

    def fetch(item: int) -> int:
        if item == 2:
            raise OSError("reset")
        return item

    out = run_parallel([1, 2, 3], fetch, jobs=1, describe=lambda *a: "", reporter=BarReporter(), label="pull",
                       weigh=lambda item: (1, 1000))
    assert [err is not None for _, _, err in out] == [False, True, False]
    screen = capsys.readouterr().err.replace("\r", "\n").splitlines()[-1]
    assert "1 failed" in screen and "3/3 objects" in screen and " 67%" in screen, screen
    # binary units (as the summary's KiB), the failed object's bytes not counted; the numbers
    # as tqdm writes them, whatever its rounding
    from tqdm import tqdm

    done, total = (tqdm.format_sizeof(n, divisor=1024) for n in (2000, 3000))
    assert f"{done}iB/{total}iB" in screen, screen
