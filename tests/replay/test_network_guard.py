"""Offline means offline, and the socket guard: exercised as users meet them, in real
pytest processes and plain Python scripts, against stubs on 127.0.0.1 that count what
reaches them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.llm_server import LLMServer


class TcpStub:
    """A loopback TCP listener that counts the connections made to it (and hangs up on them).

    ``accepted`` also drains the accept queue, so a connection the kernel completed but the
    accept thread has not reached yet is counted too.
    """

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self._accepted = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            conn = None
            with self._lock:
                try:
                    conn, _ = self.sock.accept()
                    self._accepted += 1
                except OSError:
                    pass
            if conn is not None:
                conn.close()
            self._stop.wait(0.01)

    @property
    def accepted(self) -> int:
        with self._lock:
            self.sock.settimeout(0)
            try:
                while True:
                    conn, _ = self.sock.accept()
                    self._accepted += 1
                    conn.close()
            except OSError:
                pass
            finally:
                self.sock.settimeout(0.2)
            return self._accepted

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def tcp_stub() -> Iterator[TcpStub]:
    stub = TcpStub()
    try:
        yield stub
    finally:
        stub.close()


def _run(cwd: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("CASSTORE_") and k != "CI"}
    full.update(env)
    return subprocess.run(args, cwd=cwd, env=full, capture_output=True, text=True, timeout=180, check=False)


def _pytest(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    plugins = ["-p", "casstore.replay.pytest_plugin"]
    return _run(
        cwd,
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugins, *args],
        {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **env},
    )


OFFLINE_TESTS = textwrap.dedent(
    """
    import asyncio
    import os
    import urllib.request

    import httpx
    import openai
    import pytest
    import requests

    import casstore

    URL = os.environ["CASSTORE_TEST_URL"]


    def test_requests_outside_any_block():
        requests.get(URL + "/echo?t=requests", timeout=5)


    def test_httpx_outside_any_block():
        with httpx.Client() as client:
            client.get(URL + "/echo?t=httpx")


    def test_async_httpx_outside_any_block():
        async def go():
            async with httpx.AsyncClient() as client:
                await client.get(URL + "/echo?t=async")

        asyncio.run(go())


    def test_openai_sdk_outside_any_block():
        client = openai.OpenAI(base_url=URL + "/v1", api_key="sk-" + "x" * 40, max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])


    def test_urllib3_outside_any_block():
        import urllib3

        urllib3.PoolManager().request("GET", URL + "/echo?t=urllib3", retries=False)


    def test_urllib_request_outside_any_block():
        urllib.request.urlopen(URL + "/echo?t=urllib", timeout=5).read()


    def test_aiohttp_outside_any_block():
        import aiohttp

        async def go():
            async with aiohttp.ClientSession(base_url=URL) as client:
                async with client.get("/echo?t=aiohttp") as response:
                    await response.read()

        asyncio.run(go())


    def test_inside_a_record_block(tmp_path):
        with casstore.use("rec", mode="record", cassette_dir=tmp_path):
            requests.get(URL + "/echo?t=record", timeout=5)


    def test_the_error_names_host_and_how_to_allow_it():
        with pytest.raises(casstore.LiveCallBlocked) as info:
            requests.get(URL + "/echo?t=message", timeout=5)
        text = str(info.value)
        assert "CASSTORE_OFFLINE=1" in text and "127.0.0.1" in text and "CASSTORE_ALLOWED_HOSTS=127.0.0.1" in text
        raise info.value
    """
)


@pytest.fixture
def offline_project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "casstore.toml").write_text("# plugin tests\n")
    (root / "test_offline.py").write_text(OFFLINE_TESTS)
    return root


def test_offline_blocks_unmarked_tests_and_the_stub_sees_nothing(offline_project: Path, llm_server: LLMServer) -> None:
    env = {"CASSTORE_OFFLINE": "1", "CASSTORE_TEST_URL": llm_server.url, "CASSTORE_ALLOWED_HOSTS": "example.com"}
    run = _pytest(offline_project, "-rf", env=env)
    assert "9 failed" in run.stdout, run.stdout + run.stderr
    assert run.stdout.count("LiveCallBlocked") >= 9
    assert "outside any casstore.use() block" in run.stdout
    assert llm_server.count == 0


def test_offline_allowed_hosts_from_env_option_and_config(offline_project: Path, llm_server: LLMServer) -> None:
    env = {"CASSTORE_OFFLINE": "1", "CASSTORE_TEST_URL": llm_server.url}
    run = _pytest(offline_project, "-k", "not names_host", env={**env, "CASSTORE_ALLOWED_HOSTS": "example.com, 127.0.0.1"})
    assert "8 passed" in run.stdout, run.stdout + run.stderr
    assert llm_server.count == 8
    (offline_project / "casstore.toml").write_text('[replay]\nallowed_hosts = ["127.0.0.1"]\n')
    run = _pytest(offline_project, "-k", "requests_outside or inside_a_record", env=env)
    assert "2 passed" in run.stdout, run.stdout + run.stderr
    (offline_project / "casstore.toml").write_text("")
    # 'localhost' stands for the loopback addresses too
    run = _pytest(offline_project, "-k", "httpx_outside", "--casstore-allowed-hosts=localhost", env=env)
    assert "2 passed" in run.stdout, run.stdout + run.stderr
    assert llm_server.count == 12


def test_replay_allowed_hosts_config() -> None:
    from casstore.config import Config
    from casstore.errors import ConfigError

    assert Config.from_dict({"replay": {"allowed_hosts": ["127.0.0.1", " db.internal "]}}).allowed_hosts == (
        "127.0.0.1", "db.internal")
    assert Config.from_dict({"replay": {"allowed_hosts": "a.com, b.com"}}).allowed_hosts == ("a.com", "b.com")
    assert Config.from_dict({}).allowed_hosts == ()
    with pytest.raises(ConfigError, match="unknown key 'allowed_host' in \\[replay\\]"):
        Config.from_dict({"replay": {"allowed_host": ["x"]}})
    with pytest.raises(ConfigError, match="'replay.allowed_hosts' must be a list"):
        Config.from_dict({"replay": {"allowed_hosts": [1]}})


def test_without_offline_nothing_is_installed(offline_project: Path, llm_server: LLMServer) -> None:
    (offline_project / "test_untouched.py").write_text(textwrap.dedent(
        """
        import socket
        import requests.adapters

        def test_untouched():
            assert not getattr(requests.adapters.HTTPAdapter.send, "__casstore__", False)
            assert not getattr(socket.socket.connect, "__casstore__", False)
        """
    ))
    run = _pytest(offline_project, "test_untouched.py", "-k", "untouched or requests_outside",
                  env={"CASSTORE_TEST_URL": llm_server.url})
    assert "1 passed" in run.stdout, run.stdout + run.stderr


SOCKET_TESTS = textwrap.dedent(
    """
    import asyncio
    import http.client
    import os
    import socket

    import pytest
    import requests

    import casstore

    PORT = int(os.environ["STUB_PORT"])


    def test_create_connection():
        socket.create_connection(("127.0.0.1", PORT), timeout=5).close()


    def test_connect_ex():
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", PORT)) == 0


    def test_asyncio_open_connection():
        async def go():
            reader, writer = await asyncio.open_connection("127.0.0.1", PORT)
            writer.close()

        asyncio.run(go())


    def test_http_client():
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=5)
        try:
            conn.connect()
        finally:
            conn.close()


    def test_requests_through_the_socket():
        try:
            requests.get(f"http://127.0.0.1:{PORT}/", timeout=5)
        except requests.ConnectionError:
            pass  # the stub hangs up at once: a connection was made, that is the point


    def test_names_are_refused_before_any_dns_lookup():
        with pytest.raises(casstore.LiveCallBlocked) as info:
            socket.getaddrinfo("api.openai.com", 443)
        text = str(info.value)
        assert "casstore" in text and "api.openai.com" in text and "--casstore-allowed-hosts=api.openai.com" in text


    def test_unix_sockets_and_socketpairs_are_not_network():
        a, b = socket.socketpair()
        a.sendall(b"x")
        assert b.recv(1) == b"x"
        a.close()
        b.close()
    """
)


@pytest.fixture
def socket_project(tmp_path: Path) -> Path:
    root = tmp_path / "sockproj"
    root.mkdir()
    (root / "test_sockets.py").write_text(SOCKET_TESTS)
    return root


def test_block_network_stops_raw_sockets(socket_project: Path, tcp_stub: TcpStub) -> None:
    env = {"STUB_PORT": str(tcp_stub.port)}
    run = _pytest(socket_project, "--casstore-block-network", env=env)
    assert "5 failed, 2 passed" in run.stdout, run.stdout + run.stderr
    assert "the socket guard (--casstore-block-network" in run.stdout
    assert f"127.0.0.1:{tcp_stub.port} blocked" in run.stdout
    assert tcp_stub.accepted == 0
    by_env = _pytest(socket_project, env={**env, "CASSTORE_BLOCK_NETWORK": "1"})
    assert "5 failed, 2 passed" in by_env.stdout, by_env.stdout + by_env.stderr
    assert tcp_stub.accepted == 0


def test_allowed_hosts_let_connections_through(socket_project: Path, tcp_stub: TcpStub) -> None:
    env = {"STUB_PORT": str(tcp_stub.port)}
    run = _pytest(socket_project, "--casstore-block-network", "--casstore-allowed-hosts", "127.0.0.1", env=env)
    assert "7 passed" in run.stdout, run.stdout + run.stderr
    assert tcp_stub.accepted == 5
    by_name = _pytest(socket_project, "-k", "create_connection", "--casstore-block-network",
                      "--casstore-allowed-hosts=db.internal,localhost", env=env)
    assert "1 passed" in by_name.stdout, by_name.stdout + by_name.stderr
    other_port = _pytest(socket_project, "-k", "create_connection", "--casstore-block-network",
                         f"--casstore-allowed-hosts=127.0.0.1:{tcp_stub.port + 1}", env=env)
    assert "1 failed" in other_port.stdout, other_port.stdout + other_port.stderr
    assert tcp_stub.accepted == 6


def test_in_process_block_network_restores_the_socket_module(tcp_stub: TcpStub) -> None:
    import casstore

    before = (socket.socket.__dict__.get("connect"), socket.getaddrinfo)
    with casstore.block_network():
        with pytest.raises(casstore.LiveCallBlocked):
            socket.create_connection(("127.0.0.1", tcp_stub.port), timeout=5)
        with casstore.block_network(allowed_hosts=["127.0.0.1"]):
            socket.create_connection(("127.0.0.1", tcp_stub.port), timeout=5).close()
        with pytest.raises(casstore.LiveCallBlocked):  # the inner allowance ended with its block
            socket.create_connection(("127.0.0.1", tcp_stub.port), timeout=5)
    assert (socket.socket.__dict__.get("connect"), socket.getaddrinfo) == before
    socket.create_connection(("127.0.0.1", tcp_stub.port), timeout=5).close()
    assert tcp_stub.accepted == 2


SCRIPT = textwrap.dedent(
    """
    import os
    import sys

    import requests

    import casstore

    URL = os.environ["CASSTORE_TEST_URL"]


    def call(tag):
        try:
            requests.get(URL + "/echo?t=" + tag, timeout=5)
            return "live"
        except casstore.LiveCallBlocked:
            return "blocked"


    out = [call("plain")]
    with casstore.guard():
        out.append(call("guarded"))
    out.append(call("after"))
    print(" ".join(out))
    """
)


def test_a_plain_script_is_guarded_inside_casstore_guard(tmp_path: Path, llm_server: LLMServer) -> None:
    (tmp_path / "script.py").write_text(SCRIPT)
    env = {"CASSTORE_TEST_URL": llm_server.url}
    run = _run(tmp_path, [sys.executable, "script.py"], {**env, "CASSTORE_OFFLINE": "1"})
    assert run.stdout.split() == ["live", "blocked", "live"], run.stdout + run.stderr
    assert llm_server.count == 2
    run = _run(tmp_path, [sys.executable, "script.py"], env)
    assert run.stdout.split() == ["live", "live", "live"], run.stdout + run.stderr


def test_allowed_host_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    from casstore.replay import guard

    monkeypatch.setenv("CASSTORE_ALLOWED_HOSTS", "API.Example.com, 10.0.0.5:8080, [::1]:9000, *.internal, fe80::1")
    assert guard.allowed("api.example.com", 443) and guard.allowed("api.example.com.", None)
    assert guard.allowed("10.0.0.5", 8080) and not guard.allowed("10.0.0.5", 8081)
    assert guard.allowed("::1", 9000) and not guard.allowed("::1", 9001)
    assert guard.allowed("db.internal", 5432) and not guard.allowed("internal", 5432)
    assert guard.allowed("fe80::1", 1) and not guard.allowed("example.com", 443)
    monkeypatch.setenv("CASSTORE_ALLOWED_HOSTS", "")
    assert not guard.allowed("127.0.0.1", 80)  # nothing by default, loopback included
    undo = guard.allow_hosts(["localhost"])
    try:
        assert guard.allowed("127.0.0.1", 80) and guard.allowed("::1", 80) and guard.allowed("localhost", 80)
    finally:
        undo()
    assert not guard.allowed("127.0.0.1", 80)


def test_a_port_of_unicode_digits_allows_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from casstore.replay import guard

    # str.isdigit() is true for "²" (int() raised ValueError out of the guard, at the test's
    # connect) and for "٨٠" (int() read port 80); a port is ASCII digits, else the entry matches nothing
    # (and 5000 ASCII digits past int()'s 4300-digit limit: a ValueError likewise)
    monkeypatch.setenv("CASSTORE_ALLOWED_HOSTS", "10.0.0.5:\u00b2, [::2]:\u00b2, 10.0.0.6:\u0668\u0660, 10.0.0.7:80, "
                       "10.0.0.8:" + "8" * 5000 + ", [::8]:" + "8" * 5000)
    assert not guard.allowed("10.0.0.5", 2) and not guard.allowed("::2", 2) and not guard.allowed("::2", 443)
    assert not guard.allowed("10.0.0.8", 80) and not guard.allowed("::8", 80)
    assert not guard.allowed("10.0.0.6", 80) and not guard.allowed("10.0.0.6", None)
    assert guard.allowed("10.0.0.7", 80)  # the control: ASCII digits are a port


def test_the_socket_guard_refuses_udp_datagrams_sent_to_an_address() -> None:
    import socket
    import threading

    import casstore as cs

    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(0.5)
    port = receiver.getsockname()[1]
    got: list[bytes] = []

    def receive() -> None:
        try:
            got.append(receiver.recvfrom(100)[0])
        except OSError:
            pass

    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with cs.block_network():
        with pytest.raises(cs.LiveCallBlocked, match=f"127.0.0.1:{port}"):
            sender.sendto(b"x", ("127.0.0.1", port))
        with pytest.raises(cs.LiveCallBlocked):
            sender.sendto(b"x", 0, ("127.0.0.1", port))
    t = threading.Thread(target=receive)
    t.start()
    t.join()
    assert got == []
    assert "sendto" not in socket.socket.__dict__  # restored: the base class's again
    t = threading.Thread(target=receive)
    t.start()
    sender.sendto(b"y", ("127.0.0.1", port))
    t.join()
    assert got == [b"y"]
    sender.close()
    receiver.close()
