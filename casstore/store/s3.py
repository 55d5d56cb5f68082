"""S3 as an fsspec filesystem through obstore (its retries off). Credentials: ``[remote]
options``, the environment's key pair, else boto3's chain when installed, else object_store's."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from obstore.fsspec import FsspecStore as _ObstoreFilesystem
from obstore.store import from_url

from ..errors import RemoteError
from ..model.urls import mask_url
from .base import RangeNotHonoured
from .remote import no_credentials

if TYPE_CHECKING:
    from obstore.store import ClientConfig, S3Config

__all__ = ["S3Filesystem", "s3_filesystem"]

S3_CONNECT_TIMEOUT = 10.0
_CHUNK = 1 << 20  # a ranged read's stream yields at least this much at a time (the last piece less)
# object_store's words for an answer whose Content-Range is not the range asked: "Requested 0..101, got 0..268435456"
_OTHER_RANGE = re.compile(r"Requested \d+\.\.\d+, got (\d+\.\.\d+)")
S3_READ_TIMEOUT = 30.0

# the s3fs names of options that casstore.toml files written for s3fs use, as obstore names them
_S3FS_NAMES = {"key": "access_key_id", "secret": "secret_access_key", "token": "session_token",
               "endpoint_url": "endpoint", "region_name": "region", "anon": "skip_signature",
               "aws_access_key_id": "access_key_id", "aws_secret_access_key": "secret_access_key",
               "aws_session_token": "session_token"}
_TIMEOUTS = ("connect_timeout", "read_timeout")


class S3Filesystem(_ObstoreFilesystem):
    """obstore's fsspec filesystem through its blocking API (fsspec's event loop could abort a
    process as it exits); ``find`` is one flat listing."""

    protocol = ("s3", "s3a")  # type: ignore[assignment]  # fsspec's form: the names it strips

    def _at(self, path: str) -> tuple[Any, str]:
        bucket, key = self._split_path(self._strip_protocol(path))
        return self._construct_store(bucket), key

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        """The object's bytes; with ``end``, ``start``..``end`` streamed: one byte more is refused
        (:class:`~casstore.store.base.RangeNotHonoured`) without reading the rest."""
        store, key = self._at(path)
        if end is None:
            if start is None:
                return store.get(key).bytes().to_bytes()  # type: ignore[no-any-return]
            return store.get_range(key, start=start, end=None).to_bytes()  # type: ignore[no-any-return]
        start = start or 0
        asked = max(0, end - start)
        try:
            result = store.get(key, options={"range": (start, end)})
        except Exception as exc:
            # object_store checks the answer's status and Content-Range before reading its body
            text = str(exc)
            if "non-partial response" in text:
                raise RangeNotHonoured("the whole object (status 200, no range)") from None
            got = _OTHER_RANGE.search(text)
            if got:
                raise RangeNotHonoured(f"bytes {got.group(1)}") from None
            raise
        out = bytearray()
        for chunk in result.stream(min_chunk_size=min(asked + 1, _CHUNK)):
            out += chunk[: asked + 1 - len(out)]
            if len(out) > asked:
                # dropping the stream closes the connection: the rest of the body is never read
                raise RangeNotHonoured(f"more than {asked} bytes (stopped reading at {len(out)})")
        return bytes(out)

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        store, key = self._at(path)
        store.put(key, value)

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        store, key = self._at(path)
        try:
            head = store.head(key)
        except FileNotFoundError:
            # S3 answers a HEAD in a bucket that does not exist with a bare 404: a listing names it
            next(iter(store.list(key, chunk_size=1)), None)
            raise
        return {"name": self._strip_protocol(path), "size": head["size"], "type": "file",
                "e_tag": head["e_tag"], "last_modified": head["last_modified"]}

    def rm_file(self, path: str) -> None:
        store, key = self._at(path)
        store.delete(key)

    def find(self, path: str, maxdepth: int | None = None, withdirs: bool = False, detail: bool = False,
             prefix: str = "", **kwargs: Any) -> Any:
        store, key = self._at(path)
        bucket = self._split_path(self._strip_protocol(path))[0]
        under = f"{key.rstrip('/')}/" if key.strip("/") else ""
        found: dict[str, dict[str, Any]] = {}
        for chunk in store.list(under + prefix, chunk_size=1000):
            for obj in chunk:
                name = f"{bucket}/{obj['path']}"
                found[name] = {"name": name, "size": obj["size"], "type": "file",
                               "e_tag": obj["e_tag"], "last_modified": obj["last_modified"]}
        return found if detail else sorted(found)


def s3_filesystem(url: str, protocol: str, bucket: str, options: dict[str, Any]) -> S3Filesystem:
    """The filesystem for ``url`` (in ``bucket``) with its ``[remote] options``: obstore's S3
    names, or the s3fs names above; an option neither knows is refused here."""
    config: dict[str, Any] = {}
    client: dict[str, Any] = {"connect_timeout": timedelta(seconds=S3_CONNECT_TIMEOUT),
                              "read_timeout": timedelta(seconds=S3_READ_TIMEOUT)}
    profile: str | None = None
    for name, value in options.items():
        if name == "profile":
            profile = str(value)
        elif name == "client_options" and isinstance(value, dict):
            client.update(value)
        elif name in ("client_kwargs", "config_kwargs") and isinstance(value, dict):
            # s3fs's botocore arguments: the names obstore has an equal for; retries are casstore's
            for k, v in value.items():
                if k in _TIMEOUTS:
                    client[k] = timedelta(seconds=float(v))
                elif k in _S3FS_NAMES:
                    config[_S3FS_NAMES[k]] = v
                elif k not in ("retries", "max_pool_connections"):
                    raise RemoteError(f"remote {mask_url(url)}: option {name + '.' + k!r} has no meaning for the S3 "
                                      "client (obstore); see docs/design.md")
        else:
            config[_S3FS_NAMES.get(name, name)] = value
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint and "endpoint" not in config:
        config["endpoint"] = endpoint
    if str(config.get("endpoint", "")).startswith("http://"):
        client.setdefault("allow_http", True)
    provider = None
    env_keys = bool(os.environ.get("AWS_ACCESS_KEY_ID") and os.environ.get("AWS_SECRET_ACCESS_KEY"))
    if not config.get("skip_signature") and "access_key_id" not in config and (profile or not env_keys):
        provider = _boto3_credentials(url, profile, config)
    s3_config, client_config = cast("S3Config", config), cast("ClientConfig", client)
    try:
        # obstore builds the store on first use: one built here refuses a bad option now
        from_url(f"s3://{bucket}", config=s3_config, client_options=client_config, credential_provider=provider)
        return S3Filesystem("s3a" if protocol == "s3a" else "s3", config=s3_config, client_options=client_config,
                            credential_provider=provider, retry_config={"max_retries": 0}, skip_instance_cache=True)
    except Exception as exc:  # obstore refuses unknown keys and bad values when the store is built
        raise RemoteError(f"remote {mask_url(url)}: cannot open it: {mask_url(str(exc)).splitlines()[0]}") from None


def _boto3_credentials(url: str, profile: str | None, config: dict[str, Any]) -> Any:
    """boto3's credential chain as an obstore credential provider, or None without boto3."""
    try:
        import boto3
    except ImportError:
        wanted = profile or os.environ.get("AWS_PROFILE")
        if wanted:
            raise RemoteError(f"remote {mask_url(url)}: an AWS profile ({wanted}) needs boto3's credential "
                              "chain: pip install boto3") from None
        return None  # object_store's chain: environment, web identity, container and instance roles
    import botocore.exceptions
    from obstore.auth.boto3 import Boto3CredentialProvider

    try:
        session = boto3.Session(profile_name=profile)
        provider = Boto3CredentialProvider(session, ttl=timedelta(minutes=5))
    except ValueError:  # the chain found nothing
        raise no_credentials(url) from None
    except botocore.exceptions.BotoCoreError as exc:  # an unknown profile, an SSO login needed, ...
        raise RemoteError(f"remote {mask_url(url)}: {mask_url(str(exc))}") from None
    if session.region_name and "region" not in config:
        config["region"] = session.region_name
    return provider
