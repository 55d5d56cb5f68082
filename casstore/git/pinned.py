"""What the repository pins, for gc: every digest named by the lock in any commit a ref,
a stash entry or an operation in progress reaches, and in every worktree's HEAD, index (all
stages) and working file. Reads through :class:`casstore.git.repo.GitRepo`; writes nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from dulwich.index import Index

from ..errors import LockError, UsageError
from ..project import Project
from .history import LockHistory, lock_digests, lock_rel
from .repo import GitRepo

__all__ = ["mark", "Marks"]

# Heads of operations in progress (not refs, but live). ORIG_HEAD is not one: like a
# reflog entry it remembers a past state, and would keep a deleted branch alive forever.
_SPECIAL_HEADS = ("MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD")


@dataclass
class Marks:
    digests: set[str] = field(default_factory=set)
    commits: int = 0
    lock_versions: int = 0
    refs: int = 0


def _special_heads(admin: Path) -> list[bytes]:
    """Commits named by a worktree's HEAD when detached, and by operations in progress."""
    out: list[bytes] = []
    for name in ("HEAD", *_SPECIAL_HEADS):
        try:
            text = (admin / name).read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        out.extend(m.encode() for m in re.findall(r"\b[0-9a-f]{40}\b", text))
    return out


def _index_blobs(index_path: Path, rel: bytes) -> list[bytes]:
    """The lock's blob(s) in an index: one, or up to three while a merge is conflicted."""
    if not index_path.exists():
        return []
    try:
        entry = Index(str(index_path))[rel]
    except KeyError:
        return []
    except Exception as exc:  # a corrupt index: refuse rather than under-mark
        raise UsageError(f"cannot read the git index {index_path}: {exc}") from None
    sha = getattr(entry, "sha", None)
    if sha is not None:
        return [sha]
    return [e.sha for e in (getattr(entry, k, None) for k in ("ancestor", "this", "other")) if e is not None]


def _worktrees(repo: GitRepo) -> list[tuple[Path | None, Path]]:
    """(checkout root or None, admin dir) of the main worktree and every linked one."""
    common = Path(repo.repo.commondir())
    out: list[tuple[Path | None, Path]] = [(common.parent if common.name == ".git" else None, common)]
    linked = common / "worktrees"
    if linked.is_dir():
        for admin in sorted(linked.iterdir()):
            try:
                gitfile = Path((admin / "gitdir").read_text(encoding="utf-8").strip())
            except OSError:
                gitfile = None
            out.append((gitfile.parent if gitfile is not None else None, admin))
    return out


def mark(project: Project) -> Marks:
    """Every digest pinned by the lock in any commit any ref reaches, and in every worktree's
    HEAD, index (all stages) and working file."""
    repo = GitRepo(project.root)
    rel = lock_rel(project, repo)
    hist = LockHistory(repo, rel)
    broken: list[str] = []
    tips = list(repo.ref_tips(broken).values())  # tags peeled
    tips += [sha for sha in repo.stash_entries() if sha in repo.repo]  # stash@{1}...: reflog only
    if broken:
        raise UsageError(f"ref(s) {', '.join(broken)} point at missing objects; gc needs a sound repository "
                         "(`git fsck`)")
    worktrees = _worktrees(repo)
    for _root, admin in worktrees:
        tips += _special_heads(admin)
    marks = Marks(refs=len(tips))
    blobs: set[bytes] = set()
    for commit in hist.reachable(tips):
        marks.commits += 1
        blob = hist.blob_of_tree(commit.tree)
        if blob is not None:
            blobs.add(blob)
    if hist.missing:
        raise UsageError(
            f"git history is incomplete ({len(hist.missing)} commit(s) missing, e.g. {hist.missing[0]}); "
            "gc needs all of it to know what is pinned — run `git fetch --unshallow` first"
        )
    marks.lock_versions = len(blobs)
    for _root, admin in worktrees:
        blobs.update(_index_blobs(admin / "index", rel))
    for blob in blobs:
        marks.digests |= hist.digests(blob)
    paths = {project.lock_path} | {root / rel.decode() for root, _admin in worktrees if root is not None}
    for path in paths:
        try:
            marks.digests |= lock_digests(path.read_bytes())
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
        except LockError as exc:
            raise UsageError(f"{path} does not parse, so gc cannot tell what it pins: {exc}") from None
    return marks
