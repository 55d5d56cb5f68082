"""The end of a local pytest run: every cassette it wrote is pinned as ``casstore add`` pins
it; a refused cassette fails the run.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..config import Config, locate
from .guard import env_flag

__all__ = ["Pinner"]

_FORMAT_MARK = b'"casstore.cassette/v1"'  # in every casstore working copy; not in a vcrpy file
_NOT_RECORDING = ("replay", "live", "drift")
_Stamp = tuple[int, int, int]


def _stamps(top: str) -> dict[str, _Stamp]:
    """``path -> (mtime_ns, size, inode)`` of every ``*.json`` file under ``top``."""
    out: dict[str, _Stamp] = {}
    for dirpath, _dirs, files in os.walk(top):
        for fn in files:
            if fn.endswith(".json"):
                path = os.path.join(dirpath, fn)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                out[path] = (st.st_mtime_ns, st.st_size, st.st_ino)
    return out


def _wanted(no_pin: bool, config: Config, forced_mode: str | None) -> bool:
    if no_pin or env_flag("CI"):
        return False
    env = os.environ.get("CASSTORE_PIN")
    if env is not None and env.strip():
        return env_flag("CASSTORE_PIN")
    if forced_mode in _NOT_RECORDING or os.environ.get("CASSTORE_MODE", "").strip() in _NOT_RECORDING:
        return False  # nothing this run does can record
    return config.replay.get("pin", True) is not False


def _names(names: list[str], most: int = 5) -> str:
    shown = ", ".join(names[:most])
    return shown + (f", … and {len(names) - most} more" if len(names) > most else "")


class Pinner:
    """The working copies of a run's project when it started; :meth:`finish` pins what changed.
    The project itself (its store, keys and lock) is loaded only when the run recorded."""

    def __init__(self, root: Path, config: Config, before: dict[str, _Stamp]) -> None:
        self.root, self.config, self.before = root, config, before

    @property
    def cassette_dir(self) -> str:
        return os.fspath(self.root / self.config.cassette_dir)

    @classmethod
    def start(cls, *, no_pin: bool, forced_mode: str | None) -> Pinner | None:
        """A pinner for the project of the working directory, or None (not wanted, or no project)."""
        try:
            root, config = locate(required=True)
        except Exception:  # noqa: BLE001 - no project, a broken config: the first use() block says so
            return None
        if not _wanted(no_pin, config, forced_mode):
            return None
        pinner = cls(root, config, {})
        pinner.before = _stamps(pinner.cassette_dir)
        return pinner

    def recorded(self) -> list[Path]:
        """The casstore working copies written since :meth:`start`."""
        out = []
        for path, stamp in sorted(_stamps(self.cassette_dir).items()):
            if self.before.get(path) == stamp:
                continue
            try:
                with open(path, "rb") as fh:
                    if _FORMAT_MARK not in fh.read():
                        continue  # not a casstore cassette (a vcrpy JSON file, a fixture)
            except OSError:
                continue
            out.append(Path(path))
        return out

    def finish(self, write: Callable[[str], None], error: Callable[[str], None]) -> bool:
        """Pin what the run recorded (``error`` says each refusal); False when one was refused."""
        files = self.recorded()
        if not files:
            return True
        from ..ops.add import add_each
        from ..project import Project

        project = Project(self.root, self.config)
        added, refused = add_each(project, files)
        changed = [a for a in added if a.changed]
        if changed:
            signer = changed[0].signed_by
            signed = f"signed by {signer}" if signer else "unsigned: no signing key"
            from ..git.hooks import installed

            rest = ("`git commit` and the pre-push hook do the rest" if installed(project.root, "pre-push") else
                    "commit casstore.lock and run `casstore push` (after `casstore hooks install`, "
                    "`git commit` and `git push` do it)")
            write(f"casstore: pinned {len(changed)} recorded cassette(s) in casstore.lock ({signed}): "
                  f"{_names([a.name for a in changed])}; {rest}")
        seen: set[str] = set()
        for path, exc in refused:
            rel = _rel(path, project.root)
            text = str(exc)
            if text in seen:  # one cause for every file (no signing key): said once
                error(f"casstore: not pinned either: {rel}")
                continue
            seen.add(text)
            lines = text.splitlines() or [type(exc).__name__]
            first = lines[0] if lines[0].startswith(f"{rel}: ") else f"{rel}: {lines[0]}"
            error(f"casstore: not pinned: {first}")
            for line in lines[1:]:
                error(f"  {line}")
        return not refused


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)
