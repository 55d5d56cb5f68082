"""S3 GET and LIST signed and sent by casstore itself, without a botocore client.

A botocore client loads the S3 service model and its endpoint ruleset (two large JSON
files), builds a client class and registers its event handlers (~0.15 s of CPU in a fresh
process), and importing any botocore module costs about as much again (urllib3 and
botocore.compat): together more than the three requests of a 1k pull and their checks.
Where the answer is not in doubt, :class:`SignedReader` sends those requests as
``http.client`` sends them, over a socket (:mod:`casstore.store.s3_wire`: no ``email`` or,
for ``http://``, ``ssl`` import), signed by :mod:`casstore.store.s3_sigv4` (what botocore's
``S3SigV4Auth`` computes; the tests compare them and let moto check the signatures), with
the credentials botocore's chain would find first: the explicit key, else the environment
as botocore's ``EnvProvider`` reads it.

Only a plain success is served here (200, or 206 for a range, whose body matches the
checksum S3 names when asked as botocore asks, ``x-amz-checksum-mode``), and S3's NoSuchKey,
raised as the client raises it. Anything else — a redirect, a region error, a refusal, a missing
bucket, a 5xx, a reset, a timeout, XML it does not expect — raises :class:`NotPlain` and
the caller asks the full client instead (and keeps asking it), so errors, retries, exit
codes and messages are exactly the full client's: a signing mistake could only cost a
second request, never a wrong answer.

"Not in doubt" means every input the full client would read is one this module reads the
same way (:meth:`SignedReader.for_options`): an explicit ``endpoint_url`` (path-style, as
botocore addresses a custom endpoint unless ``addressing_style`` is ``virtual``) or AWS
itself in its standard partition with a bucket name that is one DNS label (the bucket's
virtual host, as botocore's endpoint ruleset resolves it; the tests compare), options
and ``config_kwargs`` from a short list, ``AWS_*`` variables from a short list, no proxy
variables, and shared config/credentials files whose profile holds nothing but region,
output and keys. Credentials from the options or the environment only: with neither, the
full client walks the rest of the chain (profiles, SSO, instance roles). TLS is verified
against the bundle botocore uses (``AWS_CA_BUNDLE``, ``REQUESTS_CA_BUNDLE``, certifi's, its
own). No credential is ever logged, stored or put in a message here.
"""

from __future__ import annotations

import os
import re
import threading
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote, unquote_plus, urlsplit

from .s3_sigv4 import canonical_host, sign_get
from .s3_wire import Connection

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
    """(usable, region) from the shared config and credentials files, as botocore reads them
    (its ``raw_config_parse`` and ``build_profile_map``: paths with variables expanded, any
    section ``profile NAME`` as shlex splits it or ``default`` for the default profile, the
    last such section the profile, the credentials file's section over it): usable only
    where that profile holds nothing that changes a request."""
    env = os.environ
    name = env.get("AWS_DEFAULT_PROFILE") or env.get("AWS_PROFILE") or "default"
    found = name == "default" and not (env.get("AWS_DEFAULT_PROFILE") or env.get("AWS_PROFILE"))
    profile: dict[str, str] = {}
    for var, default in (("AWS_CONFIG_FILE", "~/.aws/config"), ("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials")):
        path = os.path.expanduser(os.path.expandvars(env.get(var) or default))
        if not os.path.isfile(path):
            continue
        import configparser  # here: with no such file (CI, a container) neither is imported (~3 ms)
        import shlex

        parser = configparser.RawConfigParser()
        try:
            parser.read([path])
        except (configparser.Error, OSError, UnicodeError):
            return False, None
        for section in parser.sections():
            named: str | None
            if var == "AWS_SHARED_CREDENTIALS_FILE" or section == "default":
                named = section
            elif section.startswith("profile"):
                try:
                    parts = shlex.split(section)
                except ValueError:
                    continue
                named = parts[1] if len(parts) == 2 else None
            else:
                continue
            if named != name:
                continue
            found = True
            keys = parser.options(section)
            if not set(keys) <= _PROFILE_KEYS:
                return False, None  # s3 settings, ca_bundle, endpoint_url, credential_process, sso_...: the full client
            values = {k: parser.get(section, k) for k in keys}
            if var == "AWS_CONFIG_FILE":
                profile = values  # a later section of the same profile replaces an earlier one
            else:
                profile.update(values)
    return found, profile.get("region")  # a named profile found nowhere: botocore raises ProfileNotFound


