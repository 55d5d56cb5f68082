"""Any fsspec filesystem as a store (s3://, gs://, az://, memory://, ...), with bounded
retries around every call and the S3 options the AWS ecosystem expects."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ..errors import NotFoundError, RemoteError, StoreError
from ..model.urls import mask_options, mask_url
from . import retry
from .base import ObjectInfo, Store, too_large
from .remote import remote_error
from .retry import Breaker, RetryPolicy
from .s3_direct import S3Direct

__all__ = ["FsspecStore", "S3_CONNECT_TIMEOUT", "S3_READ_TIMEOUT"]

T = TypeVar("T")


class FsspecStore(Store):
    """Any fsspec filesystem: s3://, gs://, az://, memory://, file://, ...

    Every operation runs under :func:`casstore.store.retry.call`: transient failures (5xx,
    SlowDown, resets, timeouts) are retried with backoff and jitter within a bounded total
    time, then reported as one StoreError naming the key and the last cause. The backend's
    own retry loops are turned down (see :func:`_s3_options`) so the bound holds.
    """

    def __init__(self, url: str, options: dict[str, Any] | None = None) -> None:
        raw = url.rstrip("/")
        self.url = mask_url(raw)  # what messages show: never the credentials a URL may carry
        scheme, sep, rest = raw.partition("://")
        if sep and scheme in ("s3", "s3a"):
            protocol, path = scheme, rest  # what fsspec's split_protocol gives, without importing fsspec (~0.1 s)
        else:
            try:
                from fsspec.core import split_protocol
            except ImportError as exc:  # pragma: no cover - fsspec is a hard dependency
                raise StoreError("fsspec is not installed") from exc
            protocol, path = split_protocol(raw)
        protocol = protocol or "file"
        opts = dict(options or {})
        mask_options(opts)  # a backend error quoting a credential option prints *** instead
        if protocol in ("s3", "s3a"):
            opts = _s3_options(opts)
        self._s3 = protocol in ("s3", "s3a")
        self._protocol, self._opts = protocol, opts
        self._fs: Any = None
        self._fs_lock = threading.Lock()
        # S3 GET, ranged GET, LIST and a known-absent PUT through botocore alone where the options mean
        # the same to it; s3fs is then imported only for another call (casstore.store.s3_direct)
        self._direct = S3Direct.for_options(path.rstrip("/").split("/", 1)[0], opts) if self._s3 else None
        if self._direct is None:
            _ = self.fs  # open it now: an unusable backend or option is refused here
            self.root = self.fs._strip_protocol(raw).rstrip("/")
        else:
            self.root = path.rstrip("/")  # what s3fs's _strip_protocol gives: bucket/prefix
        self.policy = RetryPolicy.from_env()
        self.breaker = Breaker()

    @property
    def fs(self) -> Any:
        """The fsspec filesystem (opened on first use where S3 reads go through botocore)."""
        with self._fs_lock:
            if self._fs is None:
                self._fs = self._open_fs()
            return self._fs

    def _open_fs(self) -> Any:
        import fsspec

        protocol = self._protocol
        try:
            fs = fsspec.filesystem(protocol, **self._opts)
        except ImportError as exc:
            extra = " (install the s3 extra: pip install 'casstore[s3]')" if protocol.startswith("s3") else ""
            raise RemoteError(f"remote {mask_url(self.url)}: no fsspec backend for {protocol}://{extra}: "
                              f"{mask_url(str(exc))}") from None
        except (ValueError, TypeError) as exc:
            raise RemoteError(f"remote {mask_url(self.url)}: cannot open it: {mask_url(str(exc))}") from None
        if self._s3 and hasattr(fs, "retries"):
            fs.retries = 1  # s3fs's own loop; ours (casstore.store.retry) is the bounded one
        return fs

    def prepare_writes(self) -> None:
        if self._direct is not None:
            self._direct.prepare_writes()

    def _p(self, key: str) -> str:
        if key.startswith("/") or ".." in key.split("/"):
            raise StoreError(f"refusing key outside the store: {key!r}")
        return f"{self.root}/{key}"

    def _rel(self, path: str) -> str:
        if self._direct is None:
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
        if self._direct is not None:
            direct = self._direct
            return self._retry(lambda: direct.get(_s3_key(path)), what, missing=key)
        data = self._retry(lambda: self.fs.cat_file(path), what, missing=key)
        return bytes(data)

    def read_range(self, key: str, start: int, end: int) -> bytes:
        path = self._p(key)
        what = f"cannot read {key} from {self.url}"
        if self._direct is not None and 0 <= start < end:
            direct = self._direct
            return self._retry(lambda: direct.get(_s3_key(path), start, end), what, missing=key)
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

        if checked and self._direct is not None and len(data) < PUT_ONCE_BYTES:
            direct = self._direct

            def put_direct() -> bool:
                direct.put(_s3_key(path), data)  # one PUT, as s3fs's pipe_file sends it
                return True

            return self._retry(put_direct, what)

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
            if self._direct is not None:
                direct = self._direct
                under = _s3_key(self.root + "/") if "/" in self.root else ""
                key_prefix = under + prefix.strip("/") + "/" if prefix.strip("/") else under
                try:
                    return {f"{direct.bucket}/{k}": inf for k, inf in direct.list(key_prefix)}
                except FileNotFoundError as exc:
                    self._check_remote(exc)  # no bucket is not an empty listing
                    return {}
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


def _s3_key(path: str) -> str:
    """The object key of ``bucket/key``."""
    return path.split("/", 1)[1] if "/" in path else ""


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


# s3fs's pipe_file sends one PUT below min(5 GiB, 2 x its 50 MiB chunk), a multipart upload above
PUT_ONCE_BYTES = 2 * 50 * 2**20

S3_CONNECT_TIMEOUT = 10.0
S3_READ_TIMEOUT = 30.0


def _s3_options(opts: dict[str, Any]) -> dict[str, Any]:
    """Endpoints, credentials and timeouts the way the AWS ecosystem expects.

    botocore reads AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_PROFILE / AWS_REGION and
    AWS_ENDPOINT_URL(_S3) itself; we pass the endpoint explicitly as well so that older
    botocore versions and s3fs's own client honour it.

    Unless the user configured them in ``config_kwargs``, botocore's own retries are off
    (``casstore.store.retry`` retries instead, with a bounded total time) and connect/read
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
