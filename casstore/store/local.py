"""The local backends: a folder (the default store and the user's cache) and memory (tests)."""

from __future__ import annotations

import builtins
import contextlib
import os
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import NotFoundError, StoreError
from ..model.fsutil import READ_FLAGS, atomic_write, pread
from .base import ObjectInfo, Store, check_key, too_large

__all__ = ["LocalStore", "MemoryStore"]

class LocalStore(Store):
    def __init__(self, root: Path | str, *, readonly_files: bool = False, durable: bool = True) -> None:
        self.root = Path(root)
        self.url = str(self.root)
        self._mode = 0o444 if readonly_files else None
        self._durable = durable  # False: no fsync (a cache whose every read is verified)
        self._real_root: str | None = None

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def _writable(self, key: str) -> Path:
        """The path of ``key``, never through a symlink that leads out of the root (the root
        itself may be a link, a cache on a bigger disk: resolved once)."""
        path = self._path(key)
        if self._real_root is None:
            self._real_root = os.path.realpath(self.root)
        root, real = self._real_root, os.path.realpath(os.path.dirname(path))
        if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
            raise StoreError(f"refusing to write {key}: a symlink in {self.url} leads out of it (to {real})")
        return path

    def read(self, key: str) -> bytes:
        check_key(key)
        try:
            with open(os.path.join(self.url, key), "rb") as fh:  # str paths: no pathlib per read
                return fh.read()
        except (FileNotFoundError, IsADirectoryError):
            raise NotFoundError(f"{key} is not in {self.url}") from None
        except OSError as exc:
            raise StoreError(f"cannot read {key} from {self.url}: {exc.strerror or exc}") from exc

    def read_range(self, key: str, start: int, end: int) -> bytes:
        return self._read_at(key, start, max(0, end - start))

    def read_bounded(self, key: str, limit: int) -> bytes:
        data = self._read_at(key, 0, limit + 1)
        if len(data) > limit:  # too large (or grew while we read)
            raise too_large(key, self.url, limit)
        return data

    def _read_at(self, key: str, start: int, n: int) -> bytes:
        # os.open and pread on a str path: no pathlib, no buffered file object (`verify` reads one a pin)
        check_key(key)
        try:
            fd = os.open(os.path.join(self.url, key), READ_FLAGS)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise NotFoundError(f"{key} is not in {self.url}") from None
        except OSError as exc:
            raise StoreError(f"cannot read {key} from {self.url}: {exc.strerror or exc}") from exc
        try:
            parts: list[bytes] = []
            got = 0
            while got < n:  # a short read is not always the end
                part = pread(fd, n - got, start + got)
                if not part:
                    break
                parts.append(part)
                got += len(part)
        except IsADirectoryError:
            raise NotFoundError(f"{key} is not in {self.url}") from None
        except OSError as exc:
            raise StoreError(f"cannot read {key} from {self.url}: {exc.strerror or exc}") from exc
        finally:
            os.close(fd)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def write_once(self, key: str, data: bytes, *, checked: bool = False) -> bool:
        path = self._writable(key)
        if checked:  # the caller knows it is absent or wrong (a corrupt object being replaced)
            return atomic_write(path, data, mode=self._mode, durable=self._durable)
        with contextlib.suppress(OSError):
            if path.stat().st_size == len(data):
                return False
            # wrong size: repair below (atomic replace)
            return atomic_write(path, data, mode=self._mode, durable=self._durable)
        return atomic_write(path, data, mode=self._mode, exclusive=True, durable=self._durable)

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        base = self._path(prefix.rstrip("/")) if prefix.strip("/") else self.root
        if not base.is_dir():
            return
        for dirpath, _dirs, files in os.walk(base):
            for fn in files:
                if fn.startswith("."):
                    continue  # temp files of writes in flight
                p = Path(dirpath) / fn
                try:
                    st = p.stat()
                except OSError:
                    continue
                yield ObjectInfo(p.relative_to(self.root).as_posix(), st.st_size, st.st_mtime)

    def stale_temp_files(self, cutoff: float) -> builtins.list[tuple[Path, int]]:
        out = []
        for top in ("objects", "signatures", "packs"):
            for dirpath, _dirs, files in os.walk(self.root / top):
                for fn in files:
                    if fn.startswith(".") and fn.endswith(".tmp"):
                        p = Path(dirpath) / fn
                        with contextlib.suppress(OSError):
                            st = p.stat()
                            if st.st_mtime <= cutoff:
                                out.append((p, st.st_size))
        return sorted(out)

    def info(self, key: str) -> ObjectInfo | None:
        try:
            st = self._path(key).stat()
        except OSError:
            return None
        return ObjectInfo(key, st.st_size, st.st_mtime)

    def stat_many(self, keys: Iterable[str]) -> dict[str, ObjectInfo]:
        # what info() answers, without a Path per key (a push stats three keys a pin)
        out = {}
        root, stat = os.path.join(os.fspath(self.root), ""), os.stat
        for k in keys:
            check_key(k)
            try:
                st = stat(root + k)
            except OSError:
                continue
            out[k] = ObjectInfo(k, st.st_size, st.st_mtime)
        return out

    def present(self, keys: Iterable[str]) -> builtins.set[str]:
        """Which of ``keys`` are there (as :meth:`stat_many` would find them): a folder holding
        many of them (a third of the entries its size suggests) is listed once, not stat-ed."""
        by_dir: dict[str, list[str]] = {}
        for k in keys:
            check_key(k)
            folder, _, name = k.rpartition("/")
            by_dir.setdefault(folder, []).append(name)
        out: builtins.set[str] = set()
        root = os.path.join(self.url, "")  # str paths, as in stat_many
        for folder, names in by_dir.items():
            where = root + folder if folder else self.url
            prefix = folder + "/" if folder else ""
            listed: builtins.set[str] | None = None
            try:
                if len(names) * 3 * 64 >= os.stat(where).st_size:
                    listed = set(os.listdir(where))
            except (FileNotFoundError, NotADirectoryError):
                continue  # no folder: none of its keys
            except OSError:
                listed = None  # a stat each says what it can
            for name in names:
                if listed is not None and name not in ("", ".", ".."):
                    if name in listed:
                        out.add(prefix + name)
                    continue
                with contextlib.suppress(OSError):
                    os.stat(root + prefix + name)
                    out.add(prefix + name)
        return out

    def delete(self, key: str) -> None:
        path = self._writable(key)
        try:
            path.unlink()
        except FileNotFoundError:
            return
        except PermissionError:
            with contextlib.suppress(OSError):
                path.chmod(0o644)
            try:
                path.unlink()
            except OSError as exc:
                raise StoreError(f"cannot delete {key} from {self.url}: {exc.strerror or exc}") from exc
        except OSError as exc:
            raise StoreError(f"cannot delete {key} from {self.url}: {exc.strerror or exc}") from exc


class MemoryStore(Store):
    """In-process store (tests, ephemeral pipelines). Thread-safe."""

    def __init__(self, url: str = "mem") -> None:
        self.url = url
        self._data: dict[str, tuple[bytes, float]] = {}
        self._lock = threading.Lock()

    def read(self, key: str) -> bytes:
        with self._lock:
            try:
                return self._data[key][0]
            except KeyError:
                raise NotFoundError(f"{key} is not in {self.url}") from None

    def write_once(self, key: str, data: bytes, *, checked: bool = False) -> bool:
        with self._lock:
            cur = self._data.get(key)
            if not checked and cur is not None and len(cur[0]) == len(data):
                return False
            self._data[key] = (bytes(data), time.time())
            return True

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        with self._lock:
            items = [(k, v) for k, v in self._data.items() if k.startswith(prefix)]
        for k, (data, mtime) in sorted(items):
            yield ObjectInfo(k, len(data), mtime)

    def delete(self, key: str) -> None:
        with self._lock:
            self._data.pop(key, None)