def _raise_no_such_key(status: int, headers: Any, body: bytes, operation: str) -> None:
    """Raise the ClientError botocore raises for S3's NoSuchKey answer; return for any other 404."""
    from xml.etree import ElementTree

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
            "HTTPHeaders": {k.lower(): v for k, v in headers}, "MaxAttemptsReached": True, "RetryAttempts": 0}
    raise ClientError({"Error": fields, "ResponseMetadata": meta}, operation)


_AWS_REGION = re.compile(r"(us|eu|ap|sa|ca|me|af|il|mx)-[a-z]+-[0-9]+")  # the aws partition's names


def _aws_host(bucket: str, region: str, style: Any) -> str | None:
    """The bucket's virtual host on AWS S3 as botocore's endpoint ruleset resolves it (the aws
    partition; us-east-1 on the global endpoint, botocore's default), or None where the ruleset
    decides otherwise (path-style, dotted or special names, other partitions)."""
    if style == "path" or "." in bucket or "--" in bucket or not _AWS_REGION.fullmatch(region):
        return None
    return f"{bucket}.s3.amazonaws.com" if region == "us-east-1" else f"{bucket}.s3.{region}.amazonaws.com"


# botocore's response checksums, in its order (httpchecksum._ALGORITHMS_PRIORITY_LIST): the
# first one a response names is checked; those it computes without awscrt are checked here
_CHECKSUMS = ("xxhash128", "xxhash3", "crc64nvme", "xxhash64", "crc32c", "crc32", "sha1", "sha256", "sha512")
_PLAIN_CHECKSUMS = frozenset({"crc32", "sha1", "sha256", "sha512"})


def _checksum_matches(headers: list[tuple[str, str]], body: bytes) -> bool:
    """Whether ``body`` is what the response's checksum names, as botocore checks it (a part
    checksum, ``…-N``, is not checked; one this module does not compute is not taken)."""
    import base64
    import binascii

    named = {k.lower(): v for k, v in headers}
    for algorithm in _CHECKSUMS:
        value = named.get(f"x-amz-checksum-{algorithm}")
        if value is None or "-" in value:
            continue
        if algorithm not in _PLAIN_CHECKSUMS:
            return False  # (botocore checks it where awscrt is installed): the client decides
        if algorithm == "crc32":
            import zlib

            digest = (zlib.crc32(body) & 0xFFFFFFFF).to_bytes(4, "big")
        else:
            import hashlib

            digest = hashlib.new(algorithm, body).digest()
        try:
            return digest == base64.b64decode(value)
        except (binascii.Error, ValueError):
            return False
    return True


def _tls_context(verify: bool | str) -> Any:
    """Certificates checked against the bundle botocore's URLLib3Session uses."""
    import ssl

    if verify is True:
        try:
            import certifi

            verify = certifi.where()
        except ImportError:
            import importlib.util

            spec = importlib.util.find_spec("botocore")
            if spec is None or not spec.submodule_search_locations:
                raise NotPlain("no CA bundle") from None
            verify = os.path.join(list(spec.submodule_search_locations)[0], "cacert.pem")
    return ssl.create_default_context(cafile=str(verify))


