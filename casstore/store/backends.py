"""Stores: one small interface, three backends (local folder, memory, any fsspec URL).

Layout (identical for the local cache)::

    <root>/objects/sha256/<2 hex>/<62 hex>           zstd frame of the canonical bytes
    <root>/signatures/sha256/<2>/<62>/<keyid>.sig    signature envelope (JSON)

The store knows keys and bytes, nothing about verification: callers verify every read
(:func:`casstore.blob.decompress_verified`). Writes are write-once and atomic: an
existing object of the same size is success; a reader never sees a partial object
under its final name (temp + fsync + rename locally, one PUT on object stores).
"""

from __future__ import annotations

import builtins
import contextlib
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..errors import IntegrityError, NotFoundError, RemoteError, StoreError
from ..fsutil import atomic_write
from ..model.canonical import parse_digest
from ..model.urls import mask_options, mask_url
from . import retry
from .remote import check_url, remote_error
from .retry import Breaker, RetryPolicy

T = TypeVar("T")

__all__ = [
    "Store",
    "LocalStore",
    "MemoryStore",
    "FsspecStore",
    "ObjectInfo",
    "open_store",
    "object_key",
    "signature_key",
    "digest_from_key",
    "parse_key",
    "StoreKey",
]


def object_key(digest: str) -> str:
    hexd = parse_digest(digest)
    return f"objects/sha256/{hexd[:2]}/{hexd[2:]}"


def signature_prefix(digest: str) -> str:
    hexd = parse_digest(digest)
    return f"signatures/sha256/{hexd[:2]}/{hexd[2:]}"


def signature_key(digest: str, keyid: str) -> str:
    if not keyid or not all(c in "0123456789abcdef" for c in keyid):
        raise StoreError(f"invalid key id {keyid!r}")
    return f"{signature_prefix(digest)}/{keyid}.sig"


@dataclass(frozen=True)
class StoreKey:
    """What a store key names: the object of ``digest`` or one of its signature envelopes.

    For a file in a signature folder, ``keyid`` is the key id of a well-formed
    ``<hex keyid>.sig`` name and ``None`` for anything else there (a stray).
    """

    kind: str  # "object" | "signature"
    digest: str
    keyid: str | None = None


_HEX = frozenset("0123456789abcdef")


def parse_key(key: str) -> StoreKey | None:
    """The one parser of the key layout (``objects/sha256/<2>/<62>``,
    ``signatures/sha256/<2>/<62>/<keyid>.sig``); ``None`` for any other key."""
    parts = key.split("/")
    if len(parts) not in (4, 5) or parts[1] != "sha256":
        return None
    hexd = parts[2] + parts[3]
    if len(parts[2]) != 2 or len(hexd) != 64 or not _HEX.issuperset(hexd):
        return None
    if len(parts) == 4:
        return StoreKey("object", "sha256:" + hexd) if parts[0] == "objects" else None
    if parts[0] != "signatures":
        return None
    keyid = parts[4].removesuffix(".sig") if parts[4].endswith(".sig") else ""
    return StoreKey("signature", "sha256:" + hexd, keyid if 0 < len(keyid) <= 64 and _HEX.issuperset(keyid) else None)


def digest_from_key(key: str) -> str | None:
    """The digest of an object key, ``None`` for any other key."""
    parsed = parse_key(key)
    return parsed.digest if parsed is not None and parsed.kind == "object" else None


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
        """Return the bytes at ``key``; raise NotFoundError if absent, StoreError on I/O."""

    @abstractmethod
    def write_once(self, key: str, data: bytes, *, checked: bool = False) -> bool:
        """Write ``data`` at ``key`` unless an object of the same size is there.

        ``checked=True`` says the caller already knows the key is absent or wrong (from a
        listing), so backends skip their own existence probe: one request per object.

        Returns True when this call wrote. An object of a different size (a torn or
        corrupt write by someone else) is replaced atomically: keys are content
        addresses, so the right content is the one we hold.
        """

    @abstractmethod
    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object under ``prefix`` (a folder key like ``objects/``)."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key``; absent is fine."""

    def info(self, key: str) -> ObjectInfo | None:
        parent = key.rsplit("/", 1)[0] + "/"
        for inf in self.list(parent):
            if inf.key == key:
                return inf
        return None

    def read_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``start``..``end`` of ``key`` (fewer if it is shorter)."""
        return self.read(key)[start:end]

    def read_bounded(self, key: str, limit: int) -> bytes:
        """The bytes at ``key`` if there are at most ``limit`` of them; else IntegrityError.

        Never holds more than ``limit + 1`` bytes: the read stops there (a ranged read on
        object stores), so an object grown by appended bytes costs nothing to refuse.
        """
        data = self.read_range(key, 0, limit + 1)
        if len(data) > limit:
            raise too_large(key, self.url, limit)
        return data

    def exists_many(self, keys: Iterable[str]) -> dict[str, int]:
        """``{key: size}`` for the keys that exist, found with one listing per top folder."""
        wanted = set(keys)
        if not wanted:
            return {}
        found: dict[str, int] = {}
        tops = {k.split("/", 1)[0] + "/" for k in wanted}
        for top in sorted(tops):
            for inf in self.list(top):
                if inf.key in wanted:
                    found[inf.key] = inf.size
        return found

    def stat_many(self, keys: Iterable[str]) -> dict[str, ObjectInfo]:
        """Like :meth:`exists_many`, with each key's :class:`ObjectInfo`."""
        wanted = set(keys)
        found: dict[str, ObjectInfo] = {}
        for top in sorted({k.split("/", 1)[0] + "/" for k in wanted}):
            for inf in self.list(top):
                if inf.key in wanted:
                    found[inf.key] = inf
        return found

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


