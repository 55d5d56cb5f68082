"""Atomic file writes: temp file in the same directory, fsync, rename, fsync the dir."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

from .errors import StoreError

__all__ = ["atomic_write", "fsync_dir"]


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        if exclusive:
            try:
                os.link(tmp, path)  # fails if path exists: first writer wins
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                    raise
                if path.exists():
                    return False
                os.replace(tmp, path)
                tmp = ""
        else:
            os.replace(tmp, path)
            tmp = ""
        if durable:
            fsync_dir(path.parent)
        return True
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
