"""Writing a recording's working copy when its ``use()`` block ends: one writer per file at
a time, ``record-new`` merging what another writer added meanwhile, written atomically.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

from .. import __version__
from ..model.cassette import Cassette, load_file

_fcntl: ModuleType | None
try:
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - Windows: the thread lock only
    _fcntl = None

__all__ = ["file_stamp", "write_cassette", "utc_now", "runtime_meta"]

_WRITE_LOCKS: dict[str, threading.Lock] = {}
_WRITE_LOCKS_GUARD = threading.Lock()


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def file_stamp(path: Path | None) -> tuple[int, int, int] | None:
    """``(inode, mtime_ns, size)`` of a file, or ``None`` when it does not exist (an atomic
    rewrite changes the inode even within one clock tick)."""
    try:
        st = path.stat() if path is not None else None
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size) if st is not None else None


@contextlib.contextmanager
def writer_lock(path: Path) -> Iterator[None]:
    """One writer per cassette file: a thread lock plus an ``flock`` across processes (the
    lock file in the temp dir, never in the repository)."""
    key = str(path.resolve())
    with _WRITE_LOCKS_GUARD:
        tlock = _WRITE_LOCKS.setdefault(key, threading.Lock())
    with tlock:
        lock_dir = Path(tempfile.gettempdir()) / "casstore-locks"
        fh = None
        with contextlib.suppress(OSError):  # unwritable temp dir: thread lock only
            lock_dir.mkdir(exist_ok=True)
            fh = open(lock_dir / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".lock"), "a+b")  # noqa: SIM115
            if _fcntl is not None:
                _fcntl.flock(fh.fileno(), _fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fh is not None:
                fh.close()


def write_cassette(
    path: Path | None,
    *,
    name: str,
    mode: str,
    cassette: Cassette | None,
    base: list[dict[str, Any]],
    new: list[dict[str, Any]],
    path_stamp: Any,
    exercised: set[str],
    redaction_config: Mapping[str, Any] | None,
    git_root: Path | None,
    meta_extra: Mapping[str, Any] | None = None,
) -> bool:
    """Write the working copy of a recording session; ``True`` when a file was written.
    ``base``: the entries it started from; ``new``: its un-redacted captures; ``exercised``:
    the identities a ``refresh`` run made again."""
    if path is None or (mode != "record" and not new):
        return False
    from ..model.redaction import RuleSet  # (what only a recording needs is loaded here)
    from ..model.scrub import assemble

    with writer_lock(path):
        old_hits: dict[str, int] = dict((cassette.redaction or {}).get("hits") or {}) if cassette else {}
        if mode == "record-new" and file_stamp(path) != path_stamp and path.is_file():
            # another writer (xdist worker, thread) changed the file since we started
            with contextlib.suppress(Exception):
                latest = load_file(path)
                known = {e["identity"] for e in latest.entries}
                base = list(latest.entries)
                new = [e for e in new if e["identity"] not in known]
                old_hits = dict((latest.redaction or {}).get("hits") or {})
        if mode == "record":
            kept: list[dict[str, Any]] = []
            old_hits = {}
        elif mode == "refresh":
            kept = [e for e in base if e["identity"] not in exercised]
        else:
            kept = list(base)
        meta = dict(cassette.meta) if (cassette is not None and mode != "record") else {}
        meta.update({"recorded_at": utc_now(), "recorder": f"casstore/{__version__}"})
        git: dict[str, Any] = {}
        if git_root is not None:
            with contextlib.suppress(Exception):  # the commit, branch and dirty flag are optional
                from ..git.provenance import provenance  # loaded by a recording only

                git = {k: v for k, v in provenance(git_root).items() if v is not None}
        meta["git"] = git or meta.get("git") or {}
        meta.update(meta_extra or {})
        test_file = (os.environ.get("PYTEST_CURRENT_TEST") or "").partition("::")[0]
        if test_file:  # which test file uses the cassette: the pre-commit check's link (never the test id)
            meta["test_file"] = test_file
        rules = RuleSet.from_config(dict(redaction_config or {}))
        assemble(name, kept, new, rules, meta, old_hits=old_hits).write_file(path)
        return True


# distribution name -> the module whose presence in sys.modules means it is loaded
CLIENT_PACKAGES: dict[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "httpx": "httpx",
    "httpx2": "httpx2",
    "requests": "requests",
    "urllib3": "urllib3",
    "aiohttp": "aiohttp",
    "boto3": "boto3",
    "botocore": "botocore",
    "google-genai": "google.genai",
}


def runtime_meta() -> dict[str, Any]:
    """The platform and the versions of the client packages loaded, for ``meta`` (never fails)."""
    from importlib import metadata  # a recording's (not loaded by a replay)

    try:
        packages: dict[str, str] = {}
        for dist, module in sorted(CLIENT_PACKAGES.items()):
            if module not in sys.modules:
                continue
            try:
                packages[dist] = metadata.version(dist)
            except Exception:  # noqa: BLE001 - a vendored or odd install: use what the module says
                version = getattr(sys.modules[module], "__version__", None)
                if isinstance(version, str):
                    packages[dist] = version
        platform_meta = {
            "os": sys.platform,
            "arch": platform.machine() or "unknown",
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
        }
        return {"platform": platform_meta, "packages": packages}
    except Exception:  # noqa: BLE001 - provenance is optional
        return {}
