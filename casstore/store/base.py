"""The Store interface every backend implements, and what a listing returns."""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import IntegrityError, StoreError

__all__ = ["ObjectInfo", "Store", "RangeNotHonoured", "check_key", "too_large"]


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    mtime: float | None  # seconds since the epoch, when the backend knows
    etag: str | None = None  # the backend's checksum when it lists one (S3: the MD5 of a single PUT)


class Store(ABC):
    """The interface every backend implements. Keys are ``/``-separated relative paths."""

    url: str

    @abstractmethod
    def read(self, key: str) -> bytes:
        """The bytes at ``key``; NotFoundError if absent, StoreError on I/O."""

    @abstractmethod
    def write_once(self, key: str, data: bytes, *, checked: bool = False) -> bool:
        """Write ``data`` at ``key`` unless an object of the same size is there (one of another
        size is replaced atomically); True when this call wrote. ``checked``: the caller
        knows the key is absent or wrong, so no existence probe."""

    @abstractmethod
    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object under ``prefix`` (a folder key like ``objects/``)."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key``; absent is fine."""

    def info(self, key: str) -> ObjectInfo | None:
        parent = key.rsplit("/", 1)[0] + "/"
        return next((inf for inf in self.list(parent) if inf.key == key), None)

    def read_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``start``..``end`` of ``key`` (fewer if it is shorter)."""
        return self.read(key)[start:end]

    def read_bounded(self, key: str, limit: int) -> bytes:
        """The bytes at ``key`` if there are at most ``limit`` of them, else IntegrityError;
        never more than ``limit + 1`` bytes are read."""
        data = self.read_range(key, 0, limit + 1)
        if len(data) > limit:
            raise too_large(key, self.url, limit)
        return data

    def exists_many(self, keys: Iterable[str]) -> dict[str, int]:
        """``{key: size}`` for the keys that exist."""
        return {k: inf.size for k, inf in self.stat_many(keys).items()}

    def stat_many(self, keys: Iterable[str]) -> dict[str, ObjectInfo]:
        """``{key: its ObjectInfo}`` for the keys that exist, found with one listing per top folder."""
        wanted = set(keys)
        found: dict[str, ObjectInfo] = {}
        for top in sorted({k.split("/", 1)[0] + "/" for k in wanted}):
            for inf in self.list(top):
                if inf.key in wanted:
                    found[inf.key] = inf
        return found

    def stray_packs(self) -> builtins.list[ObjectInfo]:
        """Packs with no index (an interrupted write left them): none outside a packed store."""
        return []

    def stale_temp_files(self, cutoff: float) -> builtins.list[tuple[Path, int]]:
        """Temp files of writes killed mid-way, older than ``cutoff``: only a local folder has them."""
        return []

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


def check_key(key: str) -> str:
    """``key`` if it names a place inside the store; else StoreError."""
    if key.startswith("/") or ".." in key.split("/"):
        raise StoreError(f"refusing key outside the store: {key!r}")
    return key


def too_large(key: str, url: str, limit: int) -> IntegrityError:
    return IntegrityError(f"{key} in {url} is larger than its pin allows (over {limit} bytes); refusing it")


class RangeNotHonoured(Exception):  # noqa: N818 - a backend's answer, converted to IntegrityError by the store
    """A backend answered a ranged read with other bytes than asked (a server that ignores
    ``Range``, or sends more); its text says what came, as far as it was read."""
