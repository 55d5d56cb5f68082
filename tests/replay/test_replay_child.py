"""casstore.replay.child: a child of a guarded offline parent installs the guard when it imports
an HTTP client (real child interpreters, a loopback server whose count proves nothing went out)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers.llm_server import LLMServer

# each: the client's import, then one call to {url}; casstore is imported first (the same hook
# the .pth file arms), and the client import must finish before the guard goes in
CALLS = {
    "urllib.request": "import urllib.request\nurllib.request.urlopen({url!r}).read()",
    "http.client": "import http.client\nc = http.client.HTTPConnection({host!r}, {port})\nc.request('GET', '/echo')\nc.getresponse().read()",
    "httpx": "import httpx\nhttpx.get({url!r})",
    "requests": "import requests\nrequests.get({url!r})",
    "urllib3": "import urllib3\nurllib3.PoolManager().request('GET', {url!r})",
    "aiohttp": "import asyncio, aiohttp\nasync def main():\n    async with aiohttp.ClientSession() as s:\n"
               "        async with s.get({url!r}) as r: await r.read()\nasyncio.run(main())",
}


def _child(code: str, env: dict[str, str]) -> str:
    script = "import casstore\ntry:\n" + "".join(f"    {line}\n" for line in code.splitlines()) + (
        "    print('went out')\nexcept Exception as exc:\n    print(type(exc).__name__)\n"
        "import sys\nprint(sorted(m for m in ('httpx', 'requests', 'aiohttp') if m in sys.modules))\n")
    full = {k: v for k, v in os.environ.items() if not k.startswith("CASSTORE_")}
    out = subprocess.run([sys.executable, "-c", script], env={**full, **env}, capture_output=True, text=True, timeout=120)
    assert "could not be installed" not in out.stderr, out.stderr
    return out.stdout


@pytest.mark.parametrize("client", list(CALLS))
def test_a_guarded_child_refuses_each_client(client: str, llm_server: LLMServer) -> None:
    host, port = llm_server.url.split("//")[1].split(":")
    code = CALLS[client].format(url=llm_server.url + "/echo", host=host, port=port)
    out = _child(code, {"CASSTORE_OFFLINE": "1", "CASSTORE_GUARD_CHILDREN": "1"})
    assert out.splitlines()[0] == "LiveCallBlocked", out
    assert llm_server.count == 0
    # the same child without the parent's mark goes out: the guard is what stopped it
    assert _child(code, {"CASSTORE_OFFLINE": "1"}).splitlines()[0] == "went out"
    assert llm_server.count == 1


def test_arming_imports_no_http_client(llm_server: LLMServer) -> None:
    out = _child("pass", {"CASSTORE_OFFLINE": "1", "CASSTORE_GUARD_CHILDREN": "1"})
    assert out.splitlines() == ["went out", "[]"]  # 'went out': the empty try body ran
