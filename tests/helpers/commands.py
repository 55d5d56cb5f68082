"""The repository root, ``git``, the installed CLI as a real process, and a refusal's checks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["REPO", "Run", "git", "merge_conflict", "run_casstore_subprocess", "refused"]

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Run:
    """What the in-process CLI runner (the ``casstore`` fixture) returns."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def json(self):  # type: ignore[no-untyped-def]
        return json.loads(self.stdout)


def run_casstore_subprocess(*args: str, cwd: Path, env: dict[str, str] | None = None,
                            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The installed ``casstore`` as a user runs it (a real process)."""
    exe = shutil.which("casstore")
    cmd = [exe, *args] if exe else [sys.executable, "-m", "casstore.cli", *args]
    return subprocess.run(cmd, cwd=cwd, env=env or os.environ.copy(), capture_output=True, text=True,
                          timeout=timeout, check=False)


def git(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=check)


def init_repo(root: Path, casstore: Any) -> Path:
    """A new git repository at ``root`` where `casstore init` has run (``casstore``: the
    in-process CLI fixture)."""
    root.mkdir(parents=True)
    git("init", "-q", cwd=root)
    r = casstore("init", cwd=root)
    assert r.exit_code == 0, r.stderr
    return root


def merge_conflict(cwd: Path, theirs: Callable[[], object], ours: Callable[[], object]) -> None:
    """Branch ``other`` commits what ``theirs`` writes, the current branch what ``ours``
    writes, and merging ``other`` stops on the conflict."""
    git("checkout", "-q", "-b", "other", cwd=cwd)
    theirs()
    git("commit", "-q", "-am", "theirs", cwd=cwd)
    git("checkout", "-q", "-", cwd=cwd)
    ours()
    git("commit", "-q", "-am", "ours", cwd=cwd)
    assert git("merge", "-q", "other", cwd=cwd, check=False).returncode != 0


def refused(r: Any, *needles: str, code: int | None = None) -> str:
    """A clean refusal: exit 1 or 2 (exactly ``code`` when given), no traceback, an ``error:``
    line on stderr, every needle in stderr. Returns the first ``error:`` line."""
    assert r.exit_code in (1, 2), (r.exit_code, r.stdout, r.stderr)
    if code is not None:
        assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert lines, r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)
    return lines[0]
