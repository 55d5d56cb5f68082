"""git's own commands for the pre-commit path: the staged paths and their blobs in one batch."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["GitCommands", "git_output", "parse_diff_index"]

_TIMEOUT = 300


def git_output(cwd: Path | str, args: Sequence[str], stdin: bytes | None = None,
               env: Mapping[str, str] | None = None) -> bytes | None:
    """stdout of ``git args`` in ``cwd`` (``env``: variables added); None if git is missing or fails."""
    try:
        r = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, timeout=_TIMEOUT, check=False,
                           env={**os.environ, **env} if env else None)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def parse_diff_index(out: bytes) -> tuple[dict[str, bytes | None], dict[str, bytes]] | None:
    """``git diff-index --cached -z --no-renames`` output -> (path -> new blob sha, None:
    deleted; unmerged path -> its sha in the tree compared); None when it cannot be read."""
    staged: dict[str, bytes | None] = {}
    unmerged: dict[str, bytes] = {}
    parts = out.split(b"\0")
    if parts and parts[-1] == b"":
        parts.pop()
    if len(parts) % 2:
        return None
    for meta, path in zip(parts[::2], parts[1::2], strict=True):
        fields = meta[1:].split(b" ") if meta.startswith(b":") else []
        if len(fields) != 5:
            return None
        _old_mode, _new_mode, old_sha, new_sha, status = fields
        name = path.decode("utf-8", "surrogateescape")
        if status[:1] == b"U":
            unmerged[name] = old_sha
        elif status[:1] == b"D":
            staged[name] = None
        elif old_sha != new_sha:  # a mode-only change is not staged content
            staged[name] = new_sha
    return staged, unmerged


class GitCommands:
    """The repository around ``cwd`` as git's commands see it (they also honour the index a
    hook is given: ``GIT_INDEX_FILE``, e.g. ``git commit -a``)."""

    def __init__(self, cwd: Path, root: Path, prefix: str) -> None:
        self.cwd = cwd
        self.root = root  # the work tree's top folder
        self.prefix = prefix  # cwd relative to it: "" or "sub/dir/"

    @classmethod
    def open(cls, cwd: Path) -> GitCommands | None:
        out = git_output(cwd, ["rev-parse", "--show-toplevel", "--show-prefix"])
        lines = out.decode("utf-8", "surrogateescape").split("\n") if out is not None else []
        if len(lines) != 3 or lines[2] != "" or not lines[0]:
            return None  # not a work tree (a bare repository, no git), or a path with a newline
        return cls(cwd, Path(lines[0]), lines[1])

    def staged_shas(self) -> dict[str, bytes | None] | None:
        """Paths (from the top folder) staged for commit -> blob sha (None: deleted); a
        conflicted path counts as "ours" (else "theirs"). None if git fails. Its time grows
        with what is staged, not with the repository."""
        out = self._diff_index("HEAD")
        if out is None and git_output(self.cwd, ["rev-parse", "-q", "--verify", "HEAD"]) is None:
            # no commit yet: everything staged is new (against the empty tree, in this repository's hash)
            empty = git_output(self.cwd, ["hash-object", "-t", "tree", "--stdin"], stdin=b"")
            out = self._diff_index(empty.decode("ascii").strip()) if empty else None
        parsed = None if out is None else parse_diff_index(out)
        if parsed is None:
            return None
        staged, unmerged = parsed
        if unmerged:
            listed = git_output(self.cwd, ["ls-files", "-u", "-z", "--full-name", "--", ":/"])
            if listed is None:
                return None
            stages: dict[str, dict[bytes, bytes]] = {}
            for line in filter(None, listed.split(b"\0")):
                meta, _tab, path = line.partition(b"\t")
                _mode, blob, stage = meta.split(b" ")
                stages.setdefault(path.decode("utf-8", "surrogateescape"), {})[stage] = blob
            for name, old_sha in unmerged.items():
                ours = stages.get(name, {})
                picked = ours.get(b"2") or ours.get(b"3")
                if picked is not None and picked != old_sha:
                    staged[name] = picked
        return staged

    def _diff_index(self, tree: str) -> bytes | None:
        # --ita-invisible-in-index: a `git add -N` entry is not committed (nor checked)
        return git_output(self.cwd, ["diff-index", "--cached", "-z", "--no-renames", "--ita-invisible-in-index", tree, "--"])

    def cat(self, specs: Sequence[bytes]) -> list[bytes | None] | None:
        """The bytes of each blob named in ``specs`` (a sha, or ``HEAD:<path from the top>``),
        in one ``git cat-file --batch``; None for a name that is not a blob. None if git fails."""
        if any(b"\n" in s or b"\r" in s for s in specs):
            return None
        if not specs:
            return []
        out = git_output(self.cwd, ["cat-file", "--batch"], stdin=b"".join(s + b"\n" for s in specs))
        if out is None:
            return None
        found: list[bytes | None] = []
        pos = 0
        for _spec in specs:
            end = out.find(b"\n", pos)
            if end < 0:
                return None
            header = out[pos:end].split(b" ")
            pos = end + 1
            if len(header) != 3 or not header[2].isdigit():  # "<name> missing", "<name> ambiguous"
                found.append(None)
                continue
            size = int(header[2])
            data = out[pos:pos + size]
            if len(data) != size or out[pos + size:pos + size + 1] != b"\n":
                return None
            pos += size + 1
            found.append(data if header[1] == b"blob" else None)
        return found if pos == len(out) else None
