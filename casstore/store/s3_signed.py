"""S3 GET and LIST signed with botocore's own pieces, without a botocore client.

A botocore client loads the S3 service model and its endpoint ruleset (two large JSON
files), builds a client class and registers its event handlers: ~0.15 s of CPU in a fresh
process, more than the three requests a 1k pull sends. Where the answer is not in doubt,
:class:`SignedReader` sends those requests itself: botocore's ``EnvProvider`` (the first
link of its credential chain) or the explicit key, botocore's ``S3SigV4Auth`` on an
``AWSRequest``, botocore's ``URLLib3Session`` (its CA bundle, timeouts and pool size).

Only a plain success is served here (200, or 206 for a range). Anything else — a redirect,
a region error, a 403/404, a 5xx, a reset, a timeout, XML it does not expect — raises
:class:`NotPlain` and the caller asks the full client instead (and keeps asking it), so
errors, retries, exit codes and messages are exactly the full client's.

"Not in doubt" means every input the full client would read is one this module reads the
same way (:meth:`SignedReader.for_options`): an explicit ``endpoint_url`` (path-style, as
botocore addresses a custom endpoint unless ``addressing_style`` is ``virtual``), options
and ``config_kwargs`` from a short list, ``AWS_*`` variables from a short list, no proxy
variables, and shared config/credentials files whose profile holds nothing but region,
output and keys. Credentials from the environment or the options only: with neither, the
full client walks the rest of the chain (profiles, SSO, instance roles). No credential is
ever logged, stored or put in a message here.
"""

from __future__ import annotations

import configparser
import os
import re
import threading
from datetime import datetime
from typing import Any
from urllib.parse import quote, unquote_plus, urlsplit
from xml.etree import ElementTree

__all__ = ["NotPlain", "SignedReader"]

_CLIENT_KW = frozenset({"region_name", "endpoint_url", "aws_access_key_id", "aws_secret_access_key",
                        "aws_session_token"})
_CONFIG_KW = frozenset({"retries", "connect_timeout", "read_timeout", "max_pool_connections", "region_name", "s3",
                        "signature_version"})
_ENV_OK = frozenset({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                     "AWS_CREDENTIAL_EXPIRATION", "AWS_ACCOUNT_ID", "AWS_DEFAULT_REGION", "AWS_REGION",
                     "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_PROFILE",
                     "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
                     "AWS_EC2_METADATA_DISABLED", "AWS_PAGER", "AWS_DEFAULT_OUTPUT", "AWS_CA_BUNDLE"})
_PROFILE_KEYS = frozenset({"region", "output", "aws_access_key_id", "aws_secret_access_key", "aws_session_token",
                           "aws_security_token"})
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
# casstore's own retry setting (fsspec_store._s3_options): only with it is a NoSuchKey answered here
ONE_ATTEMPT = {"total_max_attempts": 1, "mode": "standard"}


class NotPlain(Exception):
    """The answer was not a plain success: the full client must answer instead."""


def _profile_region() -> tuple[bool, str | None]:
    """(usable, region) from the shared config and credentials files, as botocore reads them:
    usable only where the profile in use holds nothing that changes a request."""
    env = os.environ
    profile = env.get("AWS_DEFAULT_PROFILE") or env.get("AWS_PROFILE")
    name = profile or "default"
    found, region = profile is None, None
    for var, default, section in (("AWS_CONFIG_FILE", "~/.aws/config", "default" if name == "default" else f"profile {name}"),
                                  ("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials", name)):
        path = os.path.expanduser(env.get(var) or default)
        if not os.path.exists(path):
            continue
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, OSError, UnicodeError):
            return False, None
        if not parser.has_section(section):
            continue
        found = True
        keys = set(parser.options(section))
        if not keys <= _PROFILE_KEYS:
            return False, None  # s3 settings, ca_bundle, endpoint_url, credential_process, sso_...: the full client
        if var == "AWS_CONFIG_FILE" and "region" in keys:
            region = parser.get(section, "region")
    return found, region  # a named profile found nowhere: botocore raises ProfileNotFound


