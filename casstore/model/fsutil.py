"""Atomic file writes: temp file in the same directory, fsync, rename, fsync the dir."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import threading
from pathlib import Path

from ..errors import StoreError

__all__ = ["atomic_write", "fsync_dir", "write_all"]


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


_names = itertools.count()


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (os.write may write less than it is given)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _create_temp(path: str) -> tuple[int, str]:
    """Open a new temp file (mode 0600) beside ``path``, making its folder if needed.

    Named ``.<name>.<pid>-<thread>-<n>.tmp`` (unique without mkstemp's random names and
    retries); a leftover of a killed process with the same name falls back to mkstemp."""
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}-{threading.get_ident()}-{next(_names)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(2):
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileNotFoundError:
            os.makedirs(folder or ".", exist_ok=True)
        except FileExistsError:
            break
    import tempfile  # the rare fallback; tempfile costs ~10 ms of imports at start-up

    return tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder or ".")


def atomic_write(path: Path | str, data: bytes, *, mode: int | None = None, exclusive: bool = False,
                 durable: bool = True) -> bool:
    """Write ``data`` to ``path`` so that readers see the old file or the new, never a part.

    With ``exclusive=True`` an existing file is left alone and ``False`` is returned
    (write-once objects). Returns ``True`` when this call wrote the file.

    ``durable=False`` skips the two fsyncs (file and directory): the rename is still
    atomic for every reader, only a power loss may lose or truncate the file. For files
    that are verified on every read and can be fetched again (the local cache), where
    fsync would be most of a pull's time.
    """
    path = os.fspath(path)
    try:
        fd, tmp = _create_temp(path)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        try:
            write_all(fd, data)
            if mode is not None:
                os.fchmod(fd, mode)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            try:
                os.link(tmp, path)  # fails if path exists: first writer wins
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                    raise
                if os.path.exists(path):
                    return False
                os.replace(tmp, path)
                tmp = ""
        else:
            os.replace(tmp, path)
            tmp = ""
        if durable:
            fsync_dir(Path(path).parent)
        return True
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
