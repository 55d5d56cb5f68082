"""git's textconv and merge driver for ``casstore.lock`` (docs/git.md); both degrade instead of
failing: the raw lock, or ``git merge-file`` on a lock that does not parse."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from ..errors import CasstoreError, LockError, StoreError, UsageError
from ..model.cassette import Cassette, load_bytes
from ..model.defaults import LOCK_FILE
from ..model.diff import format_merge, merge_locks, render_lock_summary
from ..model.fsutil import atomic_write
from ..model.lock import Pin, parse_lock
from ..project import Project

__all__ = ["DRIVER", "register", "unregister", "textconv", "merge_files"]

DRIVER = "casstore-lock"
ATTR_LINE = f"{LOCK_FILE} diff={DRIVER} merge={DRIVER}"


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise UsageError(f"cannot run git: {exc}") from None


def register(root: Path) -> list[str]:
    """Register the textconv and merge drivers in ``root``'s git config and ``.gitattributes``
    (idempotent); one line per setting it changed."""
    root = Path(root)
    if _git(root, "rev-parse", "--git-dir").returncode != 0:
        raise UsageError(f"{root} is not inside a git repository")
    cmd = f"{shlex.quote(sys.executable)} -m casstore.cli"
    wanted = {
        f"diff.{DRIVER}.textconv": f"{cmd} git-textconv",
        f"merge.{DRIVER}.name": "casstore.lock merge by cassette name",
        f"merge.{DRIVER}.driver": f"{cmd} git-merge-lock %O %A %B %L %P",
    }
    changed = []
    for key, value in wanted.items():
        cur = _git(root, "config", "--local", "--get", key)
        if cur.returncode == 0 and cur.stdout.rstrip("\n") == value:
            continue
        res = _git(root, "config", "--local", key, value)
        if res.returncode != 0:
            raise UsageError(f"git config {key} failed: {res.stderr.strip() or res.returncode}")
        changed.append(f"git config {key}")
    attrs = root / ".gitattributes"
    try:
        data = attrs.read_bytes()
        text = data.decode("utf-8")
    except FileNotFoundError:
        data, text = b"", ""
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read .gitattributes: {exc}") from None
    if not _has_attr_line(text):
        eol = b"\r\n" if b"\r\n" in data else b"\n"  # the file's own line ending
        sep = b"" if not data or data.endswith(b"\n") else eol
        atomic_write(attrs, data + sep + ATTR_LINE.encode() + eol)
        changed.append(f".gitattributes: {ATTR_LINE}")
    return changed


def unregister(root: Path) -> list[str]:
    """Undo :func:`register`: drop the two config sections and our ``.gitattributes`` line."""
    root = Path(root)
    changed = []
    for section in (f"diff.{DRIVER}", f"merge.{DRIVER}"):
        if _git(root, "config", "--local", "--remove-section", section).returncode == 0:
            changed.append(f"git config [{section}] removed")
    attrs = root / ".gitattributes"
    try:
        data = attrs.read_bytes()
    except OSError:
        return changed
    # only the exact line register() writes goes; every other byte stays as it was (CRLF too)
    # lines as git reads them, at "\n" only (bytes.splitlines also breaks at a lone "\r", and
    # would drop the end of a comment that hides our line after one)
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    kept = [line for line in lines if line.strip() != ATTR_LINE.encode()]
    if len(kept) == len(lines):
        return changed
    if any(line.strip() for line in kept) or _tracked(root, ".gitattributes"):
        atomic_write(attrs, b"".join(kept))  # a committed file stays, even when it is now empty
    else:
        attrs.unlink()  # register() created it and nobody committed it
    changed.append(f".gitattributes: removed {ATTR_LINE}")
    return changed


def _tracked(root: Path, rel: str) -> bool:
    return _git(root, "ls-files", "--error-unmatch", "--", rel).returncode == 0


def _has_attr_line(text: str) -> bool:
    for line in text.split("\n"):  # lines as git reads them (splitlines also breaks at U+2028...)
        parts = line.split()
        if parts and parts[0] == LOCK_FILE and f"diff={DRIVER}" in parts and f"merge={DRIVER}" in parts:
            return True
    return False


# -- textconv ---------------------------------------------------------------------------------
def _loader(project: Project):  # type: ignore[no-untyped-def]
    """Cache first, then the store; after one store failure, cache only (no slow retries)."""
    state = {"remote_ok": True}

    def load(pin: Pin) -> Cassette:
        data = project.cache.get(pin.digest, pin.size)
        if data is None:
            if not state["remote_ok"]:
                raise StoreError(f"{pin.digest[:19]} is not in the cache and the store was unreachable")
            try:
                data = project.fetch_verified(pin)
            except StoreError:
                state["remote_ok"] = False
                raise
        return load_bytes(data, source=f"{pin.name} ({pin.digest[:19]})")

    return load


def textconv(path: Path, *, cwd: Path | None = None) -> str:
    """The readable per-call view of a lock file; the raw text whenever that is not possible."""
    data = Path(path).read_bytes()
    try:
        lock = parse_lock(data)
        here = (cwd or Path.cwd()).resolve()
        real = Path(path).resolve()
        # git passes the worktree file itself for the working side: its folder is the project
        start = real.parent if here == real.parent or here in real.parents else here
        project = Project.discover(start)
        return render_lock_summary(lock, _loader(project))
    except Exception:  # never fail a `git diff`: show the file as it is
        return data.decode("utf-8", "replace")


# -- merge driver ----------------------------------------------------------------------------
def merge_files(base: Path, ours: Path, theirs: Path, *, marker_size: int = 7,
                label: str = LOCK_FILE) -> tuple[int, list[str]]:
    """Merge ``theirs`` into ``ours`` (written in place): (0 clean or 1 conflicts, messages)."""
    try:
        texts = [Path(p).read_bytes() for p in (base, ours, theirs)]
    except OSError as exc:
        return 2, [f"{label}: cannot read a merge input: {exc}"]
    try:
        b, o, t = (parse_lock(x) for x in texts)
    except (LockError, CasstoreError) as exc:
        res = subprocess.run(
            ["git", "merge-file", f"--marker-size={marker_size}", "-L", "ours", "-L", "base", "-L", "theirs",
             str(ours), str(base), str(theirs)],
            capture_output=True, text=True, check=False,
        )
        how = "clean" if res.returncode == 0 else "with conflicts"
        return (0 if res.returncode == 0 else 1), [
            f"{label}: a side does not parse ({exc}); merged as plain text, {how}"
        ]
    merged = merge_locks(b, o, t)
    atomic_write(Path(ours), format_merge(merged, marker_size=marker_size).encode("utf-8"))
    if not merged.conflicts:
        return 0, []
    msgs = [f"{label}: conflict: {c.message()}" for c in merged.conflicts]
    msgs.append(f"{label}: keep one side of each conflict (delete the other block and the marker lines), "
                f"then `git add {label}`; to combine both recordings, re-record and `casstore add` after that")
    return 1, msgs
