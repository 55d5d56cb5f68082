"""What the aiohttp, urllib3 and http.client adapters share (casstore/replay/wire.py):
redirects served hop by hop, and a stream abandoned half-way recorded as far as it was read."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import urllib3

import casstore
from tests.helpers.bedrock_server import BedrockServer
from tests.helpers.llm_server import LLMServer
from tests.helpers.replay import record_then_replay


def test_redirects_are_recorded_and_served_hop_by_hop(cassette_dir: Path, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    url = llm_server.url + "/redirect?" + urllib.parse.urlencode({"to": "/echo?hop=2"})

    async def with_aiohttp() -> Any:
        async with aiohttp.ClientSession() as http:
            async with http.get(url) as r:
                return [r.status, len(r.history), r.history[0].status, str(r.url).rsplit("/", 1)[1], (await r.json())["n"]]

    def run() -> list[Any]:
        r = urllib3.PoolManager().request("GET", url)
        out = [[r.status, len(r.retries.history), r.geturl(), r.json()["n"]]]
        out.append(asyncio.run(with_aiohttp()))
        with urllib.request.urlopen(url, timeout=5) as f:
            out.append([f.status, f.url.rsplit("/", 1)[1], json.loads(f.read())["n"]])
        return out

    live, replayed = record_then_replay("redirects", cassette_dir, monkeypatch, llm_server, run)
    assert replayed == live
    assert live == [[200, 1, "/echo?hop=2", 2], [200, 1, 302, "echo?hop=2", 4], [200, "echo?hop=2", 6]]
    entries = json.loads((cassette_dir / "redirects.json").read_text())["entries"]
    assert [e["response"]["status"] for e in entries] == [302, 200] * 3


def test_a_stream_abandoned_half_way_is_recorded_as_far_as_it_was_read(cassette_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    body = json.dumps({"messages": [{"role": "user", "content": [{"text": "a long answer please"}]}]}).encode()
    with BedrockServer() as server:
        url = server.url + "/model/m1/converse-stream"
        with casstore.use("abandoned", mode="record", cassette_dir=cassette_dir):
            r = urllib3.PoolManager().request("POST", url, body=body, preload_content=False)
            stream = r.stream()
            first_two = [next(stream), next(stream)]  # then the block ends
        chunks = json.loads((cassette_dir / "abandoned.json").read_text())["entries"][0]["response"]["chunks"]
        assert [c["eventstream"]["headers"][0][1] for c in chunks] == ["messageStart", "contentBlockDelta"]
        seen = server.count
        monkeypatch.setenv("CASSTORE_OFFLINE", "1")
        with casstore.use("abandoned", mode="replay", cassette_dir=cassette_dir):
            replayed = list(urllib3.PoolManager().request("POST", url, body=body, preload_content=False).stream())
        assert replayed == first_two and server.count == seen
