"""The local cache: the store layout in the user's cache dir, shared by all repos.

Only verified objects enter it (the frame is decompressed with the pinned size bound and
hashed before it is written), files are read-only, and every read verifies again: a cache
that was tampered with is repaired (the bad file is dropped), never trusted.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import IntegrityError, NotFoundError
from ..model.blob import decompress_verified, max_frame_size, verify_frame
from .backends import LocalStore, object_key, parse_key, signature_key, signature_prefix

__all__ = ["Cache", "default_cache_dir"]


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

    def signatures(self, digest: str) -> dict[str, bytes]:
        out = {}
        for inf in self.store.list(signature_prefix(digest) + "/"):
            parsed = parse_key(inf.key)
            if parsed is not None and parsed.keyid is not None:
                out[parsed.keyid] = self.store.read(inf.key)
        return out
