"""The offline guard's holes closed by issue 29: every redirect hop checked (real clients against
two loopback stubs whose counts prove what reached them), children that fail closed, the socket
guard in children and over name lookups, strict replay that really stays offline."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.llm_server import LLMServer

# each: one GET of {url}, the client's whole call; the redirect's target must never be reached
CLIENTS = {
    "requests": "import requests\nrequests.get({url!r}, timeout=5)",
    "httpx": "import httpx\nhttpx.get({url!r}, follow_redirects=True)",
    "urllib": "import urllib.request\nurllib.request.urlopen({url!r}, timeout=5).read()",
    "urllib3": "import urllib3\nurllib3.PoolManager().request('GET', {url!r})",
    "aiohttp": "import asyncio, aiohttp\nasync def main():\n    async with aiohttp.ClientSession() as s:\n"
               "        async with s.get({url!r}) as r: await r.read()\nasyncio.run(main())",
}


@pytest.fixture
def second_server() -> Iterator[LLMServer]:
    with LLMServer() as server:
        yield server


def _env(**extra: str) -> dict[str, str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("CASSTORE_") and k != "CI"}
    return {**full, **extra}


def _script(body: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", body], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


def _outcome(code: str) -> str:
    """``code`` in a try: prints the error class, or 'went out'."""
    return "try:\n" + textwrap.indent(code, "    ") + "\n    print('went out')\nexcept Exception as exc:\n    print(type(exc).__name__)\n"


def _redirect(first: LLMServer, second: LLMServer) -> str:
    return first.url + "/redirect?" + urllib.parse.urlencode({"to": second.url + "/echo?hop=2"})


@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_redirect_to_a_host_not_allowed_is_refused_outside_any_block(
        client: str, llm_server: LLMServer, second_server: LLMServer) -> None:
    code = CLIENTS[client].format(url=_redirect(llm_server, second_server))
    body = "import casstore\nwith casstore.guard():\n" + textwrap.indent(_outcome(code), "    ")
    env = _env(CASSTORE_OFFLINE="1", CASSTORE_ALLOWED_HOSTS=f"127.0.0.1:{llm_server.port}")
    out = _script(body, env)
    assert out.stdout.strip() == "LiveCallBlocked", out.stdout + out.stderr
    assert llm_server.count == 1 and second_server.count == 0  # the allowed hop went, the other did not
    # the same redirect within allowed hosts is followed: the refusal is about the second host
    out = _script(body, {**env, "CASSTORE_ALLOWED_HOSTS": f"127.0.0.1:{llm_server.port},127.0.0.1:{second_server.port}"})
    assert out.stdout.strip() == "went out", out.stdout + out.stderr
    assert second_server.count == 1


def test_a_redirect_to_a_host_not_allowed_is_refused_under_the_pytest_plugin(
        tmp_path: Path, llm_server: LLMServer, second_server: LLMServer) -> None:
    tests = "\n\n".join(
        f"def test_{name}():\n" + textwrap.indent(code.format(url=_redirect(llm_server, second_server)), "    ")
        for name, code in CLIENTS.items())
    (tmp_path / "test_hops.py").write_text(tests + "\n")
    env = _env(CASSTORE_OFFLINE="1", CASSTORE_ALLOWED_HOSTS=f"127.0.0.1:{llm_server.port}",
               PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                          "casstore.replay.pytest_plugin", str(tmp_path)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert f"{len(CLIENTS)} failed" in run.stdout, run.stdout + run.stderr
    assert run.stdout.count("LiveCallBlocked") >= len(CLIENTS)
    assert second_server.count == 0


# -- children fail closed ---------------------------------------------------------------------------

# an aiohttp casstore cannot patch (no client middlewares: what aiohttp before 3.12 looks like)
OLD_AIOHTTP = {
    "__init__.py": "__version__ = '3.8.0'\nfrom . import payload, streams\n"
                   "class ClientSession:\n    async def _request(self, method, str_or_url): pass\n"
                   "class ClientResponse:\n    def __init__(self, method, url): pass\n",
    "payload.py": "class Payload: pass\n",
    "streams.py": "class StreamReader: pass\n",
}


def _old_aiohttp(root: Path) -> Path:
    package = root / "aiohttp"
    package.mkdir(parents=True)
    for name, text in OLD_AIOHTTP.items():
        (package / name).write_text(text)
    return root


def test_a_child_whose_client_cannot_be_patched_fails_closed(tmp_path: Path, llm_server: LLMServer) -> None:
    code = _outcome(f"import aiohttp, requests\nrequests.get({llm_server.url + '/echo'!r}, timeout=5)")
    env = _env(CASSTORE_OFFLINE="1", CASSTORE_GUARD_CHILDREN="1", PYTHONPATH=os.pathsep.join(filter(None, [str(_old_aiohttp(tmp_path / "old")), os.environ.get("PYTHONPATH")])))
    out = _script("import casstore\n" + code, env)
    assert "could not be installed" in out.stderr, out.stderr
    assert out.stdout.strip() == "LiveCallBlocked", out.stdout + out.stderr
    assert llm_server.count == 0
    # an allowed host still goes through the socket guard that stands in for the interception
    out = _script("import casstore\n" + code, {**env, "CASSTORE_ALLOWED_HOSTS": "127.0.0.1"})
    assert out.stdout.strip() == "went out", out.stdout + out.stderr
    assert llm_server.count == 1


def test_guard_children_0_arms_nothing() -> None:
    import ast

    root = str(Path(__file__).resolve().parents[2])
    tree = ast.parse(Path(root, "setup.py").read_text())  # the line every install puts in site-packages
    PTH_LINE = next(ast.literal_eval(node.value) for node in tree.body
                    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "PTH_LINE")
    probe = f"exec({PTH_LINE!r})\nimport sys\nprint('casstore' in sys.modules)"
    for value, loaded in (("0", "False"), ("off", "False"), ("1", "True")):
        # -S: without site, so only this line runs (not the installed copy of it)
        out = subprocess.run([sys.executable, "-S", "-c", probe], env=_env(CASSTORE_OFFLINE="1", CASSTORE_GUARD_CHILDREN=value,
                             PYTHONPATH=root), capture_output=True, text=True, timeout=60)
        assert out.stdout.strip() == loaded, (value, out.stdout + out.stderr)


# -- the socket guard: children and name lookups -----------------------------------------------------

RAW_CALL = "import http.client\nc = http.client.HTTPConnection('127.0.0.1', {port}, timeout=5)\nc.request('GET', '/echo')\nc.getresponse().read()"


def test_the_socket_guard_reaches_child_processes(tmp_path: Path, llm_server: LLMServer) -> None:
    child = _outcome(RAW_CALL.format(port=llm_server.port))
    spawn = f"import subprocess, sys\nprint(subprocess.run([sys.executable, '-c', {child!r}], capture_output=True, text=True).stdout.strip())"
    # casstore.guard(block_network=True) and casstore.block_network()
    for opener in ("casstore.guard(block_network=True)", "casstore.block_network()"):
        out = _script(f"import casstore\nwith {opener}:\n" + textwrap.indent(spawn, "    "), _env())
        assert out.stdout.strip() == "LiveCallBlocked", (opener, out.stdout + out.stderr)
    # the pytest plugin's --casstore-block-network
    (tmp_path / "test_spawn.py").write_text("def test_spawn():\n" + textwrap.indent(spawn + "\nassert False", "    ") + "\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p", "casstore.replay.pytest_plugin",
                          "--casstore-block-network", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=180,
                         env=_env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"))
    assert run.stdout.splitlines()[0] == "LiveCallBlocked", run.stdout + run.stderr
    assert llm_server.count == 0
    # a child outside any guard goes out: the guard is what stopped the others
    assert _script(child, _env()).stdout.strip() == "went out"
    assert llm_server.count == 1


def test_the_socket_guard_refuses_name_lookups() -> None:
    import socket

    import casstore

    with casstore.block_network():
        for lookup, arg in ((socket.gethostbyname, "casstore-test.invalid"), (socket.gethostbyname_ex, "casstore-test.invalid"),
                            (socket.gethostbyaddr, "192.0.2.1")):
            with pytest.raises(casstore.LiveCallBlocked, match="casstore-test.invalid|192.0.2.1"):
                lookup(arg)
        with pytest.raises(casstore.LiveCallBlocked):
            socket.getnameinfo(("192.0.2.1", 80), 0)
        assert socket.gethostbyname("127.0.0.1") == "127.0.0.1"  # an address needs no resolver
        assert socket.getnameinfo(("192.0.2.1", 80), socket.NI_NUMERICHOST | socket.NI_NUMERICSERV) == ("192.0.2.1", "80")
    with casstore.block_network(allowed_hosts=["192.0.2.1"]):
        try:
            socket.gethostbyaddr("192.0.2.1")
        except OSError as exc:  # the resolver's own answer (no name): not the guard's
            assert not isinstance(exc, casstore.LiveCallBlocked)
    assert socket.gethostbyname is not None and "casstore" not in getattr(socket.gethostbyname, "__module__", "")


# -- strict replay makes no live call in this process ---------------------------------------------------


def test_strict_replay_refuses_connections_below_the_adapters(llm_server: LLMServer, cassette_dir: Path) -> None:
    import http.client

    import httpcore
    import requests
    import urllib3

    import casstore

    with casstore.use("strict", mode="record", cassette_dir=cassette_dir):
        requests.get(llm_server.url + "/echo?recorded=1", timeout=5)
    assert llm_server.count == 1

    def raw_http_client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", llm_server.port, timeout=5)
        conn.connect()
        conn.send(b"GET /echo HTTP/1.0\r\n\r\n")

    def urllib3_connection() -> None:
        urllib3.connection.HTTPConnection("127.0.0.1", llm_server.port).request("GET", "/echo")

    def httpcore_pool() -> None:
        with httpcore.ConnectionPool() as pool:
            pool.request("GET", llm_server.url + "/echo")

    with casstore.use("strict", mode="replay", cassette_dir=cassette_dir):
        assert requests.get(llm_server.url + "/echo?recorded=1", timeout=5).status_code == 200  # served
        for call in (raw_http_client, urllib3_connection, httpcore_pool):
            with pytest.raises(casstore.LiveCallBlocked, match="strict replay makes no live call") as info:
                call()
            assert f"127.0.0.1:{llm_server.port}" in str(info.value)
    assert llm_server.count == 1
