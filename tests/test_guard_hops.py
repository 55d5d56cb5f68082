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