class LocalStore(Store):
    def __init__(self, root: Path | str, *, readonly_files: bool = False, durable: bool = True,
                 confined: bool = False) -> None:
        self.root = Path(root)
        self.url = str(self.root)
        self._mode = 0o444 if readonly_files else None
        self._durable = durable  # False: no fsync (a cache whose every read is verified)
        # True: writes and deletes never go through a symlink that leads out of the root
        # (the root itself may be a link: a cache on a bigger disk)
        self._confined = confined

    def _path(self, key: str) -> Path:
        if key.startswith("/") or ".." in key.split("/"):
            raise StoreError(f"refusing key outside the store: {key!r}")
        return self.root / key

    def _writable(self, key: str) -> Path:
        path = self._path(key)
        if self._confined:
            real, root = path.parent.resolve(), self.root.resolve()
            if real != root and root not in real.parents:
                raise StoreError(f"refusing to write {key}: a symlink in {self.url} leads out of it (to {real})")
        return path

    def read(self, key: str) -> bytes:
        if key.startswith("/") or ".." in key.split("/"):
            raise StoreError(f"refusing key outside the store: {key!r}")
        try:
            with open(os.path.join(self.url, key), "rb") as fh:  # str paths: no pathlib per read
                return fh.read()
        except FileNotFoundError:
            raise NotFoundError(f"{key} is not in {self.url}") from None
        except IsADirectoryError:
            raise NotFoundError(f"{key} is not in {self.url}") from None
        except OSError as exc:
            raise StoreError(f"cannot read {key} from {self.url}: {exc.strerror or exc}") from exc

    def read_range(self, key: str, start: int, end: int) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                f.seek(start)
                return f.read(max(0, end - start))
        except (FileNotFoundError, IsADirectoryError):
            raise NotFoundError(f"{key} is not in {self.url}") from None
        except OSError as exc:
            raise StoreError(f"cannot read {key} from {self.url}: {exc.strerror or exc}") from exc

    def read_bounded(self, key: str, limit: int) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                if os.fstat(f.fileno()).st_size > limit:
                    raise too_large(key, self.url, limit)
                data = f.read(limit + 1)
        except (FileNotFoundError, IsADirectoryError):
            raise NotFoundError(f"{key} is not in {self.url}") from None
        except OSError as exc:
            raise StoreError(f"cannot read {key} from {self.url}: {exc.strerror or exc}") from exc
        if len(data) > limit:  # grew while we read
            raise too_large(key, self.url, limit)
        return data

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
        """Temp files of writes that never finished (a killed process), older than ``cutoff``."""
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

    def exists_many(self, keys: Iterable[str]) -> dict[str, int]:
        return {k: inf.size for k, inf in self.stat_many(keys).items()}

    def stat_many(self, keys: Iterable[str]) -> dict[str, ObjectInfo]:
        out = {}
        for k in keys:
            inf = self.info(k)
            if inf is not None:
                out[k] = inf
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


