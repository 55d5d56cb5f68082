"""S3 through botocore alone: what ``pull``, ``push`` and ``verify --remote`` send, without
importing s3fs, aiobotocore and aiohttp (~0.5 s of a fresh process's CPU, most of a 1k pull).

Only GET, ranged GET, LIST and a PUT whose caller knows the object is absent or wrong
(below s3fs's multipart size) go this way, only for options that mean the same to botocore
as to s3fs, and only where s3fs is installed (the backend contract is unchanged: every
other call — stat, delete, a write that must look first, a large one — and every other option goes
through s3fs as before). The client is made
as s3fs makes it: the same botocore session and credential chain (environment, AWS_PROFILE or
the ``profile`` option, shared files, SSO, instance roles), the same endpoint (the option, or
AWS_ENDPOINT_URL(_S3) which botocore reads itself), ``client_kwargs``, ``config_kwargs``
(casstore's retries-off and timeouts included), ``anon`` unsigned. Errors are translated by
s3fs's own ``translate_boto_error`` (loaded from its ``errors.py`` without the package), so
a missing key is ``FileNotFoundError``, a refused one ``PermissionError``, with the botocore
error as the cause, exactly as through s3fs: the caller's retries and messages do not change.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from .retry import untimed
from .s3_signed import NotPlain, SignedReader

__all__ = ["S3Direct"]

# options that s3fs passes to botocore unchanged (anything else: s3fs does all the reading)
_SAME_MEANING = frozenset({"key", "secret", "token", "endpoint_url", "client_kwargs", "config_kwargs", "anon",
                           "profile", "use_ssl", "max_concurrency"})


def _translator() -> Callable[[BaseException], BaseException] | None:
    """s3fs's translate_boto_error, from s3fs/errors.py alone (it imports errno and functools)."""
    mod = sys.modules.get("s3fs.errors") or sys.modules.get("casstore._s3fs_errors")
    if mod is None:
        spec = importlib.util.find_spec("s3fs")
        if spec is None or not spec.submodule_search_locations:
            return None
        path = f"{list(spec.submodule_search_locations)[0]}/errors.py"
        espec = importlib.util.spec_from_file_location("casstore._s3fs_errors", path)
        if espec is None or espec.loader is None:
            return None
        mod = importlib.util.module_from_spec(espec)
        try:
            espec.loader.exec_module(mod)
        except Exception:  # noqa: BLE001 - another s3fs layout: no fast path
            return None
        sys.modules["casstore._s3fs_errors"] = mod
    fn = getattr(mod, "translate_boto_error", None)
    return fn if callable(fn) else None


class S3Direct:
    """GET, ranged GET, LIST and PUT of one bucket through a botocore client made as s3fs makes it."""

    def __init__(self, bucket: str, opts: dict[str, Any], translate: Callable[[BaseException], BaseException]) -> None:
        self.bucket = bucket
        self._opts = opts
        self._translate = translate
        self._client: Any = None
        self._lock = threading.Lock()
        # GET and LIST without the client where nothing is in doubt; dropped at the first answer
        # that is not a plain success, and the full client answers that request and every later one
        self._signed: SignedReader | None = None

    @classmethod
    def for_options(cls, bucket: str, opts: dict[str, Any]) -> S3Direct | None:
        """The fast reader, or None where it would not mean what s3fs means."""
        if not bucket or not set(opts) <= _SAME_MEANING:
            return None
        if not isinstance(opts.get("client_kwargs", {}), dict) or not isinstance(opts.get("config_kwargs", {}), dict):
            return None
        translate = _translator()
        if translate is None:
            return None
        signed = SignedReader.for_options(bucket, opts)  # imports botocore's signing pieces, not its client
        if signed is None:
            try:  # here, so that pull's import of it overlaps the signature checks
                import botocore.config  # noqa: F401
                import botocore.session  # noqa: F401
            except ImportError:
                return None
        direct = cls(bucket, opts, translate)
        direct._signed = signed
        return direct

    def prepare_writes(self) -> None:
        """Import botocore's client code, which PUTs need (GETs and LISTs may not): a push does
        it while its signature checks run, as it did when every S3 call went through the client."""
        with contextlib.suppress(ImportError):
            import botocore.config  # noqa: F401
            import botocore.session  # noqa: F401

    def client(self) -> Any:
        with self._lock, untimed():  # a one-time start (~0.4 s, more on a busy machine): not a retry's time
            if self._client is None:
                import botocore.session
                from botocore.config import Config

                o = self._opts
                client_kwargs = dict(o.get("client_kwargs") or {})
                init = {k: v for k, v in (("aws_access_key_id", o.get("key")), ("aws_secret_access_key", o.get("secret")),
                                          ("aws_session_token", o.get("token")), ("endpoint_url", o.get("endpoint_url")))
                        if v is not None and v != client_kwargs.get(k)}
                if "use_ssl" not in client_kwargs:
                    init["use_ssl"] = o.get("use_ssl", True)
                config = dict(o.get("config_kwargs") or {})
                if o.get("anon"):
                    from botocore import UNSIGNED

                    for k in ("aws_access_key_id", "aws_secret_access_key", "aws_session_token"):
                        init.pop(k, None)
                        client_kwargs.pop(k, None)
                    config["signature_version"] = UNSIGNED
                session = botocore.session.Session(profile=o.get("profile"))
                self._client = session.create_client("s3", config=Config(**config), **init, **client_kwargs)
            return self._client

    def _call(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:
            if not isinstance(getattr(exc, "response", None), dict):
                raise  # not a ClientError: as s3fs leaves it
            raise self._translate(exc) from exc

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        """The object's bytes, or ``[start, end)`` of them (as s3fs's cat_file asks)."""
        signed = self._signed
        if signed is not None:
            try:
                fast: bytes = self._call(lambda: signed.get(key, start, end))  # NoSuchKey translated as below
                return fast
            except NotPlain:
                self._signed = None
        extra = {} if start is None and end is None else {"Range": f"bytes={start or 0}-{'' if end is None else end - 1}"}

        def get() -> bytes:
            resp = self.client().get_object(Bucket=self.bucket, Key=key, **extra)
            try:
                return bytes(resp["Body"].read())
            finally:
                resp["Body"].close()

        data: bytes = self._call(get)
        return data

    def put(self, key: str, data: bytes) -> None:
        """One PUT, as s3fs's pipe_file sends one below its multipart size."""
        self._call(lambda: self.client().put_object(Bucket=self.bucket, Key=key, Body=data))

    def list(self, prefix: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(key, details) of every object whose key starts with ``prefix``, page by page."""
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, "Delimiter": ""}
        while (signed := self._signed) is not None:  # page by page while the answers are plain
            try:
                items, token = signed.list_page(prefix, kwargs.get("ContinuationToken"))
            except NotPlain:
                self._signed = None
                break  # this page again, through the full client
            yield from items
            if token is None:
                return
            kwargs["ContinuationToken"] = token
        while True:
            page = self._call(lambda: self.client().list_objects_v2(**kwargs))
            for c in page.get("Contents", []):
                yield c["Key"], {"size": c.get("Size"), "ETag": c.get("ETag"), "LastModified": c.get("LastModified"),
                                 "type": "file"}
            if not page.get("IsTruncated"):
                return
            kwargs["ContinuationToken"] = page["NextContinuationToken"]
