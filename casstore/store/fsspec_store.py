"""Any fsspec filesystem as a store (s3://, gs://, az://, memory://, ...), with bounded
retries around every call; S3 through obstore's filesystem (:mod:`casstore.store.s3`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ..errors import IntegrityError, NotFoundError, RemoteError, StoreError
from ..model.urls import mask_options, mask_url
from . import retry
from .base import ObjectInfo, RangeNotHonoured, Store, check_key, too_large
from .remote import error_code, remote_error
from .retry import Breaker, RetryPolicy

__all__ = ["FsspecStore"]

T = TypeVar("T")


class FsspecStore(Store):
    """Any fsspec filesystem, every operation under :func:`casstore.store.retry.call` (the
    backend's own retries turned down, so the bound holds)."""

    def __init__(self, url: str, options: dict[str, Any] | None = None) -> None:
        raw = url.rstrip("/")
        self.url = mask_url(raw)  # what messages show: never the credentials a URL may carry
        from fsspec.core import split_protocol

        protocol, path = split_protocol(raw)
        protocol = protocol or "file"
        opts = dict(options or {})
        mask_options(opts)  # a backend error quoting a credential option prints *** instead
        self._s3 = protocol in ("s3", "s3a")
        self.fs = self._open_fs(raw, protocol, path, opts)  # an unusable backend or option is refused here
        self.root = self.fs._strip_protocol(raw).rstrip("/")
        self.policy = RetryPolicy.from_env()
        self.breaker = Breaker()

    def _open_fs(self, url: str, protocol: str, path: str, opts: dict[str, Any]) -> Any:
        try:
            if self._s3:
                from .s3 import s3_filesystem

                return s3_filesystem(url, protocol, path.split("/", 1)[0], opts)
            import fsspec

            return fsspec.filesystem(protocol, **opts)
        except ImportError as exc:
            extra = " (install the s3 extra: pip install 'casstore[s3]')" if self._s3 else ""
            raise RemoteError(f"remote {self.url}: no fsspec backend for {protocol}://{extra}: "
                              f"{mask_url(str(exc))}") from None
        except (ValueError, TypeError) as exc:
            raise RemoteError(f"remote {self.url}: cannot open it: {mask_url(str(exc))}") from None

    def _p(self, key: str) -> str:
        return f"{self.root}/{check_key(key)}"

    def _rel(self, path: str) -> str:
        path = self.fs._strip_protocol(path)
        return path[len(self.root) + 1 :] if path.startswith(self.root + "/") else path

    def _retry(self, fn: Callable[[], T], what: str, *, missing: str | None = None) -> T:
        """Run one backend operation under the retry policy, its errors converted: RemoteError,
        NotFoundError (of ``missing``), else StoreError naming ``what``."""
        try:
            return retry.call(fn, what=what, policy=self.policy, breaker=self.breaker)
        except FileNotFoundError as exc:
            if missing is None:
                raise self._fail(exc, what) from exc
            self._check_remote(exc)
            raise NotFoundError(f"{missing} is not in {self.url}") from None
        except (StoreError, IntegrityError):
            raise
        except Exception as exc:  # backend errors are many and varied: convert at the boundary
            raise self._fail(exc, what) from exc

    def _check_remote(self, exc: BaseException) -> None:
        err = remote_error(exc, self.url)
        if err is not None:
            raise err from None

    def _fail(self, exc: BaseException, what: str) -> RemoteError | StoreError:
        return remote_error(exc, self.url) or StoreError(f"{what}: {_describe(exc)}")

    def read(self, key: str) -> bytes:
        path = self._p(key)
        what = f"cannot read {key} from {self.url}"
        data = self._retry(lambda: self.fs.cat_file(path), what, missing=key)
        return bytes(data)

    def read_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``start``..``end``; more than that is refused (IntegrityError, not retried)."""
        path = self._p(key)
        what = f"cannot read {key} from {self.url}"

        def get() -> bytes:
            try:
                data = self.fs.cat_file(path, start=start, end=end)
            except RangeNotHonoured as exc:
                got = str(exc)
            else:
                if len(data) <= end - start:
                    return bytes(data)
                got = f"{len(data)} bytes"
            raise IntegrityError(f"{key} in {self.url}: asked for {end - start} bytes ({start}..{end}), the store "
                                 f"sent {got} (does it ignore Range?); refusing it")

        return self._retry(get, what, missing=key)

    def read_bounded(self, key: str, limit: int) -> bytes:
        try:
            data = self.read_range(key, 0, limit + 1)  # one ranged GET: the server stops there
        except StoreError as exc:
            if (error_code(exc) or ("", 0))[1] != 416:
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
                if self._s3:  # one flat listing of the key prefix (casstore.store.s3.S3Filesystem)
                    key_prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
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


def _etag(inf: dict[str, Any]) -> str | None:
    tag = inf.get("ETag") or inf.get("etag") or inf.get("e_tag")
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