def _raise_no_such_key(status: int, headers: Any, body: bytes, operation: str) -> None:
    """Raise the ClientError botocore raises for S3's NoSuchKey answer; return for any other 404."""
    from botocore.exceptions import ClientError

    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        return
    fields = {child.tag: child.text or "" for child in root}
    if root.tag != "Error" or fields.get("Code") != "NoSuchKey":
        return  # NoSuchBucket, a proxy's page, ...: the client's answer
    # what botocore's standard retry mode records with one attempt allowed (see ONE_ATTEMPT)
    meta = {"RequestId": fields.pop("RequestId", ""), "HostId": fields.pop("HostId", ""), "HTTPStatusCode": status,
            "HTTPHeaders": {k.lower(): v for k, v in headers.items()}, "MaxAttemptsReached": True, "RetryAttempts": 0}
    raise ClientError({"Error": fields, "ResponseMetadata": meta}, operation)


class SignedReader:
    """Signed GET, ranged GET and LIST of one bucket behind an explicit endpoint (path-style)."""

    def __init__(self, base: str, region: str, explicit: tuple[str, str, str | None] | None,
                 timeouts: tuple[float, float], pool: int, verify: bool | str) -> None:
        self._base, self._region, self._explicit = base, region, explicit
        self._timeouts, self._pool, self._verify = timeouts, pool, verify
        self._one_attempt = False  # botocore's retry metadata of a NoSuchKey is known only for ONE_ATTEMPT
        self._lock = threading.Lock()
        self._http: Any = None
        self._creds: Any = None

    @classmethod
    def for_options(cls, bucket: str, opts: dict[str, Any]) -> SignedReader | None:
        """The reader, or None where the full client could send something else."""
        client_kwargs, config = opts.get("client_kwargs") or {}, opts.get("config_kwargs") or {}
        if opts.get("anon") or opts.get("profile") is not None or opts.get("use_ssl", True) is not True:
            return None
        if not set(client_kwargs) <= _CLIENT_KW or not set(config) <= _CONFIG_KW or not _BUCKET.fullmatch(bucket):
            return None
        s3 = config.get("s3") or {}
        if not isinstance(s3, dict) or not set(s3) <= {"addressing_style"} or s3.get("addressing_style") == "virtual":
            return None
        if config.get("signature_version") not in (None, "s3v4", "v4"):
            return None
        env = os.environ
        if any(k.startswith("AWS_") and k not in _ENV_OK for k in env):
            return None
        verify: bool | str = True  # botocore's order: ca_bundle (AWS_CA_BUNDLE), REQUESTS_CA_BUNDLE, its own bundle
        for var in ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE"):
            if var in env:
                if not env[var].strip():
                    return None  # botocore refuses a blank bundle
                verify = env[var]
                break
        if any(k.lower().endswith("_proxy") and k.lower() != "no_proxy" for k in env):
            return None  # botocore sends through the proxy: so does the full client
        given = {}
        for opt, kw in (("endpoint_url", "endpoint_url"), ("key", "aws_access_key_id"),
                        ("secret", "aws_secret_access_key"), ("token", "aws_session_token")):
            a, b = opts.get(opt), client_kwargs.get(kw)
            if a is not None and b is not None and a != b:
                return None  # the full client refuses two values
            given[kw] = b if b is not None else a
        endpoint = given["endpoint_url"]
        if not isinstance(endpoint, str):
            return None
        try:
            parts = urlsplit(endpoint)
            _ = parts.port
        except ValueError:
            return None
        if (parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") or parts.query
                or parts.fragment or "@" in parts.netloc or "accelerate" in parts.netloc.lower()):
            return None
        key, secret, token = given["aws_access_key_id"], given["aws_secret_access_key"], given["aws_session_token"]
        if (key is None) != (secret is None) or (token is not None and key is None):
            return None
        usable, file_region = _profile_region()
        if not usable:
            return None
        region = client_kwargs.get("region_name") or config.get("region_name") or env.get("AWS_DEFAULT_REGION") \
            or file_region or "us-east-1"
        try:
            timeouts = (float(config.get("connect_timeout", 60)), float(config.get("read_timeout", 60)))
            pool = int(config.get("max_pool_connections", 10))
        except (TypeError, ValueError):
            return None
        explicit = (str(key), str(secret), None if token is None else str(token)) if key is not None else None
        try:  # here, so that pull's import of them overlaps the signature checks
            import botocore.auth  # noqa: F401
            import botocore.awsrequest  # noqa: F401
            import botocore.credentials  # noqa: F401
            import botocore.httpsession  # noqa: F401
        except ImportError:
            return None
        reader = cls(f"{parts.scheme}://{parts.netloc}/{quote(bucket)}", str(region), explicit, timeouts, pool, verify)
        reader._one_attempt = config.get("retries") == ONE_ATTEMPT
        return reader

    def _credentials(self) -> Any:
        from botocore.credentials import Credentials, EnvProvider

        if self._creds is None:
            creds = Credentials(*self._explicit) if self._explicit else EnvProvider().load()
            if creds is None:
                raise NotPlain("no credentials in the environment: the full client walks the chain")
            self._creds = creds
        return self._creds

    def _send(self, url: str, headers: dict[str, str], ok: tuple[int, ...], missing: str | None = None) -> bytes:
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.httpsession import URLLib3Session

        with self._lock:
            creds = self._credentials()
            if self._http is None:
                self._http = URLLib3Session(verify=self._verify, timeout=self._timeouts,
                                            max_pool_connections=self._pool)
        request = AWSRequest(method="GET", url=url, headers=headers)
        S3SigV4Auth(creds, "s3", self._region).add_auth(request)
        try:
            response = self._http.send(request.prepare())
            body = response.content
        except Exception as exc:  # noqa: BLE001 - a reset, a timeout: the full client reports it
            raise NotPlain(type(exc).__name__) from None
        if response.status_code == 404 and missing is not None and self._one_attempt:
            _raise_no_such_key(response.status_code, response.headers, body, missing)
        if response.status_code not in ok:
            raise NotPlain(str(response.status_code))
        return bytes(body)

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        """The object's bytes, or ``[start, end)`` of them; a missing key raises the ClientError
        the client raises (NoSuchKey, the most common answer a pull gets besides the bytes:
        one request, not two); any other answer raises NotPlain."""
        if start is None and end is None:
            return self._send(f"{self._base}/{quote(key, safe='/~')}", {}, (200,), "GetObject")
        rng = f"bytes={start or 0}-{'' if end is None else end - 1}"
        return self._send(f"{self._base}/{quote(key, safe='/~')}", {"Range": rng}, (200, 206), "GetObject")

    def list_page(self, prefix: str, token: str | None) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
        """One ListObjectsV2 page: (key, details) of each object, and the next page's token."""
        query = {"list-type": "2", "delimiter": "", "encoding-type": "url", "prefix": prefix}
        if token is not None:
            query["continuation-token"] = token
        qs = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(query.items()))
        body = self._send(f"{self._base}?{qs}", {}, (200,))
        try:
            root = ElementTree.fromstring(body)
            if root.tag != f"{_NS}ListBucketResult" or root.findtext(f"{_NS}EncodingType") != "url":
                raise ValueError(root.tag)
            items = []
            for c in root.iter(f"{_NS}Contents"):
                size, stamp = c.findtext(f"{_NS}Size"), c.findtext(f"{_NS}LastModified")
                items.append((unquote_plus(c.findtext(f"{_NS}Key") or ""),
                              {"size": None if size is None else int(size), "ETag": c.findtext(f"{_NS}ETag"),
                               "LastModified": None if stamp is None else datetime.fromisoformat(stamp.replace("Z", "+00:00")),
                               "type": "file"}))
            truncated = (root.findtext(f"{_NS}IsTruncated") or "").strip().lower() == "true"
            nxt = root.findtext(f"{_NS}NextContinuationToken")
        except (ElementTree.ParseError, ValueError, TypeError) as exc:
            raise NotPlain(f"unexpected listing: {type(exc).__name__}") from None
        if truncated and not nxt:
            raise NotPlain("a truncated listing without a token")
        return items, nxt if truncated else None
