"""The lock across git history: at a revision, and the commits that changed it (read
through :class:`casstore.git.repo.GitRepo`; what this history pins, for gc, is :mod:`.pinned`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import LockError, UsageError
from ..model.defaults import LOCK_FILE
from ..model.lock import Lock, parse_lock
from ..project import Project
from .repo import Commit, GitRepo

__all__ = [
    "parse_duration",
    "LockHistory",
    "lock_at",
    "lock_changes",
    "lock_rel",
]

DIGEST_RE = re.compile(rb"sha256:[0-9a-f]{64}")
# ASCII digits only (\d takes "٧"), at most 12 (a longer count overflowed the float cutoff)
_DURATION_RE = re.compile(r"([0-9]{1,12})([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> int:
    """``0``, ``90s``, ``30m``, ``24h``, ``7d``, ``2w`` -> seconds; else UsageError."""
    t = text.strip().lower()
    if t == "0":
        return 0
    m = _DURATION_RE.fullmatch(t)
    if not m:
        raise UsageError(f"invalid duration {text!r}: use 0, 90s, 30m, 24h, 7d or 2w")
    return int(m.group(1)) * _UNITS[m.group(2)]


def lock_digests(data: bytes, *, strict: bool = True) -> set[str]:
    """Every digest a lock's text mentions; text with escapes (TOML's ``\\u``) is parsed too,
    its LockError raised when ``strict`` (over-marking is safe, under-marking is not)."""
    found = {m.decode() for m in DIGEST_RE.findall(data)}
    if b"\\" in data:
        try:
            found |= parse_lock(data).digests()
        except LockError:
            if strict:
                raise
    return found


# -- the lock across history ---------------------------------------------------------------
def lock_rel(project: Project, repo: GitRepo) -> bytes:
    try:
        rel = project.lock_path.resolve().relative_to(repo.root.resolve())
    except ValueError:
        raise UsageError(f"{project.root} is not inside the git repository {repo.root}") from None
    return rel.as_posix().encode()


class LockHistory:
    """The lock file's blob in each commit, each distinct blob read and parsed once."""

    def __init__(self, repo: GitRepo, rel: bytes) -> None:
        self.git = repo
        self.store: Any = repo.repo.object_store  # dulwich's ObjectID types are stricter than bytes
        self.rel = rel
        self.parts = rel.split(b"/")
        self._tree_blob: dict[bytes, bytes | None] = {}
        self._digests: dict[bytes, frozenset[str]] = {}
        self._locks: dict[bytes, Lock | None] = {}
        self.missing: list[str] = []  # commits referenced but absent (shallow clone, broken repo)

    def blob_of_tree(self, tree: bytes) -> bytes | None:
        if tree in self._tree_blob:
            return self._tree_blob[tree]
        sha: bytes | None = tree
        for part in self.parts:
            try:
                obj = self.store[sha]
                _mode, sha = obj[part]
            except KeyError:
                sha = None
                break
        self._tree_blob[tree] = sha
        return sha

    def digests(self, blob: bytes) -> frozenset[str]:
        """Every digest a lock blob mentions (:func:`lock_digests`)."""
        got = self._digests.get(blob)
        if got is None:  # raw bytes: no object parsing
            got = self._digests[blob] = frozenset(lock_digests(self.store.get_raw(blob)[1], strict=False))
        return got

    def lock(self, blob: bytes | None) -> Lock | None:
        """The parsed lock of a blob (empty Lock when absent, None when it does not parse)."""
        if blob is None:
            return Lock()
        if blob not in self._locks:
            try:
                self._locks[blob] = parse_lock(self.store[blob].data)
            except LockError:
                self._locks[blob] = None
        return self._locks[blob]

    def reachable(self, tips: Iterable[bytes]) -> Iterator[Any]:
        """Every commit reachable from ``tips``, each once (no ordering)."""
        shallow = set(self.git.repo.get_shallow())
        seen: set[bytes] = set()
        stack = list(tips)
        while stack:
            sha = stack.pop()
            if sha in seen:
                continue
            seen.add(sha)
            try:
                commit = self.store[sha]
            except KeyError:
                self.missing.append(sha.decode())
                continue
            yield commit
            if sha in shallow:
                self.missing.append(f"parents of {sha.decode()[:12]} (shallow clone)")
                continue
            stack.extend(commit.parents)


def lock_at(project: Project, rev: str | None) -> Lock:
    """The lock at ``rev`` (None: the working file). A missing file is an empty lock."""
    if rev is None:
        return project.load_lock()
    repo = GitRepo(project.root)
    data = repo.read_at(repo.resolve(rev), project.lock_path)
    if data is None:
        return Lock()
    try:
        return parse_lock(data)
    except LockError as exc:
        raise LockError(f"{LOCK_FILE} at {rev}: {exc}") from None


def lock_changes(project: Project, rev: str = "HEAD") -> Iterator[tuple[Commit, Lock | None, list[Lock | None]]]:
    """Commits reachable from ``rev`` that changed the lock, children first, each with its lock
    and its parents' (empty where the file is absent, None where it does not parse)."""
    repo = GitRepo(project.root)
    tip = repo.resolve(rev)
    hist = LockHistory(repo, lock_rel(project, repo))
    walker: Any = repo.repo.get_walker
    from dulwich.walk import ORDER_TOPO  # not at import: the pre-commit check never walks history

    for entry in walker(include=[tip], order=ORDER_TOPO):
        c = entry.commit
        blob = hist.blob_of_tree(c.tree)
        parents = []
        for p in c.parents:
            try:
                parents.append(hist.store[p])
            except KeyError:
                continue
        if any(hist.blob_of_tree(p.tree) == blob for p in parents):
            continue  # the lock did not change in this commit
        yield Commit.of(c), hist.lock(blob), [hist.lock(hist.blob_of_tree(p.tree)) for p in parents]
