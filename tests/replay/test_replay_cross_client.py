"""A generic HTTP call recorded by one client replays through another.

Clients add headers of their own (accept, user-agent, accept-encoding, connection,
content-length); none of them is part of a generic HTTP identity, so a recording made
with requests answers httpx, urllib3, aiohttp and urllib.request, and the reverse.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
import requests
import urllib3

import casstore
from tests.helpers.llm_server import LLMServer

BODY = {"order": 7, "items": [{"sku": "A-1", "qty": 2}], "note": "leave at door"}
HEADERS = {"x-shop": "north"}  # one header of the caller's own: it counts, and every client sends it


def _requests(url: str) -> Any:
    return requests.post(url, json=BODY, headers=HEADERS, timeout=5).json()


def _httpx(url: str) -> Any:
    with httpx.Client() as client:
        return client.post(url, json=BODY, headers=HEADERS).json()


def _urllib3(url: str) -> Any:
    return urllib3.PoolManager().request("POST", url, json=BODY, headers=HEADERS).json()


def _aiohttp(url: str) -> Any:
    async def call() -> Any:
        async with aiohttp.ClientSession() as session:
            async with session.post(url, json=BODY, headers=HEADERS) as r:
                return await r.json()

    return asyncio.run(call())


def _urllib_request(url: str) -> Any:
    req = urllib.request.Request(url, data=json.dumps(BODY).encode(), headers={**HEADERS, "content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as f:
        return json.loads(f.read())


CLIENTS: dict[str, Callable[[str], Any]] = {
    "httpx": _httpx,
    "urllib3": _urllib3,
    "aiohttp": _aiohttp,
    "urllib.request": _urllib_request,
}


@pytest.mark.parametrize("other", list(CLIENTS))
@pytest.mark.parametrize("direction", ["requests->other", "other->requests"])
def test_a_recording_replays_through_another_client(
    direction: str, other: str, cassette_dir: Path, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder, replayer = (_requests, CLIENTS[other]) if direction == "requests->other" else (CLIENTS[other], _requests)
    url = llm_server.url + "/echo?shop=1"
    with casstore.use("cross", mode="record", cassette_dir=cassette_dir):
        recorded = recorder(url)
    assert recorded["n"] == 1 and json.loads(recorded["body"]) == BODY
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with casstore.use("cross", mode="replay", cassette_dir=cassette_dir) as session:
        assert replayer(url) == recorded
    assert session.served == 1 and llm_server.count == 1