class SignedReader:
    """Signed GET, ranged GET and LIST of one bucket: behind an explicit endpoint (path-style),
    or on AWS itself (the bucket's virtual host)."""

    def __init__(self, scheme: str, netloc: str, prefix: str, region: str,
                 explicit: tuple[str, str, str | None] | None, timeouts: tuple[float, float], verify: bool | str) -> None:
        self._scheme, self._netloc, self._region, self._explicit = scheme, netloc, region, explicit
        self._host = canonical_host(scheme, netloc)
        self._prefix = prefix  # "/bucket" path-style, "" on the bucket's own host
        self._timeouts, self._verify = timeouts, verify
        self._one_attempt = False  # botocore's retry metadata of a NoSuchKey is known only for ONE_ATTEMPT
        self._lock = threading.Lock()
        self._local = threading.local()  # one kept-alive connection a thread
        self._creds: tuple[str, str, str | None] | None = None
        self._context: Any = None

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
        key, secret, token = given["aws_access_key_id"], given["aws_secret_access_key"], given["aws_session_token"]
        if (key is None) != (secret is None) or (token is not None and key is None):
            return None
        usable, file_region = _profile_region()
        if not usable:
            return None
        region = client_kwargs.get("region_name") or config.get("region_name") or env.get("AWS_DEFAULT_REGION") \
            or file_region or "us-east-1"
        endpoint = given["endpoint_url"]
        if endpoint is None:  # AWS itself: the bucket's virtual host, where the ruleset's answer is plain
            host = _aws_host(bucket, region, s3.get("addressing_style"))
            if host is None:
                return None
            scheme, netloc, prefix = "https", host, ""
        else:
            if not isinstance(endpoint, str):
                return None
            try:
                parts = urlsplit(endpoint)
                _ = parts.port
            except ValueError:
                return None
            if (parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/")
                    or parts.query or parts.fragment or "@" in parts.netloc or "accelerate" in parts.netloc.lower()):
                return None
            scheme, netloc, prefix = parts.scheme, parts.netloc, f"/{quote(bucket)}"  # path-style
        try:
            timeouts = (float(config.get("connect_timeout", 60)), float(config.get("read_timeout", 60)))
        except (TypeError, ValueError):
            return None
        if any(not isinstance(v, str) for v in (key, secret, token) if v is not None) or not isinstance(region, str):
            return None
        explicit = (str(key), str(secret), None if token is None else str(token)) if key is not None else None
        reader = cls(scheme, netloc, prefix, region, explicit, timeouts, verify)
        reader._one_attempt = config.get("retries") == ONE_ATTEMPT
        return reader

    def _credentials(self) -> tuple[str, str, str | None]:
        """The explicit key, else the environment's, read as botocore's EnvProvider reads it."""
        if self._explicit is not None:
            return self._explicit
        env = os.environ
        key, secret = env.get("AWS_ACCESS_KEY_ID", ""), env.get("AWS_SECRET_ACCESS_KEY", "")
        if not key or not secret or env.get("AWS_CREDENTIAL_EXPIRATION"):
            raise NotPlain("credentials not in the environment: the client walks its chain")
        token = env.get("AWS_SESSION_TOKEN") or env.get("AWS_SECURITY_TOKEN") or None
        return key, secret, token

    def _connection(self) -> Connection:
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            return conn  # never a socket a forked child shares with its parent
        context = None
        if self._scheme == "https":
            with self._lock:
                if self._context is None:
                    self._context = _tls_context(self._verify)
                context = self._context
        conn = Connection(self._scheme, self._netloc, timeouts=self._timeouts, context=context)
        conn.connect()
        self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def _send(self, path: str, query: str, headers: dict[str, str], ok: tuple[int, ...],
              operation: str | None = None) -> bytes:
        with self._lock:
            if self._creds is None:
                self._creds = self._credentials()
            key, secret, token = self._creds
        signed = sign_get(self._host, path, query, headers, access_key=key, secret_key=secret, token=token,
                          region=self._region, now=datetime.now(timezone.utc))
        signed["Host"] = self._host
        target = f"{path}?{query}" if query else path
        try:
            answer = self._connection().get(target, signed)
            if answer.will_close:
                self._drop()
        except Exception as exc:  # noqa: BLE001 - a reset, a timeout, TLS, odd framing: the full client reports it
            self._drop()
            raise NotPlain(type(exc).__name__) from None
        body = answer.body
        if answer.status == 404 and operation is not None and self._one_attempt:
            _raise_no_such_key(answer.status, answer.headers, body, operation)
        if answer.status not in ok:
            raise NotPlain(str(answer.status))
        if operation == "GetObject" and not _checksum_matches(answer.headers, body):
            raise NotPlain("the body is not what its checksum names")  # the client's error (or its retry)
        return body

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None and self._local.pid == os.getpid():
            conn.close()

    def _path(self, key: str) -> str:
        return f"{self._prefix}/{quote(key, safe='/~')}"

    def url(self, key: str) -> str:
        """Where :meth:`get` sends its GET of ``key``."""
        return f"{self._scheme}://{self._netloc}{self._path(key)}"

    def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        """The object's bytes, or ``[start, end)`` of them; a missing key raises the ClientError
        the client raises (NoSuchKey, the most common answer a pull gets besides the bytes:
        one request, not two); any other answer raises NotPlain."""
        path = self._path(key)
        mode = {"x-amz-checksum-mode": "ENABLED"}  # what botocore's GetObject asks (response_checksum_validation)
        if start is None and end is None:
            return self._send(path, "", mode, (200,), "GetObject")
        rng = f"bytes={start or 0}-{'' if end is None else end - 1}"
        return self._send(path, "", {"Range": rng, **mode}, (200, 206), "GetObject")

    def list_page(self, prefix: str, token: str | None) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
        """One ListObjectsV2 page: (key, details) of each object, and the next page's token."""
        query = {"list-type": "2", "delimiter": "", "encoding-type": "url", "prefix": prefix}
        if token is not None:
            query["continuation-token"] = token
        qs = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(query.items()))
        body = self._send(self._prefix or "/", qs, {}, (200,))
        from xml.etree import ElementTree

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
