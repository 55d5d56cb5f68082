"""Stores: :func:`open_store` over three backends (local folder, memory, any fsspec URL). A store
knows keys and bytes (callers verify every read); writes are write-once and atomic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import ObjectInfo, Store, too_large
from .keys import StoreKey, digest_from_key, object_key, parse_key, signature_key, signature_prefix
from .local import LocalStore, MemoryStore

__all__ = [
    "probe",
    "Store",
    "LocalStore",
    "MemoryStore",
    "ObjectInfo",
    "open_store",
    "is_local_url",
    "object_key",
    "signature_key",
    "signature_prefix",
    "digest_from_key",
    "parse_key",
    "StoreKey",
    "too_large",
]


def open_store(url: str, options: dict[str, Any] | None = None, *, base: Path | None = None,
               pack_threshold: int | None = None) -> Store:
    """The store at ``url`` (a path relative to ``base``, ``file://`` or any fsspec URL) as a
    :class:`~casstore.store.packs.PackedStore`; ``pack_threshold=0`` never writes packs."""
    from .packs import DEFAULT_PACK_THRESHOLD, PackedStore
    from .remote import check_url

    inner: Store
    check_url(url)  # `s3//bucket` is a typo, not a folder named s3
    if not is_local_url(url):
        # imported only here: a local remote never needs it or its imports
        from .fsspec_store import FsspecStore

        inner = FsspecStore(url, options)
    elif "://" not in url:
        path = Path(url)
        if not path.is_absolute() and base is not None:
            path = base / path
        inner = LocalStore(path)
    else:
        inner = LocalStore(Path(url[len("file://") :]))
    return PackedStore(inner, pack_threshold=DEFAULT_PACK_THRESHOLD if pack_threshold is None else pack_threshold)


def is_local_url(url: str) -> bool:
    """Whether :func:`open_store` opens ``url`` as a local folder (a path or ``file://``)."""
    return "://" not in url or url.startswith("file://")


def probe(url: str, options: dict[str, Any] | None = None) -> None:
    """Refuse (RemoteError) a remote that cannot be used as it is (no backend, no bucket, no
    credentials, access denied), by one listing; a local folder is not probed."""
    from ..errors import CasstoreError, RemoteError
    from ..model.urls import mask_url
    from .remote import check_url

    check_url(url)
    if is_local_url(url):
        return
    shown = mask_url(url)
    try:  # opening it refuses a backend that is not installed (the message names the package)
        next(iter(open_store(url, options).list("objects/")), None)
    except RemoteError:
        raise
    except CasstoreError as exc:
        raise RemoteError(f"remote {shown}: cannot be listed ({exc})") from None

