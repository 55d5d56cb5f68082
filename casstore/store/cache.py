"""The local cache: the store layout in the user's cache dir, shared by all repos.

Only verified objects enter it (the frame is decompressed with the pinned size bound and
hashed before it is written), files are read-only, and every read verifies again: a cache
that was tampered with is repaired (the bad file is dropped), never trusted.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from ..errors import IntegrityError, NotFoundError, StoreError
from ..fsutil import atomic_write
from ..model.blob import decompress_verified, max_frame_size, verify_frame
from .backends import LocalStore, ObjectInfo, object_key, parse_key, signature_key, signature_prefix

__all__ = ["Cache", "CheckedObjects", "default_cache_dir"]


def default_cache_dir() -> Path:
    env = os.environ.get("CASSTORE_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs  # ~20 ms of imports: not paid when CASSTORE_CACHE_DIR is set

    return Path(platformdirs.user_cache_dir("casstore"))


class Cache:
    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        # no fsync: every read of the cache is verified (and a bad object dropped and
        # fetched again), so a power loss costs a refetch, not a wrong answer
        self.store = LocalStore(self.root, readonly_files=True, durable=False, confined=True)

    def path(self, digest: str) -> Path:
        return self.root / object_key(digest)

    def has(self, digest: str) -> bool:
        return os.path.isfile(os.path.join(self.root, object_key(digest)))  # str paths: called per pin

    def read_frame(self, digest: str, size: int | None = None) -> bytes:
        """The stored frame of ``digest``; with ``size`` (the pinned size), a file longer than
        that size's frame bound is refused unread (IntegrityError)."""
        key = object_key(digest)
        return self.store.read(key) if size is None else self.store.read_bounded(key, max_frame_size(size))

    def get(self, digest: str, size: int) -> bytes | None:
        """The verified canonical bytes for ``digest``, or None if absent or bad (dropped)."""
        try:
            return decompress_verified(self.read_frame(digest, size), digest, size)
        except NotFoundError:
            return None
        except IntegrityError:
            self.drop(digest)
            return None

    def verified(self, digest: str, size: int) -> str:
        """``"ok"``, ``"missing"``, or ``"dropped"`` (it was there but bad, and is gone now)."""
        try:
            verify_frame(self.read_frame(digest, size), digest, size)  # nothing kept: no buffer per object
            return "ok"
        except NotFoundError:
            return "missing"
        except IntegrityError:
            self.drop(digest)
            return "dropped"

    def drop(self, digest: str) -> None:
        self.store.delete(object_key(digest))

    def put_frame(self, digest: str, size: int, frame: bytes) -> bytes:
        """Verify ``frame`` against (digest, size); store it; return the canonical bytes."""
        data = decompress_verified(frame, digest, size)
        key = object_key(digest)
        # new (or of the wrong size: replaced); else verify the one there, replace it if bad
        if not self.store.write_once(key, frame) and self.get(digest, size) is None:
            self.store.write_once(key, frame)
        return data

    def put_signature(self, digest: str, keyid: str, envelope: bytes) -> None:
        self.store.write_once(signature_key(digest, keyid), envelope)

    def checked(self, store_url: str) -> CheckedObjects:
        """The objects of the store at ``store_url`` that this user read back and verified."""
        return CheckedObjects(self.root / "checked" / hashlib.sha256(store_url.encode()).hexdigest()[:32])

    def signatures(self, digest: str) -> dict[str, bytes]:
        out = {}
        for inf in self.store.list(signature_prefix(digest) + "/"):
            parsed = parse_key(inf.key)
            if parsed is not None and parsed.keyid is not None:
                out[parsed.keyid] = self.store.read(inf.key)
        return out


class CheckedObjects:
    """Store objects already read back and verified, each as (key, size, stamp), where the
    stamp is the checksum the store lists (S3's ETag) or else its mtime (for a pack member:
    the pack's). ``push`` reads back each present object whose listed checksum is not our
    frame's MD5 (every object of a local folder, every packed member): one it verified
    before, unchanged in size and stamp since, is not read again. Bytes changed in place
    with size and mtime kept are then found by ``verify --remote`` (which reads everything
    and forgets what it finds corrupt here, so the ``push`` it advises re-reads and
    replaces them). A lost or stale file costs a re-read, never a wrong answer: readers
    verify every object anyway."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lines: set[str] | None = None
        self._changed = False

    @staticmethod
    def _line(info: ObjectInfo) -> str | None:
        stamp = info.etag or (repr(info.mtime) if info.mtime is not None else None)
        return None if stamp is None else f"{info.key} {info.size} {stamp}"

    def _load(self) -> set[str]:
        if self._lines is None:
            try:
                self._lines = set(self.path.read_text("utf-8").splitlines())
            except (OSError, UnicodeDecodeError):
                self._lines = set()
        return self._lines

    def has(self, info: ObjectInfo) -> bool:
        line = self._line(info)
        return line is not None and line in self._load()

    def add(self, infos: Iterable[ObjectInfo]) -> None:
        lines = self._load()
        for info in infos:
            line = self._line(info)
            if line is not None and line not in lines:
                lines.add(line)
                self._changed = True

    def forget(self, keys: Iterable[str]) -> None:
        drop = set(keys)
        lines = self._load()
        gone = {line for line in lines if line.split(" ", 1)[0] in drop}
        if gone:
            lines -= gone
            self._changed = True

    def save(self) -> None:
        if not self._changed or self._lines is None:
            return
        try:  # a cache that cannot be written costs a re-read next time, nothing more
            atomic_write(self.path, "".join(line + "\n" for line in sorted(self._lines)).encode(), durable=False)
        except StoreError:
            pass
        self._changed = False
