"""Where a recording comes from: the commit, branch and dirty flag of its git working tree."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import CasstoreError
from ..model.defaults import LOCK_FILE
from ..project import Project
from .plumbing import git_output
from .repo import GitRepo

__all__ = ["provenance"]


def _status_paths(git_root: Path) -> list[str] | None:
    out = git_output(git_root, ["status", "--porcelain=v1", "-z", "--untracked-files=no", "--ignore-submodules=dirty"],
                     env={"GIT_OPTIONAL_LOCKS": "0"})
    if out is None:
        return None
    paths = []
    fields = out.split(b"\0")
    i = 0
    while i < len(fields):
        f = fields[i]
        i += 1
        if len(f) < 4:
            continue
        paths.append(f[3:].decode("utf-8", "surrogateescape"))
        if f[:1] in (b"R", b"C"):
            i += 1  # the rename source follows
    return paths


def provenance(root: Path | str, *, ignore: Iterable[str] | None = None) -> dict[str, Any]:
    """HEAD's ``commit``, the ``branch`` (None when detached), and whether tracked files other than
    the lock, the cassette dir and ``ignore`` are ``dirty``; outside git every value is None."""
    try:
        repo = GitRepo(root)
    except CasstoreError:
        return {"commit": None, "branch": None, "dirty": None}
    head = repo.head()
    skip: list[str] = list(ignore or [])
    try:
        project = Project.discover(root)
        for p in (project.lock_path, project.cassette_dir):
            skip.append(p.resolve().relative_to(repo.root.resolve()).as_posix())
    except (CasstoreError, ValueError, OSError):
        skip.append(LOCK_FILE)
    paths = _status_paths(repo.root)
    dirty = None if paths is None else any(
        not any(p == s or p.startswith(s.rstrip("/") + "/") for s in skip) for p in paths
    )
    return {"commit": head.decode() if head else None, "branch": repo.branch(), "dirty": dirty}