class FsspecStore(Store):
    """Any fsspec filesystem: s3://, gs://, az://, memory://, file://, ...

    Every operation runs under :func:`casstore.retry.call`: transient failures (5xx,
    SlowDown, resets, timeouts) are retried with backoff and jitter within a bounded total
    time, then reported as one StoreError naming the key and the last cause. The backend's
    own retry loops are turned down (see :func:`_s3_options`) so the bound holds.
    """

    def __init__(self, url: str, options: dict[str, Any] | None = None) -> None:
        try:
            import fsspec
            from fsspec.core import split_protocol
        except ImportError as exc:  # pragma: no cover - fsspec is a hard dependency
            raise StoreError("fsspec is not installed") from exc
        raw = url.rstrip("/")
        self.url = mask_url(raw)  # what messages show: never the credentials a URL may carry
        protocol, path = split_protocol(raw)
        protocol = protocol or "file"
        opts = dict(options or {})
        mask_options(opts)  # a backend error quoting a credential option prints *** instead
        if protocol in ("s3", "s3a"):
            opts = _s3_options(opts)
        try:
            self.fs = fsspec.filesystem(protocol, **opts)
        except ImportError as exc:
            extra = " (install the s3 extra: pip install 'casstore[s3]')" if protocol.startswith("s3") else ""
            raise RemoteError(f"remote {mask_url(self.url)}: no fsspec backend for {protocol}://{extra}: "
                              f"{mask_url(str(exc))}") from None
        except (ValueError, TypeError) as exc:
            raise RemoteError(f"remote {mask_url(self.url)}: cannot open it: {mask_url(str(exc))}") from None
        if protocol in ("s3", "s3a") and hasattr(self.fs, "retries"):
            self.fs.retries = 1  # s3fs's own loop; ours (casstore.retry) is the bounded one
        self.root = self.fs._strip_protocol(raw).rstrip("/")
        self._s3 = protocol in ("s3", "s3a")
        self.policy = RetryPolicy.from_env()
        self.breaker = Breaker()

    def _p(self, key: str) -> str:
        if key.startswith("/") or ".." in key.split("/"):
            raise StoreError(f"refusing key outside the store: {key!r}")
        return f"{self.root}/{key}"

    def _rel(self, path: str) -> str:
        path = self.fs._strip_protocol(path)
        return path[len(self.root) + 1 :] if path.startswith(self.root + "/") else path

    def _retry(self, fn: Callable[[], T], what: str, *, missing: str | None = None) -> T:
        """Run one backend operation under the retry policy; every backend error is converted
        here, at the boundary: the remote's configuration (RemoteError), a missing ``missing``
        key (NotFoundError), else StoreError naming ``what``."""
        try:
            return retry.call(fn, what=what, policy=self.policy, breaker=self.breaker)
        except FileNotFoundError as exc:
            if missing is None:
                raise self._fail(exc, what) from exc
            self._check_remote(exc)
            raise NotFoundError(f"{missing} is not in {self.url}") from None
        except StoreError:
            raise
        except Exception as exc:  # backend errors are many and varied: convert at the boundary
            raise self._fail(exc, what) from exc

    def _check_remote(self, exc: BaseException) -> None:
        """Raise the RemoteError behind ``exc`` (a bucket that does not exist), if any."""
        err = remote_error(exc, self.url)
        if err is not None:
            raise err from None

    def _fail(self, exc: BaseException, what: str) -> RemoteError | StoreError:
        """The error to raise for a backend failure: the remote's configuration, else I/O."""
        return remote_error(exc, self.url) or StoreError(f"{what}: {_describe(exc)}")

    def read(self, key: str) -> bytes:
        path = self._p(key)
        what = f"cannot read {key} from {self.url}"
        data = self._retry(lambda: self.fs.cat_file(path), what, missing=key)
        return bytes(data)

    def read_range(self, key: str, start: int, end: int) -> bytes:
        path = self._p(key)
        what = f"cannot read {key} from {self.url}"
        data = self._retry(lambda: self.fs.cat_file(path, start=start, end=end), what, missing=key)
        return bytes(data)

    def read_bounded(self, key: str, limit: int) -> bytes:
        try:
            data = self.read_range(key, 0, limit + 1)  # one ranged GET: the server stops there
        except StoreError as exc:
            if "not satisfiable" not in str(exc) and "InvalidRange" not in str(exc):
                raise
            data = b""  # S3 refuses any range of an empty object
        if len(data) > limit:
            raise too_large(key, self.url, limit)
        return data

    def write_once(self, key: str, data: bytes, *, checked: bool = False) -> bool:
        path = self._p(key)
        what = f"cannot write {key} to {self.url}"

        def put() -> bool:
            if not checked:
                try:
                    inf = self.fs.info(path)
                except FileNotFoundError:
                    inf = None
                if inf is not None and inf.get("type") != "directory" and inf.get("size") == len(data):
                    return False
            # one PUT: an object store never shows a partial object; a retried PUT of a
            # content address writes the same bytes again, so a lost answer is harmless
            self.fs.pipe_file(path, data)
            return True

        return self._retry(put, what)

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        base = self._p(prefix.rstrip("/"))

        def find() -> dict[str, Any]:
            self.fs.invalidate_cache()
            try:
                if self._s3 and "/" in self.root and prefix.strip("/"):
                    # one LIST of the key prefix: s3fs's find(base) follows an empty listing
                    # with a HEAD and a second LIST to learn whether base is a file
                    key_prefix = prefix.strip("/") + "/"
                    return dict(self.fs.find(self.root, prefix=key_prefix, detail=True))
                return dict(self.fs.find(base, detail=True))
            except FileNotFoundError as exc:
                self._check_remote(exc)  # no bucket is not an empty listing
                return {}

        found = self._retry(find, f"cannot list {prefix} in {self.url}")
        for path, inf in sorted(found.items()):
            if inf.get("type") == "directory":
                continue
            yield ObjectInfo(self._rel(path), int(inf.get("size") or 0), _mtime(inf), _etag(inf))

    def info(self, key: str) -> ObjectInfo | None:
        path = self._p(key)

        def stat() -> dict[str, Any] | None:
            try:
                found: dict[str, Any] = self.fs.info(path)
                return found
            except FileNotFoundError as exc:
                self._check_remote(exc)
                return None

        inf = self._retry(stat, f"cannot stat {key} in {self.url}")
        if inf is None or inf.get("type") == "directory":
            return None
        return ObjectInfo(key, int(inf.get("size") or 0), _mtime(inf), _etag(inf))

    def delete(self, key: str) -> None:
        path = self._p(key)

        def rm() -> None:
            try:
                self.fs.rm_file(path)
            except FileNotFoundError as exc:
                self._check_remote(exc)
                return

        self._retry(rm, f"cannot delete {key} from {self.url}")


