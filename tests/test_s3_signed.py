"""casstore.store.s3_signed: GET and LIST signed by casstore itself answer what the botocore client answers.

One moto bucket (127.0.0.1) is read three ways: through the signed reader (no botocore
client), through the botocore client (an option the signed reader does not take), and
through s3fs. Plain successes must be the same bytes and listings; every other answer
(missing key, missing bucket, a refused signature, a refused session token, an empty
object's range) must reach the client, so the errors are the client's own.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from casstore.errors import NotFoundError, RemoteError
from casstore.store.backends import FsspecStore
from casstore.store.s3_signed import SignedReader
from casstore.store.s3_sigv4 import canonical_host, sign_get
from tests.helpers.s3 import S3Server, fake_aws_env
from tests.test_s3_direct import KEYS, fill

CLIENT_ONLY = {"client_kwargs": {"verify": True}}  # botocore reads it; the signed reader does not take it


@pytest.fixture
def filled(s3_url: str) -> str:
    return fill(s3_url)  # the bucket tests/test_s3_direct.py reads two ways, read a third way


def _stores(url: str, **opts: Any) -> tuple[FsspecStore, FsspecStore, FsspecStore]:
    signed = FsspecStore(url, dict(opts))
    client = FsspecStore(url, {**opts, **CLIENT_ONLY})
    s3fs = FsspecStore(url, {**opts, "use_listings_cache": False})
    assert signed._direct is not None and signed._direct._signed is not None
    assert client._direct is not None and client._direct._signed is None and s3fs._direct is None
    return signed, client, s3fs


def test_plain_reads_and_listings_are_the_same_bytes_without_the_client(filled: str) -> None:
    signed, client, s3fs = _stores(filled)
    for prefix in ("", "objects/", "objects/sha256/ab/", "packs/", "signatures/", "odd/", "nothing/"):
        assert list(signed.list(prefix)) == list(client.list(prefix)) == list(s3fs.list(prefix)), prefix
    for key, data in KEYS.items():
        assert signed.read(key) == client.read(key) == s3fs.read(key) == data
        assert signed.read_range(key, 1, 4) == client.read_range(key, 1, 4) == data[1:4]
        assert signed.read_range(key, 1, 10_000) == client.read_range(key, 1, 10_000) == data[1:]
    assert signed._direct._signed is not None  # every answer above was a plain success, sent without a client
    assert signed._direct._client is None and signed._fs is None


def test_any_other_answer_is_the_clients(filled: str, s3_server: S3Server) -> None:
    missing = "objects/sha256/00/" + "0" * 62
    outcomes = []
    for store in _stores(filled)[:2]:
        for rng in (None, (0, 10)):
            with pytest.raises(NotFoundError) as exc:
                store.read(missing) if rng is None else store.read_range(missing, *rng)
            cause = exc.value.__context__  # FileNotFoundError from s3fs's translation, caused by botocore's error
            assert isinstance(cause, FileNotFoundError) and cause.__cause__ is not None
            outcomes.append((str(exc.value), str(cause), str(cause.__cause__), cause.__cause__.response["Error"]))
    assert outcomes[0] == outcomes[2] and outcomes[1] == outcomes[3]
    signed = _stores(filled)[0]
    with pytest.raises(NotFoundError):
        signed.read(missing)
    assert signed._direct._signed is not None  # NoSuchKey is answered without the client: one request
    own_retries = _stores(filled, config_kwargs={"retries": {"max_attempts": 3}})[0]
    with pytest.raises(NotFoundError):
        own_retries.read(missing)
    assert own_retries._direct._signed is None  # other retry settings: the client's metadata, from the client
    for store in _stores(filled)[:2]:
        assert store.read_bounded("objects/empty", 100) == b""  # S3 refuses a range of an empty object
        assert store._direct._signed is None  # ... with a 416: the client answered
    gone = filled.replace(filled.split("/")[2], "no-such-bucket-signed")
    messages = []
    for store in _stores(gone)[:2]:
        with pytest.raises(RemoteError, match="does not exist") as exc:
            list(store.list("objects/"))
        messages.append(str(exc.value))
    assert messages[0] == messages[1]


def _iam_user_and_role(endpoint: str) -> tuple[tuple[str, str], tuple[str, str, str]]:
    """(key, secret) of a moto IAM user allowed everything, and a role's (key, secret, token)."""
    import boto3

    name = f"reader-{uuid.uuid4().hex[:8]}"
    allow = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})
    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1")
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName="all", PolicyDocument=allow)
    key = iam.create_access_key(UserName=name)["AccessKey"]
    trust = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]})
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust)["Role"]
    iam.put_role_policy(RoleName=name, PolicyName="all", PolicyDocument=allow)
    sts = boto3.client("sts", endpoint_url=endpoint, region_name="us-east-1")
    c = sts.assume_role(RoleArn=role["Arn"], RoleSessionName="pull")["Credentials"]
    return (key["AccessKeyId"], key["SecretAccessKey"]), (c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"])


def test_signatures_and_session_tokens_are_checked_by_the_server(filled: str, s3_server: S3Server,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from moto import settings

    (key, secret), (tkey, tsecret, token) = _iam_user_and_role(s3_server.endpoint)
    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # moto now checks every signature
    first = next(iter(KEYS))
    # explicit keys, then a role's temporary credentials from the environment (with their token)
    signed, client, _ = _stores(filled, key=key, secret=secret)
    assert signed.read(first) == client.read(first) == KEYS[first]
    assert [i.key for i in signed.list("objects/")] == [i.key for i in client.list("objects/")]
    assert signed._direct._signed is not None
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", tkey)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", tsecret)
    monkeypatch.setenv("AWS_SESSION_TOKEN", token)
    signed, client, _ = _stores(filled)
    assert signed.read(first) == client.read(first) == KEYS[first]
    assert signed._direct._signed is not None
    # refusals: a wrong secret, a wrong token; the client's error, and never the secret in it
    for opts, env_token in (({"key": key, "secret": "wrong-" + "s" * 30}, token), ({}, token[:-4] + "XXXX")):
        monkeypatch.setenv("AWS_SESSION_TOKEN", env_token)
        messages = []
        for store in _stores(filled, **opts)[:2]:
            with pytest.raises(RemoteError, match="access denied") as exc:
                store.read(first)
            assert store._direct._signed is None
            messages.append(str(exc.value))
            assert "wrong-" not in messages[-1] and tsecret not in messages[-1] and env_token not in messages[-1]
        assert messages[0] == messages[1]


def test_the_signature_is_the_one_botocore_computes() -> None:
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    key, secret = "AKIA" + "T" * 16, "fake-" + "s" * 35  # obviously fake
    cases = [
        ("http://127.0.0.1:9000", "/bkt/objects/sha256/ab/cd", "", {}, None),
        ("https://s3.example.com:443", "/bkt/odd/a%20b%2Bc~d%3D%C3%A9%252F.sig", "", {"Range": "bytes=0-99"}, "tok/en+="),
        ("http://localhost:80", "/bkt", "continuation-token=a%2Fb%3D&delimiter=&encoding-type=url&list-type=2"
                                        "&prefix=x%2Fy%20z", {}, None),
    ]
    for base, path, query, headers, token in cases:
        request = AWSRequest(method="GET", url=base + path + (f"?{query}" if query else ""), headers=dict(headers))
        S3SigV4Auth(Credentials(key, secret, token), "s3", "eu-west-1").add_auth(request)
        now = datetime.strptime(request.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
        parts = urlsplit(base)
        ours = sign_get(canonical_host(parts.scheme, parts.netloc), path, query, headers, access_key=key,
                        secret_key=secret, token=token, region="eu-west-1", now=now)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Content-SHA256", "X-Amz-Security-Token", "Range"):
            assert ours.get(name) == request.headers.get(name), (base, name)


def test_the_url_is_the_one_botocore_resolves(monkeypatch: pytest.MonkeyPatch) -> None:
    import botocore.session
    from botocore.config import Config

    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    for var, value in fake_aws_env().items():  # the client signs before it sends: never a credential lookup
        monkeypatch.setenv(var, value)
    key = "store/odd/a b+c~d=é%2F.sig"
    taken = [(None, "us-east-1", {}), (None, "eu-west-1", {}), (None, "ap-southeast-2", {"s3": {"addressing_style": "auto"}}),
             ("http://127.0.0.1:9000", "eu-west-1", {}), ("https://minio.example.com", "us-east-1", {}),
             ("http://localhost:9000", "us-east-1", {"s3": {"addressing_style": "path"}})]
    refused = [(None, "eu-west-1", {"s3": {"addressing_style": "path"}}), (None, "cn-north-1", {}),
               (None, "us-gov-west-1", {}), ("http://localhost:9000", "us-east-1", {"s3": {"addressing_style": "virtual"}})]
    for endpoint, region, config in taken + refused:
        reader = SignedReader.for_options("bkt-signed", {"endpoint_url": endpoint, "config_kwargs": config,
                                                         "client_kwargs": {"region_name": region}})
        if (endpoint, region, config) in refused:
            assert reader is None, (endpoint, region, config)
            continue
        client = botocore.session.Session().create_client("s3", endpoint_url=endpoint, region_name=region,
                                                           config=Config(**config))
        sent: list[str] = []

        def stop(request: Any, sent: list[str] = sent, **kwargs: Any) -> None:
            sent.append(request.url)
            raise RuntimeError("not sent: only the URL is compared")

        client.meta.events.register("before-send.s3", stop)
        with pytest.raises(RuntimeError, match="not sent"):
            client.get_object(Bucket="bkt-signed", Key=key)
        assert reader is not None and reader.url(key) == sent[0], (endpoint, region, config)
        assert reader._region == region


def _reader(bucket: str = "bkt-signed", **opts: Any) -> SignedReader | None:
    return SignedReader.for_options(bucket, {"endpoint_url": "http://127.0.0.1:9", **opts})


def test_only_what_the_client_would_send_alike_is_taken(s3_server: S3Server, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    assert _reader() is not None
    refused: list[tuple[str, dict[str, Any]]] = [
        ("bkt-signed", {"anon": True}), ("bkt-signed", {"profile": "dev"}),
        ("bkt-signed", {"endpoint_url": None, "config_kwargs": {"region_name": "cn-north-1"}}),  # other partition
        ("my.dotted.bucket", {"endpoint_url": None}),  # AWS: path-style on the region's host
        ("bkt-signed", {"endpoint_url": "http://127.0.0.1:9/base"}),
        ("bkt-signed", {"config_kwargs": {"s3": {"addressing_style": "virtual"}}}),
        ("bkt-signed", {"config_kwargs": {"proxies": {"http": "http://127.0.0.1:1"}}}),
        ("bkt-signed", {"client_kwargs": {"verify": False}}), ("bkt-signed", {"key": "k"}),
        ("bkt-signed", {"key": "k", "secret": "s", "client_kwargs": {"aws_access_key_id": "other"}}),
        ("Bkt_Signed", {}), ("arn:aws:s3:us-east-1:1:accesspoint/x", {}),
    ]
    for bucket, opts in refused:
        assert _reader(bucket, **opts) is None, (bucket, opts)
    for var, value in (("HTTPS_PROXY", "http://127.0.0.1:1"), ("AWS_USE_FIPS_ENDPOINT", "true"),
                       ("AWS_CA_BUNDLE", " ")):
        with monkeypatch.context() as m:
            m.setenv(var, value)
            assert _reader() is None, var
    config = tmp_path / "config"
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    config.write_text("[default]\nregion = eu-west-3\noutput = json\n")
    reader = _reader()
    assert reader is not None and reader._region == "eu-west-3"  # botocore's region, from the file
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    assert _reader()._region == "ap-south-1"  # type: ignore[union-attr]  # the environment beats the file
    config.write_text("[default]\nregion = eu-west-3\ns3 =\n  addressing_style = virtual\n")
    assert _reader() is None  # settings it does not read: the client
    config.write_text("[default]\nregion = eu-west-3\n")
    monkeypatch.setenv("AWS_PROFILE", "missing")
    assert _reader() is None  # botocore raises ProfileNotFound: the client says so


@pytest.mark.slow
def test_a_listing_of_many_pages(s3_url: str, s3_server: S3Server) -> None:
    bucket = s3_url.split("/")[2]
    client = s3_server.client()
    for i in range(1_005):
        client.put_object(Bucket=bucket, Key=f"cassettes/objects/k{i:05d}", Body=b"x")
    signed, via_client, _ = _stores(s3_url)
    a, b = list(signed.list("objects/")), list(via_client.list("objects/"))
    assert a == b and len(a) == 1_005
    assert signed._direct._signed is not None


@pytest.mark.parametrize("config, credentials, env", [
    ("[profile default]\nca_bundle = {tmp}/corp.pem\n", "", {}),  # botocore's default profile too
    ("[default]\nregion = eu-west-3\n[profile default]\nregion = eu-west-1\n", "", {}),  # the last one read
    ("[profile  dev]\nca_bundle = {tmp}/corp.pem\n", "", {"AWS_PROFILE": "dev"}),  # split as shlex splits
    ('[profile "dev"]\nregion = eu-west-1\n', "", {"AWS_PROFILE": "dev"}),
    ("[default]\nregion = eu-west-3\n", "[default]\nregion = eu-north-1\n", {}),  # credentials file last
    ("[default]\nregion = eu-west-3\n", "[default]\nca_bundle = {tmp}/corp.pem\n", {}),
    ("[default]\nregion = eu-west-3\n[profile other]\ncredential_process = x\n", "", {}),
])
def test_the_profile_is_read_as_botocore_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str,
                                                  credentials: str, env: dict[str, str]) -> None:
    """Whatever profile botocore builds from the shared files (its section names, its order,
    the credentials file read last, paths with variables): the reader is taken only where
    that profile holds nothing but region, output and keys, and signs for its region."""
    import botocore.session
    from botocore.exceptions import ProfileNotFound

    from casstore.store.s3_signed import _PROFILE_KEYS

    for var in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CA_BUNDLE"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "config").write_text(config.format(tmp=tmp_path))
    (tmp_path / "credentials").write_text(credentials.format(tmp=tmp_path))
    monkeypatch.setenv("CASSTORE_TEST_AWS_DIR", str(tmp_path))
    monkeypatch.setenv("AWS_CONFIG_FILE", "$CASSTORE_TEST_AWS_DIR/config")  # botocore expands variables
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    session = botocore.session.Session()
    try:
        usable = set(session.get_scoped_config()) <= _PROFILE_KEYS
    except ProfileNotFound:
        usable = False
    reader = _reader()
    assert (reader is not None) == usable
    if reader is not None:
        assert reader._region == (session.get_config_variable("region") or "us-east-1")


def test_a_body_that_fails_the_servers_checksum_is_the_clients_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore asks S3 for the object's checksum (x-amz-checksum-mode) and checks the body
    against it: a body that does not match is its error, not bytes served (a stub S3 on
    127.0.0.1 answering every GET with bytes that are not the ones it names)."""
    import base64
    import threading
    import zlib
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str | None] = []

    class Stub(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            seen.append(self.headers.get("x-amz-checksum-mode"))
            body = b"what was stored"
            named = base64.b64encode(zlib.crc32(b"something else").to_bytes(4, "big")).decode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("x-amz-checksum-crc32", named)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    for var, value in (("AWS_ACCESS_KEY_ID", "testing-" + "x" * 8), ("AWS_SECRET_ACCESS_KEY", "testing-" + "y" * 16),
                       ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(var, value)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url, opts = "s3://bkt-stub/cassettes", {"endpoint_url": f"http://127.0.0.1:{server.server_address[1]}"}
        errors = []
        for store in (FsspecStore(url, dict(opts)), FsspecStore(url, {**opts, **CLIENT_ONLY})):
            with pytest.raises(Exception) as exc:  # noqa: PT011 - whatever the client raises, both alike
                store.read("objects/sha256/ab/" + "c" * 62)
            errors.append((type(exc.value), str(exc.value)))
        assert errors[0] == errors[1] and "checksum" in errors[1][1].lower(), errors
        assert seen and all(mode == "ENABLED" for mode in seen), seen  # what botocore sends, every time
    finally:
        server.shutdown()
        server.server_close()
