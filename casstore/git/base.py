"""The base a check compares with: ``--since REV``, else the merge base with the upstream."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..project import Project
from .repo import GitRepo

__all__ = ["Base", "resolve_base", "upstream_merge_base"]


@dataclass(frozen=True)
class Base:
    """The revision a check compares with: ``label`` for messages, ``sha`` (None: no base)."""

    label: str  # "main", "the merge base with origin/main", "(no upstream: every pin)"
    sha: bytes | None
    rev: str  # what to pass back to git (--trust-from): the user's REV or the merge base's sha


def upstream_merge_base(repo: GitRepo) -> tuple[str, bytes] | None:
    """(upstream name, merge-base sha) of HEAD's branch, or None when there is no upstream."""
    from dulwich.graph import find_merge_base

    branch = repo.branch()
    head = repo.head()
    if branch is None or head is None:
        return None
    cfg = repo.repo.get_config()
    section = (b"branch", branch.encode())
    try:
        remote = cfg.get(section, b"remote")
        merge = cfg.get(section, b"merge")
    except KeyError:
        return None
    if not remote or not merge:
        return None
    short = merge[len(b"refs/heads/"):] if merge.startswith(b"refs/heads/") else merge
    ref = merge if remote == b"." else b"refs/remotes/" + remote + b"/" + short
    try:
        refs: Any = repo.repo.refs  # dulwich types ref names as Ref
        tip = refs[ref]
    except KeyError:
        return None
    name = (short if remote == b"." else remote + b"/" + short).decode("utf-8", "replace")
    commits: list[Any] = [head, tip]  # dulwich types commit ids as ObjectID
    bases = find_merge_base(repo.repo, commits)
    return (name, bases[0]) if bases else None


def resolve_base(project: Project, since: str | None) -> Base:
    """``--since REV`` resolved, else the merge base with the upstream branch, else no base."""
    try:
        repo = GitRepo(project.root)
    except UsageError:
        if since is not None:
            raise
        return Base("(not a git repository: every pin)", None, "")
    if since is not None:
        return Base(since, repo.resolve(since), since)
    found = upstream_merge_base(repo)
    if found is None:
        return Base("(no upstream branch: every pin)", None, "")
    name, sha = found
    return Base(f"the merge base with {name}", sha, sha.decode()[:12])
