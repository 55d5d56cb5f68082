"""Atomic file writes (temp file in the same directory, fsync, rename, fsync the dir) and
positioned reads."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import threading
from pathlib import Path

from ..errors import StoreError

__all__ = ["atomic_write", "create_temp", "fsync_dir", "pread", "write_all", "READ_FLAGS"]

READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


_names = itertools.count()


def pread(fd: int, n: int, offset: int) -> bytes:
    """Up to ``n`` bytes of ``fd`` at ``offset`` (no shared file position where os.pread exists)."""
    if hasattr(os, "pread"):
        return os.pread(fd, n, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # Windows
    return os.read(fd, n)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (os.write may write less than it is given)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def create_temp(path: str) -> tuple[int, str]:
    """Open a new temp file ``.<name>.<pid>-<thread>-<n>.tmp`` (mode 0600) beside ``path``,
    making its folder if needed (a leftover of that name: mkstemp)."""
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
    """Write ``data`` to ``path`` so that readers see the old file or the new, never a part;
    True when this call wrote. ``exclusive``: an existing file is left alone (write-once).
    ``durable=False`` skips the fsyncs (files verified on every read: the cache)."""
    path = os.fspath(path)
    try:
        fd, tmp = create_temp(path)
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
