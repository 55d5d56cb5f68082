"""Fault injection through use(faults=...), with the real OpenAI SDK, httpx and requests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import requests

import casstore
from casstore.errors import UsageError
from tests.helpers.llm_server import LLMServer


def _client(server: LLMServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)


def _chat(client: openai.OpenAI, text: str) -> Any:
    return client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": text}])


def _record_three(cassette_dir: Path, server: LLMServer, key: str) -> list[str]:
    client = _client(server, key)
    with casstore.use("three", mode="record", cassette_dir=cassette_dir):
        return [_chat(client, q).choices[0].message.content for q in ("a", "b", "c")]


def test_a_503_on_the_second_of_three_calls(cassette_dir: Path, llm_server: LLMServer, fake_key: str) -> None:
    recorded = _record_three(cassette_dir, llm_server, fake_key)
    client = _client(llm_server, fake_key)
    before = llm_server.count
    with casstore.use("three", mode="replay", cassette_dir=cassette_dir, faults={"1": 503}):
        assert _chat(client, "a").choices[0].message.content == recorded[0]
        with pytest.raises(openai.InternalServerError) as info:
            _chat(client, "b")
        # the answer's body (what the SDK raised from), not the SDK's way of printing its error
        assert info.value.status_code == 503 and "[casstore-fault:503]" in info.value.response.text
        assert _chat(client, "c").choices[0].message.content == recorded[2]
    assert llm_server.count == before
    with casstore.use("three", mode="replay", cassette_dir=cassette_dir, faults={0: 429}):
        with pytest.raises(openai.RateLimitError) as rate:
            _chat(client, "a")
    assert rate.value.response.headers["retry-after"] == "1"
    # the cassette itself is unchanged
    with casstore.use("three", mode="replay", cassette_dir=cassette_dir):
        assert [_chat(client, q).choices[0].message.content for q in ("a", "b", "c")] == recorded


def test_timeout_and_reset_are_the_clients_own_errors(cassette_dir: Path, llm_server: LLMServer) -> None:
    with casstore.use("raw", mode="record", cassette_dir=cassette_dir):
        httpx.get(llm_server.url + "/echo?x=1")
        requests.get(llm_server.url + "/echo?x=2", timeout=5)
    with casstore.use("raw", mode="replay", cassette_dir=cassette_dir, faults={0: "timeout", 1: "reset"}):
        with pytest.raises(httpx.ReadTimeout, match="casstore-fault:timeout"):
            httpx.get(llm_server.url + "/echo?x=1")
        with pytest.raises(requests.exceptions.ConnectionError, match="casstore-fault:reset"):
            requests.get(llm_server.url + "/echo?x=2", timeout=5)
    with casstore.use("raw", mode="replay", cassette_dir=cassette_dir, faults={1: "timeout"}):
        httpx.get(llm_server.url + "/echo?x=1")
        with pytest.raises(requests.exceptions.ReadTimeout):
            requests.get(llm_server.url + "/echo?x=2", timeout=5)


def test_llm_fault_classes_rewrite_the_message_and_callables_rewrite_the_entry(
    cassette_dir: Path, llm_server: LLMServer, fake_key: str
) -> None:
    recorded = _record_three(cassette_dir, llm_server, fake_key)
    client = _client(llm_server, fake_key)
    with casstore.use("three", mode="replay", cassette_dir=cassette_dir,
                      faults={0: "misleading_retrieval", 1: "wrong_system_prompt", 2: "dropped_message"}):
        first, second, third = (_chat(client, q).choices[0].message.content for q in ("a", "b", "c"))
    assert first.startswith("[casstore-fault:misleading_retrieval]") and first.endswith(recorded[0])
    assert second.startswith("[casstore-fault:wrong_system_prompt]") and recorded[1] not in second
    assert third == ""

    def swap(entry: dict[str, Any]) -> dict[str, Any]:
        body = entry["response"].get("body") or json.loads(entry["response"].pop("body_text"))
        body["choices"][0]["message"]["content"] = "rewritten"
        entry["response"]["body"] = body
        entry["response"].pop("body_format", None)
        return entry

    with casstore.use("three", mode="replay", cassette_dir=cassette_dir, faults={2: swap}):
        assert [_chat(client, q).choices[0].message.content for q in ("a", "b", "c")] == [*recorded[:2], "rewritten"]


def test_tool_faults_and_bad_faults(cassette_dir: Path) -> None:
    lookup = casstore.tool("lookup", lambda order: {"order": order})
    with casstore.use("tools", mode="record", cassette_dir=cassette_dir):
        lookup(7)
    with casstore.use("tools", mode="replay", cassette_dir=cassette_dir, faults={0: "timeout"}):
        with pytest.raises(TimeoutError, match="casstore-fault:timeout"):
            lookup(7)
    with pytest.raises(UsageError, match="unknown fault 'explode'"):
        casstore.use("tools", faults={0: "explode"})
    with pytest.raises(UsageError, match="call numbers"):
        casstore.use("tools", faults={-1: 503})
    # str.isdigit() is true for "²" (int() raised ValueError) and "٣" (int() read call 3)
    # and "5" * 5000 passed isascii/isdigit, then int() raised ValueError (its 4300-digit limit)
    for key in ("\u00b2", "\u0663", "5" * 5000):
        with pytest.raises(UsageError, match="call numbers"):
            casstore.use("tools", faults={key: 503})
    with pytest.raises(UsageError, match="unknown fault '\u00b2'"):
        casstore.use("tools", faults={0: "\u00b2"})
    with pytest.raises(UsageError, match="unknown fault '\u0665\u0660\u0663'"):  # was read as status 503
        casstore.use("tools", faults={0: "\u0665\u0660\u0663"})
    with pytest.raises(UsageError, match="unknown fault '5555"):  # a ValueError (int()'s digit limit)
        casstore.use("tools", faults={0: "5" * 5000})
    with casstore.use("tools", mode="replay", cassette_dir=cassette_dir, faults={0: 503}):
        with pytest.raises(UsageError, match="tool call"):
            lookup(7)


def test_faults_on_aiohttp_urllib3_and_http_client(cassette_dir: Path, llm_server: LLMServer) -> None:
    import asyncio
    import http.client

    import aiohttp
    import urllib3

    async def aio_get(url: str) -> int:
        async with aiohttp.ClientSession() as http_session, http_session.get(url) as r:
            return r.status

    def plain_get(path: str) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", llm_server.port, timeout=5)
        try:
            conn.request("GET", path)
            return conn.getresponse().status
        finally:
            conn.close()

    pool = urllib3.PoolManager(retries=False)
    with casstore.use("clients", mode="record", cassette_dir=cassette_dir):
        asyncio.run(aio_get(llm_server.url + "/echo?c=aio"))
        pool.request("GET", llm_server.url + "/echo?c=u3")
        plain_get("/echo?c=hc")
    faults = {0: "timeout", 1: "timeout", 2: "reset"}
    with casstore.use("clients", mode="replay", cassette_dir=cassette_dir, faults=faults):
        with pytest.raises(aiohttp.ServerTimeoutError):
            asyncio.run(aio_get(llm_server.url + "/echo?c=aio"))
        with pytest.raises(urllib3.exceptions.ReadTimeoutError):
            pool.request("GET", llm_server.url + "/echo?c=u3")
        with pytest.raises(ConnectionResetError):
            plain_get("/echo?c=hc")
    with casstore.use("clients", mode="replay", cassette_dir=cassette_dir, faults={0: 503, 2: 429}):
        assert asyncio.run(aio_get(llm_server.url + "/echo?c=aio")) == 503
        assert pool.request("GET", llm_server.url + "/echo?c=u3").status == 200
        assert plain_get("/echo?c=hc") == 429
