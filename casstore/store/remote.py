"""What is wrong with a remote (malformed URL, no bucket, no credentials, access denied): a
RemoteError (exit 2) naming it, credentials masked; transient failures stay StoreError."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

from ..errors import RemoteError
from ..model.numerals import ascii_int
from ..model.urls import mask_url

__all__ = ["check_url", "remote_error", "error_code", "no_credentials"]

# protocols a user plausibly means when a URL lost its ':' or a '/'
_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "memory", "file", "http", "https",
            "hdfs", "webhdfs", "sftp", "ssh", "ftp", "oss", "oci", "webdav", "smb")
_NO_COLON = re.compile(r"^(%s)//+(.*)$" % "|".join(_SCHEMES), re.I)
_ONE_SLASH = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/?([^/].*)?$")
_BUCKETED = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "oss")
# names in fsspec's own table of known implementations (tests compare), accepted without importing fsspec
FSSPEC_KNOWN = frozenset(_SCHEMES) - {"abfss"}


def _fail(url: str, cause: str) -> RemoteError:
    return RemoteError(f"remote {mask_url(url)}: {cause}")


def check_url(url: str) -> None:
    """Refuse (RemoteError) a remote URL that cannot be what the user meant: a plain path is
    a folder, a URL needs ``scheme://`` (``s3//bucket`` is a typo, not a folder)."""
    if not url or not url.strip():
        raise _fail(url, "empty URL")
    if url != url.strip():
        raise _fail(url, "leading or trailing spaces")
    m = _NO_COLON.match(url)
    if m:
        raise _fail(url, f"not a URL (no ':' after {m.group(1)}); did you mean {m.group(1)}://{m.group(2)}?")
    if "://" not in url:
        m = _ONE_SLASH.match(url)
        if m:  # 'x:' with a one-letter scheme is a Windows drive, not a URL
            rest = (m.group(2) or "").lstrip("/")
            raise _fail(url, f"not a URL (needs '{m.group(1)}://'); did you mean {m.group(1)}://{rest}?")
        return
    scheme, _, rest = url.partition("://")
    proto = scheme.lower()
    if not re.fullmatch(r"[a-z][a-z0-9+.-]*", proto):
        raise _fail(url, f"{scheme!r} is not a URL scheme")
    if proto in _BUCKETED and not rest.strip("/"):
        raise _fail(url, f"no bucket in the URL ({proto}://BUCKET/PREFIX)")
    if proto not in FSSPEC_KNOWN and proto != "local":
        from fsspec.registry import known_implementations, registry

        if proto not in known_implementations and proto not in registry:
            raise _fail(url, f"unknown protocol {scheme!r} (fsspec has no backend of that name)")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


_CREDENTIALS = {"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError",
                "NoAuthTokenError", "DefaultCredentialsError", "ClientAuthenticationError"}
_DENIED = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled",
           "ExpiredToken", "InvalidToken", "TokenRefreshRequired", "AccountProblem", "403",
           "PermissionDeniedError", "UnauthenticatedError"}
_NO_BUCKET = {"NoSuchBucket"}


# obstore's errors carry the answer in their text: "... status code: 404 Not Found: <?xml ...<Code>NoSuchKey</Code>"
_STATUS_TEXT = re.compile(r"status code: (\d{3})\b")
_CODE_TEXT = re.compile(r"<Code>([^<]{1,200})")  # whatever the server says, shown up to 200 characters


def error_code(exc: BaseException) -> tuple[str, int] | None:
    """(S3 error code, HTTP status) in ``exc``'s cause chain, if any: a botocore ClientError's
    response, or the answer an obstore error quotes."""
    for cur in itertools.islice(_chain(exc), 8):
        resp = getattr(cur, "response", None)
        if isinstance(resp, dict) and isinstance(resp.get("Error"), dict):
            code = str(resp["Error"].get("Code") or "")
            status = resp.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
            return code, status if type(status) is int else (ascii_int(str(status)) or 0)
        m = _STATUS_TEXT.search(str(cur))
        if m:
            c = _CODE_TEXT.search(str(cur))
            return (c.group(1) if c else ""), int(m.group(1))
    return None


def remote_error(exc: BaseException, url: str) -> RemoteError | None:
    """The configuration problem behind a backend error, or None for anything else."""
    for e in _chain(exc):
        if isinstance(e, RemoteError):
            return e
        name = type(e).__name__
        code, status = error_code(e) or ("", 0)
        if name in _CREDENTIALS:
            if url.lower().startswith(("s3://", "s3a://")):
                return no_credentials(url)
            return _fail(url, f"no credentials found ({name}; see the backend's docs, or [remote] options "
                              "in casstore.toml)")
        if name in _NO_BUCKET or code in _NO_BUCKET:
            bucket = url.partition("://")[2].split("/", 1)[0]
            return _fail(url, f"bucket {bucket!r} does not exist (create it, or fix [remote] url "
                              "in casstore.toml)")
        if code in _DENIED or name in _DENIED or status == 403:
            return _fail(url, f"access denied ({code or name}): check the credentials and the bucket's "
                              "permissions")
    return None


def no_credentials(url: str) -> RemoteError:
    """No S3 credentials anywhere the AWS tools look."""
    return _fail(url, "no credentials found (set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                      "or [remote] options in casstore.toml)")

