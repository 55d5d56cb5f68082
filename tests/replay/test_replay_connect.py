"""Offline refusal at the connection level (casstore/replay/connect.py).

Connections opened below every client adapter -- httpcore's pools used without httpx,
urllib3 and http.client connections used directly (see also tests/reliability/test_redteam.py) --
are refused under ``CASSTORE_OFFLINE=1`` while the interception is installed, naming the
host and how to allow it; allowed hosts go through. Real libraries against the loopback
stub, whose request count proves nothing left.
"""

from __future__ import annotations

import asyncio
import http.client
from pathlib import Path

import httpcore
import pytest
import urllib3

import casstore as cs
from tests.helpers.llm_server import LLMServer


def test_httpcore_pool_used_directly_is_refused_offline(
    llm_server: LLMServer, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with cs.use("hc_sync", mode="live", cassette_dir=cassette_dir), httpcore.ConnectionPool() as pool:
        with pytest.raises(cs.LiveCallBlocked) as info:
            pool.request("GET", llm_server.url + "/echo")
    message = str(info.value)
    assert f"127.0.0.1:{llm_server.port}" in message and "CASSTORE_ALLOWED_HOSTS=127.0.0.1" in message
    assert "httpcore" in message
    assert llm_server.count == 0


def test_httpcore_async_pool_used_directly_is_refused_offline(
    llm_server: LLMServer, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")

    async def main() -> None:
        async with cs.use("hc_async", mode="live", cassette_dir=cassette_dir):
            async with httpcore.AsyncConnectionPool() as pool:
                await pool.request("GET", llm_server.url + "/echo")

    with pytest.raises(cs.LiveCallBlocked, match="httpcore"):
        asyncio.run(main())
    assert llm_server.count == 0


def test_httpcore_reaches_an_allowed_host_and_goes_live_when_not_offline(
    llm_server: LLMServer, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with cs.use("hc_live", mode="live", cassette_dir=cassette_dir), httpcore.ConnectionPool() as pool:
        assert pool.request("GET", llm_server.url + "/echo").status == 200
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    monkeypatch.setenv("CASSTORE_ALLOWED_HOSTS", "127.0.0.1")

    async def main() -> int:
        async with cs.use("hc_allowed", mode="live", cassette_dir=cassette_dir):
            async with httpcore.AsyncConnectionPool() as pool:
                return (await pool.request("GET", llm_server.url + "/echo")).status

    assert asyncio.run(main()) == 200
    assert llm_server.count == 2


def test_direct_connections_outside_a_block_are_refused_inside_guard(
    llm_server: LLMServer, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with cs.guard():
        for opener in (lambda: http.client.HTTPConnection("127.0.0.1", llm_server.port),
                       lambda: urllib3.connection.HTTPConnection("127.0.0.1", llm_server.port)):
            conn = opener()
            try:
                with pytest.raises(cs.LiveCallBlocked, match="outside any casstore.use"):
                    conn.connect()
            finally:
                conn.close()
        with httpcore.ConnectionPool() as pool, pytest.raises(cs.LiveCallBlocked):
            pool.request("GET", llm_server.url + "/echo")
    assert llm_server.count == 0


def test_the_connection_patches_come_out_with_the_last_block(cassette_dir: Path) -> None:
    before = (http.client.HTTPConnection.connect, urllib3.connection.HTTPConnection.connect,
              httpcore._backends.sync.SyncBackend.connect_tcp)
    with cs.use("hc_scope", mode="live", cassette_dir=cassette_dir):
        assert http.client.HTTPConnection.connect is not before[0]
        assert urllib3.connection.HTTPConnection.connect is not before[1]
        assert httpcore._backends.sync.SyncBackend.connect_tcp is not before[2]
    assert (http.client.HTTPConnection.connect, urllib3.connection.HTTPConnection.connect,
            httpcore._backends.sync.SyncBackend.connect_tcp) == before


class _FtpListener:
    """A loopback listener that counts connections and greets like an FTP server."""

    def __init__(self) -> None:
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(5)
        self.port = self.sock.getsockname()[1]
        self.count = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.count += 1
            conn.sendall(b"220 hi\r\n")
            conn.close()


def test_ftp_through_urllib_request_is_refused_offline_and_in_strict_replay(
        cassette_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib.error
    import urllib.request

    server = _FtpListener()
    url = f"ftp://127.0.0.1:{server.port}/f"
    with cs.use("ftp", mode="replay", cassette_dir=cassette_dir):  # strict replay: never the network
        with pytest.raises(cs.LiveCallBlocked, match=rf"ftp connection ftp://127.0.0.1:{server.port} is not recorded"):
            urllib.request.urlopen(url, timeout=5)
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with cs.guard():  # offline, outside every block
        with pytest.raises(cs.LiveCallBlocked, match="ftplib"):
            urllib.request.urlopen(url, timeout=5)
    assert server.count == 0
    monkeypatch.delenv("CASSTORE_OFFLINE")
    with cs.use("ftp", mode="record", cassette_dir=cassette_dir):  # a mode that may go live: it does
        with pytest.raises(urllib.error.URLError):  # (the listener is no real FTP server)
            urllib.request.urlopen(url, timeout=5)
    assert server.count == 1
    server.sock.close()
