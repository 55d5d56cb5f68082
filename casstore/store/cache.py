"""The local cache: the store layout in the user's cache dir, shared by all repos. Only
verified objects enter it, and every read verifies again: a bad copy, loose or packed, is
dropped and fetched again. Many objects written at once go into packs (:mod:`.cache_packs`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Iterable
from pathlib import Path

from ..errors import IntegrityError, NotFoundError, StoreError
from ..model.blob import decompress_verified, max_frame_size, verify_frame
from ..model.fsutil import atomic_write
from .backends import LocalStore, ObjectInfo, object_key, parse_key, signature_key, signature_prefix
from .cache_packs import CachePacks
from .packs import PACK_TARGET_BYTES

__all__ = ["Cache", "CacheWriter", "CheckedObjects", "default_cache_dir", "CACHE_PACK_THRESHOLD"]

CACHE_PACK_THRESHOLD = 64  # objects written by one writer at once: packed from this many on

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
        self.loose = LocalStore(self.root, readonly_files=True, durable=False)
        self.store = CachePacks(self.loose)
        self._sigs: dict[str, list[tuple[str, str]]] | None = None  # digest -> (keyid, packed key)

    def has(self, digest: str) -> bool:
        key = object_key(digest)  # str paths, no pathlib: called per pin
        return os.path.isfile(os.path.join(self.root, key)) or self.store.packed(key)

    def lacking(self, digests: Iterable[str]) -> set[str]:
        """The ``digests`` that :meth:`has` says are absent (a cache with no loose objects
        answers from the packs' catalog alone, without a stat per digest)."""
        if os.path.isdir(os.path.join(self.root, "objects")):
            return {d for d in digests if not self.has(d)}
        return {d for d in digests if not self.store.packed(object_key(d))}

    def load(self) -> None:
        """Read the packs' catalog now, before threads share it."""
        self.store.catalog()

    def refresh(self) -> None:
        """Forget the packs' catalog: another process may have changed the packs."""
        self.store.forget_catalog()
        self._sigs = None

    def read_frame(self, digest: str, size: int | None = None) -> bytes:
        """The stored frame of ``digest`` (loose or packed); with ``size`` (the pinned size),
        one longer than that size's frame bound is refused unread (IntegrityError)."""
        key = object_key(digest)
        return self.store.read(key) if size is None else self.store.read_bounded(key, max_frame_size(size))

    def get(self, digest: str, size: int) -> bytes | None:
        """The verified canonical bytes of ``digest``; None if absent or bad (dropped)."""
        try:
            return decompress_verified(self.read_frame(digest, size), digest, size)
        except NotFoundError:
            return None
        except IntegrityError:
            return self._keep_good_copy(digest, size)

    def verified(self, digest: str, size: int) -> str:
        """``"ok"``, ``"missing"``, or ``"dropped"`` (it was there but bad, and is gone now)."""
        try:
            verify_frame(self.read_frame(digest, size), digest, size)  # nothing kept: no buffer per object
            return "ok"
        except NotFoundError:
            return "missing"
        except IntegrityError:
            return "dropped" if self._keep_good_copy(digest, size) is None else "ok"

    def _keep_good_copy(self, digest: str, size: int) -> bytes | None:
        """A read of ``digest`` failed verification: check each copy (loose, packed) on its
        own, drop only the bad ones, and return a good one's bytes (None: none was good)."""
        key = object_key(digest)
        bound = max_frame_size(size)
        good: bytes | None = None
        try:
            good = decompress_verified(self.loose.read_bounded(key, bound), digest, size)
        except NotFoundError:
            pass
        except IntegrityError:
            self.loose.delete(key)
        if self.store.packed(key):  # each packed copy checked: the packs of bad ones rewritten
            member = self.store.drop_bad(key)
            if good is None and member is not None and len(member) <= bound:
                try:
                    return decompress_verified(member, digest, size)
                except IntegrityError:  # good for its digest, not for this pin's size: the pin is wrong
                    pass
        return good

    def drop(self, digest: str) -> None:
        """Remove every copy of ``digest``: the loose file, and the member of each pack that
        holds it (those packs are rewritten without it)."""
        key = object_key(digest)
        self.loose.delete(key)
        if self.store.packed(key):
            self.store.forget_member(key)
            problems = self.store.flush()
            if problems:
                raise StoreError(f"cannot drop the corrupt cached {key}: {'; '.join(problems)}")

    def put_frame(self, digest: str, size: int, frame: bytes) -> bytes:
        """Verify ``frame`` against (digest, size); store it (loose); return the canonical bytes."""
        data = decompress_verified(frame, digest, size)
        key = object_key(digest)
        # new (or of the wrong size: replaced); else verify the one there, replace it if bad
        if not self.loose.write_once(key, frame) and self.get(digest, size) is None:
            self.loose.write_once(key, frame)
        return data

    def put_signature(self, digest: str, keyid: str, envelope: bytes) -> None:
        self.loose.write_once(signature_key(digest, keyid), envelope)

    def checked(self, store_url: str) -> CheckedObjects:
        """The objects of the store at ``store_url`` that this user read back and verified."""
        return CheckedObjects(self.root / "checked" / hashlib.sha256(store_url.encode()).hexdigest()[:32])

    def signatures(self, digest: str) -> dict[str, bytes]:
        out = {}
        for inf in self.loose.list(signature_prefix(digest) + "/"):
            parsed = parse_key(inf.key)
            if parsed is not None and parsed.keyid is not None:
                out[parsed.keyid] = self.loose.read(inf.key)
        if self._sigs is None:  # packed envelopes by digest, indexed once
            self._sigs = {}
            for key in self.store.catalog().members:
                parsed = parse_key(key)
                if parsed is not None and parsed.keyid is not None:
                    self._sigs.setdefault(parsed.digest, []).append((parsed.keyid, key))
        for keyid, key in self._sigs.get(digest, []):
            if keyid not in out:
                with contextlib.suppress(NotFoundError, StoreError):
                    out[keyid] = self.store.read(key)
        return out


class CacheWriter:
    """Verified frames and envelopes on their way into the cache (thread-safe): packed from
    :data:`CACHE_PACK_THRESHOLD` objects on, else a file each; what failed is in :attr:`failed`."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.failed: dict[str, StoreError] = {}
        self._items: list[tuple[str, bytes]] = []
        self._bytes = 0
        self._packed = False
        self._lock = threading.Lock()

    def add(self, key: str, data: bytes) -> None:
        with self._lock:
            self._items.append((key, data))
            self._bytes += len(data)
            if self._bytes < PACK_TARGET_BYTES:
                return
            items, self._items, self._bytes, self._packed = self._items, [], 0, True
        self._write(items, packed=True)

    def close(self) -> dict[str, StoreError]:
        with self._lock:
            items, self._items, self._bytes = self._items, [], 0
            objects = sum(k.startswith("objects/") for k, _ in items)
            packed = self._packed or objects >= CACHE_PACK_THRESHOLD
        if items:
            self._write(items, packed=packed)
        return self.failed

    def _write(self, items: list[tuple[str, bytes]], *, packed: bool) -> None:
        if packed:
            try:
                self.cache.store.write_packed(items)
            except StoreError as exc:
                with self._lock:
                    self.failed.update((k, exc) for k, _ in items)
            return
        for key, data in items:
            try:
                self.cache.loose.write_once(key, data)
            except StoreError as exc:
                with self._lock:
                    self.failed[key] = exc


class CheckedObjects:
    """Store objects ``push`` already read back and verified, as (key, size, listed checksum or
    mtime): one unchanged since is not read again; a lost file costs a re-read, no more."""

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
        with contextlib.suppress(StoreError):  # a cache that cannot be written costs a re-read next time
            atomic_write(self.path, "".join(line + "\n" for line in sorted(self._lines)).encode(), durable=False)
        self._changed = False
