"""HTTPS through every client adapter: record, replay offline, and offline refusal.

The stub provider serves TLS on 127.0.0.1 with a certificate signed by a CA made at test
time with ``cryptography`` (nothing is committed); each client trusts that CA the way its
users do (``verify=``, ``ssl=``, ``ca_certs=``, ``context=``). The stub keeps running during
replay, so its request count proves that replay sent nothing.
"""

from __future__ import annotations

import asyncio
import datetime
import http.client
import ipaddress
import json
import ssl
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
import requests
import urllib3
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import casstore
from tests.helpers.llm_server import LLMServer
from tests.helpers.replay import record_then_replay


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_tls_files(folder: Path) -> tuple[Path, Path, Path]:
    """``(ca.pem, server.pem, server.key)``: a throwaway CA and a 127.0.0.1 certificate it signed."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (
        x509.CertificateBuilder().subject_name(_name("casstore test CA")).issuer_name(_name("casstore test CA"))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder().subject_name(_name("127.0.0.1")).issuer_name(ca.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                    x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[LLMServer, Path]]:
    """``(the stub on https://127.0.0.1:<port>, the CA file that signed its certificate)``."""
    ca, cert, key = make_tls_files(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = LLMServer(tls=context).start()
    try:
        yield server, ca
    finally:
        server.stop()


def _body(value: Any) -> Any:
    return {k: value[k] for k in ("method", "path", "query", "body")}


def _clients(url: str, ca: Path) -> dict[str, Callable[[], Any]]:
    """One GET and one JSON POST per client, each trusting ``ca`` only."""
    context = ssl.create_default_context(cafile=str(ca))
    payload = {"q": "over tls", "n": [1, 2]}

    def with_httpx() -> Any:
        with httpx.Client(verify=context) as c:
            return [_body(c.get(url + "/echo?via=httpx").json()), _body(c.post(url + "/echo", json=payload).json())]

    def with_requests() -> Any:
        with requests.Session() as s:
            return [_body(s.get(url + "/echo?via=requests", verify=str(ca), timeout=5).json()),
                    _body(s.post(url + "/echo", json=payload, verify=str(ca), timeout=5).json())]

    def with_aiohttp() -> Any:
        async def main() -> Any:
            async with aiohttp.ClientSession() as s:
                async with s.get(url + "/echo?via=aiohttp", ssl=context) as r1:
                    first = _body(await r1.json())
                async with s.post(url + "/echo", json=payload, ssl=context) as r2:
                    return [first, _body(await r2.json())]

        return asyncio.run(main())

    def with_urllib3() -> Any:
        with urllib3.PoolManager(ca_certs=str(ca)) as pm:
            return [_body(pm.request("GET", url + "/echo?via=urllib3").json()),
                    _body(pm.request("POST", url + "/echo", json=payload).json())]

    def with_urllib_request() -> Any:
        get = urllib.request.urlopen(url + "/echo?via=urllib.request", context=context, timeout=5)
        post = urllib.request.urlopen(urllib.request.Request(
            url + "/echo", data=json.dumps(payload).encode(), headers={"content-type": "application/json"}),
            context=context, timeout=5)
        with get, post:
            return [_body(json.loads(get.read())), _body(json.loads(post.read()))]

    def with_http_client() -> Any:
        conn = http.client.HTTPSConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), context=context, timeout=5)
        try:
            conn.request("GET", "/echo?via=http.client")
            return [_body(json.loads(conn.getresponse().read()))]
        finally:
            conn.close()

    return {"httpx": with_httpx, "requests": with_requests, "aiohttp": with_aiohttp, "urllib3": with_urllib3,
            "urllib.request": with_urllib_request, "http.client": with_http_client}


CLIENTS = ["httpx", "requests", "aiohttp", "urllib3", "urllib.request", "http.client"]


@pytest.fixture(params=CLIENTS)
def https_client(request: pytest.FixtureRequest, tls_server: tuple[LLMServer, Path]) -> tuple[str, LLMServer, Callable[[], Any]]:
    """``(client name, the TLS stub, a run of that client against it)``, for each client."""
    server, ca = tls_server
    return request.param, server, _clients(server.url, ca)[request.param]


def test_https_records_and_replays_offline(
    https_client: tuple[str, LLMServer, Callable[[], Any]], cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, server, run = https_client
    live, replayed = record_then_replay(f"https_{client}", cassette_dir, monkeypatch, server, run)
    assert replayed == live
    assert live[0]["query"] == [["via", client]]
    entries = json.loads((cassette_dir / f"https_{client}.json").read_text())["entries"]
    assert entries[0]["target"] == f"GET {server.url}/echo?via={client}"


def test_offline_refuses_https(
    https_client: tuple[str, LLMServer, Callable[[], Any]], cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, server, run = https_client
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with casstore.use(f"https_off_{client}", mode="live", cassette_dir=cassette_dir):
        with pytest.raises(casstore.LiveCallBlocked, match=f"127.0.0.1:{server.port}"):
            run()
    with casstore.guard(), pytest.raises(casstore.LiveCallBlocked, match="outside any casstore.use"):
        run()
    assert server.count == 0
