"""Offline through a proxy: the proxy is where the connection goes, so it must be allowed too.

Two loopback servers: the target (allowed by ``CASSTORE_ALLOWED_HOSTS``) and a proxy (a
server that answers absolute-URI requests itself, as a forwarding proxy would). Every
client sends a call to the target through the proxy, given explicitly or by
``HTTP_PROXY``; the servers' counts prove a refused call reached neither.
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import aiohttp
import httpx
import pytest
import requests
import urllib3

import casstore
from tests.helpers.llm_server import LLMServer


def _aiohttp(url: str, proxy: str | None) -> None:
    async def main() -> None:
        async with aiohttp.ClientSession(trust_env=proxy is None) as http:
            async with http.get(url, proxy=proxy) as r:
                await r.read()

    asyncio.run(main())


# name -> call(url, proxy); proxy None: the proxy comes from HTTP_PROXY
CLIENTS: dict[str, Callable[[str, str | None], object]] = {
    "httpx": lambda url, proxy: httpx.Client(proxy=proxy).get(url),
    "requests": lambda url, proxy: requests.get(url, proxies={"http": proxy} if proxy else None),
    "urllib3": lambda url, proxy: urllib3.ProxyManager(proxy or "").request("GET", url),
    "aiohttp": _aiohttp,
    "urllib.request": lambda url, proxy: urllib.request.build_opener(
        urllib.request.ProxyHandler({"http": proxy} if proxy else None)).open(url).read(),
}
FROM_ENV = ["httpx", "requests", "aiohttp", "urllib.request"]  # urllib3 takes no proxy from the environment


@pytest.fixture
def servers(cassette_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LLMServer, LLMServer]]:
    """The target and the proxy; offline (after cassette_dir, whose replay_env clears it)."""
    for var in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    with LLMServer() as target, LLMServer() as proxy:
        monkeypatch.setenv("CASSTORE_OFFLINE", "1")
        monkeypatch.setenv("CASSTORE_ALLOWED_HOSTS", f"127.0.0.1:{target.url.rsplit(':', 1)[1]}")
        yield target, proxy


def _run(where: str, cassette_dir: Path, fn: Callable[[], object]) -> None:
    if where == "guard":
        with casstore.guard():
            fn()
    else:
        with casstore.use("proxied", mode="live", cassette_dir=cassette_dir):
            fn()


CASES = [(name, env) for name in CLIENTS for env in (False, True) if not env or name in FROM_ENV]


@pytest.mark.parametrize("where", ["use", "guard"])
@pytest.mark.parametrize(("name", "env"), CASES, ids=[f"{n}-{'env' if e else 'arg'}" for n, e in CASES])
def test_a_call_to_an_allowed_host_through_a_proxy_not_allowed_is_refused(
        name: str, env: bool, where: str, servers: tuple[LLMServer, LLMServer], cassette_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    target, proxy = servers
    if env and where == "use" and name == "requests":
        pytest.skip("offline, requests inside a block reads no proxy from the environment (it goes to the allowed host)")
    if env:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
    with pytest.raises(casstore.LiveCallBlocked) as err:
        _run(where, cassette_dir, lambda: CLIENTS[name](target.url + "/echo", None if env else proxy.url))
    assert (target.count, proxy.count) == (0, 0)
    assert proxy.url.split("//")[1] in str(err.value)  # the refusal names the proxy


@pytest.mark.parametrize("where", ["use", "guard"])
@pytest.mark.parametrize("name", list(CLIENTS))
def test_a_proxy_allowed_too_lets_the_call_through(
        name: str, where: str, servers: tuple[LLMServer, LLMServer], cassette_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    target, proxy = servers
    monkeypatch.setenv("CASSTORE_ALLOWED_HOSTS", f"{target.url.split('//')[1]},{proxy.url.split('//')[1]}")
    _run(where, cassette_dir, lambda: CLIENTS[name](target.url + "/echo", proxy.url))
    assert (target.count, proxy.count) == (0, 1)  # through the proxy, which answered
