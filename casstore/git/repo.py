"""Reading git repositories through dulwich (files at a revision, refs, history);
nothing writes to the repository."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError

_REV_SUFFIX = re.compile(r"(~[0-9]{0,9}|\^[0-9]{0,9})\Z")  # ASCII digits (git's), not a final newline

__all__ = ["GitRepo", "Commit"]


@dataclass(frozen=True)
class Commit:
    sha: str
    time: int  # commit time, seconds since the epoch
    author: str
    message: str
    offset: int = 0  # the committer's time zone, seconds east of UTC

    @classmethod
    def of(cls, c: Any) -> Commit:
        """The commit dulwich read as ``c``."""
        return cls(sha=c.id.decode(), time=c.commit_time, author=c.author.decode("utf-8", "replace"),
                   message=c.message.decode("utf-8", "replace").strip(), offset=c.commit_timezone)


class GitRepo:
    """A thin, read-only view of a git repository."""

    def __init__(self, root: Path | str) -> None:
        from dulwich.errors import NotGitRepository
        from dulwich.repo import Repo

        try:
            self.repo = Repo.discover(str(root))
        except NotGitRepository:
            raise UsageError(f"{root} is not inside a git repository") from None
        self.root = Path(self.repo.path)

    def _rel(self, path: Path | str) -> bytes:
        p = Path(path)
        if p.is_absolute():
            p = p.resolve().relative_to(self.root.resolve())
        return p.as_posix().encode()

    # -- revisions -------------------------------------------------------------------
    def resolve(self, rev: str) -> bytes:
        """Commit sha (hex bytes) for ``rev``: a sha, a branch, a tag, HEAD, and ancestry
        suffixes (``HEAD~2``, ``main^``, ``v1^2~3``), which dulwich's parser lacks."""
        ops: list[tuple[str, int]] = []
        base = rev
        while True:
            m = _REV_SUFFIX.search(base)
            if not m or m.start() == 0:
                break
            op = m.group(1)
            ops.append((op[0], int(op[1:]) if op[1:] else 1))
            base = base[: m.start()]
        from dulwich.objectspec import parse_commit

        try:
            sha = parse_commit(self.repo, base.encode()).id
        except Exception:  # dulwich raises several kinds (KeyError, ValueError, ...)
            if self.head() is None:
                raise UsageError(f"unknown revision {rev!r}: this repository has no commits yet") from None
            raise UsageError(f"unknown revision {rev!r}: no commit, branch or tag of that name") from None
        for op, n in reversed(ops):
            if op == "^" and n == 0:
                continue
            for _ in range(n if op == "~" else 1):
                parents = self._object(sha).parents
                idx = 0 if op == "~" else n - 1
                if idx >= len(parents):
                    raise UsageError(f"unknown revision {rev!r}: {sha.decode()[:12]} has no such parent")
                sha = parents[idx]
        return sha

    def _object(self, sha: bytes) -> Any:
        # typed Any: dulwich types every object as ShaFile, without the fields of each kind
        return self.repo[sha]

    def head(self) -> bytes | None:
        try:
            sha: bytes = self.repo.head()  # typed Any by some dulwich versions
        except KeyError:
            return None
        return sha

    def branch(self) -> str | None:
        try:
            refs: Any = self.repo.refs  # dulwich types ref names as Ref
            target: list[bytes] = refs.follow(b"HEAD")[0]
        except Exception:
            return None
        if len(target) >= 2 and target[-1].startswith(b"refs/heads/"):
            return target[-1][len(b"refs/heads/") :].decode()
        return None

    def read_at(self, rev: str | bytes, path: Path | str) -> bytes | None:
        """Bytes of ``path`` in commit ``rev``; None if the file is not there."""
        from dulwich.object_store import tree_lookup_path

        sha = rev if isinstance(rev, bytes) and len(rev) == 40 else self.resolve(rev if isinstance(rev, str) else rev.decode())
        tree = self._object(sha).tree
        try:
            _mode, blob_sha = tree_lookup_path(self.repo.__getitem__, tree, self._rel(path))
        except KeyError:
            return None
        obj = self._object(blob_sha)
        return obj.data if obj.type_name == b"blob" else None

    def _peeled(self, sha: bytes) -> Any:
        obj = self._object(sha)
        while obj.type_name == b"tag":
            obj = self._object(obj.object[1])
        return obj

    def ref_tips(self, broken: list[str] | None = None) -> dict[str, bytes]:
        """Every ref (branches, tags peeled to commits, remote-tracking, stash) -> commit sha;
        refs whose objects are missing go to ``broken``."""
        out: dict[str, bytes] = {}
        refs = self.repo.get_refs()
        for name, sha in refs.items():
            try:
                obj = self._peeled(sha)
            except KeyError:
                if broken is not None:
                    broken.append(name.decode("utf-8", "replace"))
                continue
            if obj.type_name == b"commit":
                out[name.decode("utf-8", "surrogateescape")] = obj.id
        return out

    def stash_entries(self) -> list[bytes]:
        """Every stash entry's commit, newest first (stash@{0} is refs/stash; the older ones
        live only in its reflog, which git keeps until they are dropped or expire)."""
        try:
            text = (Path(self.repo.commondir()) / "logs" / "refs" / "stash").read_bytes()
        except OSError:
            return []
        shas = [line.split(b" ", 2)[1] for line in text.splitlines() if line.count(b" ") >= 2]
        return [s for s in reversed(shas) if re.fullmatch(rb"[0-9a-f]{40}", s)]

    def commit_of(self, sha_hex: str) -> bytes | None:
        """The commit ``sha_hex`` names (a tag peeled); None if it is not here or not a commit."""
        try:
            obj = self._peeled(sha_hex.encode())
        except (KeyError, ValueError):
            return None
        return obj.id if obj.type_name == b"commit" else None

    def walk(self, tips: list[bytes], path: Path | str | None = None, *,
             exclude: list[bytes] | None = None) -> Iterator[Commit]:
        """Commits reachable from ``tips`` but not from ``exclude`` (each once), newest first;
        only those touching ``path`` if given."""
        if not tips:
            return
        kw: dict[str, Any] = {"paths": [self._rel(path)]} if path is not None else {}
        repo: Any = self.repo  # dulwich types commit ids as ObjectID
        for entry in repo.get_walker(include=list(dict.fromkeys(tips)),
                                     exclude=list(dict.fromkeys(exclude or ())) or None, **kw):
            yield Commit.of(entry.commit)
