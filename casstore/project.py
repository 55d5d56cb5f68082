"""A casstore project: a repository root with its config, lock, trusted keys, store and cache
(the I/O the CLI, the replay library and the git hooks share)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .config import Config, locate
from .errors import IntegrityError, LockError, NotFoundError, StoreError, UsageError
from .model.blob import digest_and_size, max_frame_size
from .model.defaults import LOCK_FILE
from .model.fsutil import atomic_write
from .model.lock import Lock, Pin, format_lock, parse_lock, shown
from .model.names import validate_name
from .model.urls import mask_url
from .store.backends import Store, object_key, open_store
from .store.cache import Cache
from .store.signing import TrustedKeys, verify_pin

if TYPE_CHECKING:  # read cassettes import it (verify and pull read none)
    from .model.cassette import Cassette

__all__ = ["Project", "DEFAULT_REMOTE"]

DEFAULT_REMOTE = ".casstore/store"


def who_pushes(pin: Pin) -> str:
    """Who can upload a pinned object the store lacks: the one who pinned it, from the clone
    where they did (only their cache holds it)."""
    signers = sorted({shown(s.signer) for s in pin.signatures})
    who = " or ".join(signers) if signers else "whoever pinned it"
    return (f"pinned but not pushed: {who} runs `casstore push` in the clone that pinned it "
            "(`casstore hooks install` there makes `git push` upload it)")


# casstore.lock files read in this process: path -> ((inode, mtime_ns, size), Lock). casstore
# writes the lock by rename (a new inode); for other writers see the rule in load_lock.
_LOCK_STAMPS: dict[Path, tuple[tuple[int, int, int], Lock]] = {}

@dataclass
class Project:
    root: Path
    config: Config = field(default_factory=Config)
    _store: Store | None = None
    _cache: Cache | None = None

    @classmethod
    def discover(cls, start: Path | str | None = None) -> Project:
        return cls(*locate(start))

    @classmethod
    def require(cls, start: Path | str | None = None) -> Project:
        """:meth:`discover`, refusing a folder with no casstore configuration here or above."""
        return cls(*locate(start, required=True))

    # -- files -------------------------------------------------------------------
    @property
    def lock_path(self) -> Path:
        return self.root / LOCK_FILE

    @property
    def trusted_keys_path(self) -> Path:
        return self.root / self.config.trusted_keys_file

    @property
    def cassette_dir(self) -> Path:
        return self.root / self.config.cassette_dir

    def working_copy_path(self, name: str) -> Path:
        return self.cassette_dir / f"{validate_name(name)}.json"

    def load_lock(self, *, required: bool = False) -> Lock:
        path = self.lock_path
        try:  # unchanged since the last read (same inode, mtime, size): no read, no hash
            st = path.stat()
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
            known = _LOCK_STAMPS.get(path)
            if known is not None and known[0] == stamp:
                return known[1]
        except OSError:
            stamp = None
        try:
            text = path.read_bytes()
        except FileNotFoundError:
            if required:
                raise LockError(f"no {LOCK_FILE} in {self.root.name}/: nothing is pinned (run `casstore add`)") from None
            return Lock()
        except OSError as exc:
            raise LockError(f"cannot read {LOCK_FILE}: {exc.strerror or exc}") from None
        lock = parse_lock(text)
        # like git's "racily clean" rule: trust the stamp only for a file last written well
        # before this read, so an in-place rewrite of the same size cannot reuse its mtime
        if stamp is not None and len(text) == stamp[2] and stamp[1] < time.time_ns() - 50_000_000:
            if len(_LOCK_STAMPS) > 64:
                _LOCK_STAMPS.clear()
            _LOCK_STAMPS[path] = (stamp, lock)
        return lock

    def save_lock(self, lock: Lock, blocks: Mapping[str, str] | None = None) -> None:
        """Write ``lock`` (atomically); ``blocks``: pins written as these blocks, in place of
        ``lock``'s pins of their names or beside them (see :func:`format_lock`)."""
        atomic_write(self.lock_path, format_lock(lock, blocks).encode("utf-8"))

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        import fcntl

        guard = self.root / ".casstore" / "lock.guard"
        guard.parent.mkdir(parents=True, exist_ok=True)
        with open(guard, "a+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def trusted_keys(self) -> TrustedKeys:
        return TrustedKeys.load(self.trusted_keys_path)

    def signatures_required(self, trusted: TrustedKeys | None = None) -> bool:
        if self.config.require_signatures is not None:
            return self.config.require_signatures
        return bool(trusted if trusted is not None else self.trusted_keys())

    # -- store and cache -------------------------------------------------------------
    @property
    def remote_location(self) -> str:
        """The remote URL as configured, credentials included: for opening the store only."""
        return os.environ.get("CASSTORE_REMOTE") or self.config.remote_url or DEFAULT_REMOTE

    @property
    def remote_url(self) -> str:
        """The remote URL for messages and reports: credentials masked (:func:`mask_url`)."""
        return mask_url(self.remote_location)

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = open_store(self.remote_location, self.config.remote_options, base=self.root,
                                     pack_threshold=self.config.pack_threshold)
        return self._store

    @property
    def cache(self) -> Cache:
        if self._cache is None:
            self._cache = Cache()
        return self._cache

    # -- reading pinned cassettes ---------------------------------------------------
    def fetch_verified(self, pin: Pin) -> bytes:
        """Canonical bytes of ``pin``: from the cache, else fetched from the store and verified."""
        data = self.cache.get(pin.digest, pin.size)
        if data is not None:
            return data
        try:
            frame = self.store.read_bounded(object_key(pin.digest), max_frame_size(pin.size))
        except NotFoundError:
            raise NotFoundError(
                f"{pin.name}: {pin.digest} is neither in the cache nor in the store {self.remote_url}; "
                + who_pushes(pin)
            ) from None
        except StoreError as exc:
            raise StoreError(f"{pin.name}: {exc}") from exc
        except IntegrityError as exc:
            raise IntegrityError(f"{pin.name}: {exc}") from None
        try:
            return self.cache.put_frame(pin.digest, pin.size, frame)
        except IntegrityError as exc:
            raise IntegrityError(f"{pin.name}: {exc}") from None

    def load_pinned(self, pin: Pin, trusted: TrustedKeys | None = None) -> Cassette:
        from .model.cassette import load_bytes

        trusted = trusted if trusted is not None else self.trusted_keys()
        verify_pin(pin, trusted, required=self.signatures_required(trusted))
        data = self.fetch_verified(pin)
        cas = load_bytes(data, source=f"{pin.name} ({pin.digest})")
        if cas.name != pin.name:
            raise IntegrityError(f"{pin.name}: pinned object holds cassette {cas.name!r}")
        return cas

    def resolve_cassette(self, name: str, *, prefer_working_copy: bool = False) -> Cassette | None:
        """The cassette ``name`` for replay: pinned (verified; else an error) first, else the
        working copy. ``prefer_working_copy`` (record-new, refresh) takes a working copy that
        differs from its pin: it holds what was recorded since ``casstore add``."""
        validate_name(name)
        pin = self.load_lock().pins.get(name)
        if pin is not None:
            newer = self.changed_working_copy(name) if prefer_working_copy else None
            return newer if newer is not None else self.load_pinned(pin)
        path = self.working_copy_path(name)
        if path.is_file():
            from .model.cassette import load_file

            return load_file(path)
        return None

    def changed_working_copy(self, name: str) -> Cassette | None:
        """The working copy of the pinned ``name`` when its content differs from the pin
        (re-recorded and not yet ``casstore add``-ed), else None."""
        pin = self.load_lock().pins.get(name)
        path = self.working_copy_path(name)
        if pin is None or not path.is_file():
            return None
        from .model.cassette import load_file

        wc = load_file(path)
        return wc if digest_and_size(wc.canonical_bytes())[0] != pin.digest else None

    def check_inside(self, path: Path) -> Path:
        """Resolve ``path`` and refuse one outside the project (symlinks included)."""
        real = path.resolve()
        root = self.root.resolve()
        if real != root and root not in real.parents:
            raise UsageError(f"{path}: outside the project {root.name}/ (refusing to follow it)")
        return real