def too_large(key: str, url: str, limit: int) -> IntegrityError:
    return IntegrityError(f"{key} in {url} is larger than its pin allows (over {limit} bytes); refusing it")


def _etag(inf: dict[str, Any]) -> str | None:
    tag = inf.get("ETag") or inf.get("etag")
    return str(tag).strip('"') if tag else None


def _mtime(inf: dict[str, Any]) -> float | None:
    for k in ("LastModified", "mtime", "created", "last_modified"):
        v = inf.get(k)
        if v is None:
            continue
        if hasattr(v, "timestamp"):
            return float(v.timestamp())
        with contextlib.suppress(TypeError, ValueError):
            return float(v)
    return None


def _describe(exc: BaseException) -> str:
    text = mask_url(str(exc) or type(exc).__name__)
    return text.splitlines()[0][:300]


S3_CONNECT_TIMEOUT = 10.0
S3_READ_TIMEOUT = 30.0


def _s3_options(opts: dict[str, Any]) -> dict[str, Any]:
    """Endpoints, credentials and timeouts the way the AWS ecosystem expects.

    botocore reads AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_PROFILE / AWS_REGION and
    AWS_ENDPOINT_URL(_S3) itself; we pass the endpoint explicitly as well so that older
    botocore versions and s3fs's own client honour it.

    Unless the user configured them in ``config_kwargs``, botocore's own retries are off
    (``casstore.retry`` retries instead, with a bounded total time) and connect/read
    timeouts are explicit, so a stalled response times out instead of hanging.
    """
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    raw_ck = opts.get("client_kwargs")
    client_kwargs: dict[str, Any] = raw_ck if isinstance(raw_ck, dict) else {}
    if endpoint and "endpoint_url" not in opts and "endpoint_url" not in client_kwargs:
        opts["endpoint_url"] = endpoint
    ck = opts.get("config_kwargs")
    ck = dict(ck) if isinstance(ck, dict) else {}
    ck.setdefault("retries", {"total_max_attempts": 1, "mode": "standard"})
    ck.setdefault("connect_timeout", S3_CONNECT_TIMEOUT)
    ck.setdefault("read_timeout", S3_READ_TIMEOUT)
    # enough pooled connections for --jobs 64 (botocore's default is 10)
    ck.setdefault("max_pool_connections", 64)
    opts["config_kwargs"] = ck
    # s3fs sends a HEAD before every GET when max_concurrency > 1 (to split large objects
    # into ranged GETs); cassette objects are small, so one GET per object is the fast path
    opts.setdefault("max_concurrency", 1)
    return opts


def open_store(url: str, options: dict[str, Any] | None = None, *, base: Path | None = None,
               pack_threshold: int | None = None) -> Store:
    """Open the store at ``url``: a path (relative to ``base``), ``file://`` or any fsspec URL.

    The store is returned wrapped in :class:`casstore.packs.PackedStore`, which reads packs
    as well as loose objects and packs pushes of ``pack_threshold`` or more objects on
    remote (non-local) stores; ``pack_threshold=0`` never writes packs.
    """
    from .packs import DEFAULT_PACK_THRESHOLD, PackedStore

    inner: Store
    check_url(url)  # `s3//bucket` is a typo, not a folder named s3
    if "://" not in url:
        path = Path(url)
        if not path.is_absolute() and base is not None:
            path = base / path
        inner = LocalStore(path)
    elif url.startswith("file://"):
        inner = LocalStore(Path(url[len("file://") :]))
    else:
        inner = FsspecStore(url, options)
    return PackedStore(inner, pack_threshold=DEFAULT_PACK_THRESHOLD if pack_threshold is None else pack_threshold)
