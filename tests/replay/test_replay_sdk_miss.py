"""A replay miss reaches the test through the real OpenAI and Anthropic SDKs as itself.

Every SDK version casstore supports (openai >= 1.0, anthropic >= 0.30; the ones verified are
listed in docs/replay.md) would otherwise treat the miss as a connection error: retry it with
backoff and raise ``APIConnectionError``. The clients keep their default retries here; a
request hook on the SDK's own HTTP client counts its attempts (one: nothing was retried),
and the stub on 127.0.0.1 counts what reached it (nothing).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

import casstore
from casstore.errors import CassetteMiss, LiveCallBlocked
from tests.helpers.llm_server import LLMServer

MESSAGES = [{"role": "user", "content": "triage order 7"}]


def _counted(client: Any, *, asynchronous: bool = False) -> list[str]:
    """The URLs the SDK's HTTP client is asked to send, one per attempt (retries included)."""
    attempts: list[str] = []

    def hook(request: Any) -> None:
        attempts.append(str(request.url))

    async def ahook(request: Any) -> None:
        hook(request)

    client._client.event_hooks = {"request": [ahook if asynchronous else hook], "response": []}
    return attempts


def _openai(server: LLMServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=3)


def _anthropic(server: LLMServer, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key=key, max_retries=3)


def test_openai_miss_is_raised_at_once_without_retry(llm_server: LLMServer, fake_key: str, cassette_dir: Path) -> None:
    client = _openai(llm_server, fake_key)
    attempts = _counted(client)
    with casstore.use("sdk-miss", mode="replay", cassette_dir=cassette_dir), pytest.raises(CassetteMiss) as info:
        client.chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
    assert info.value.cassette == "sdk-miss" and info.value.kind == "llm"
    assert "no recording for this call" in str(info.value)
    assert len(attempts) == 1 and llm_server.count == 0


def test_openai_streamed_miss_is_raised_at_once(llm_server: LLMServer, fake_key: str, cassette_dir: Path) -> None:
    client = _openai(llm_server, fake_key)
    attempts = _counted(client)
    with casstore.use("sdk-miss", mode="replay", cassette_dir=cassette_dir), pytest.raises(CassetteMiss):
        client.chat.completions.create(model="gpt-test", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
    assert len(attempts) == 1 and llm_server.count == 0


def test_anthropic_miss_is_raised_at_once_without_retry(
    llm_server: LLMServer, fake_key: str, cassette_dir: Path
) -> None:
    client = _anthropic(llm_server, fake_key)
    attempts = _counted(client)
    with casstore.use("sdk-miss", mode="replay", cassette_dir=cassette_dir), pytest.raises(CassetteMiss):
        client.messages.create(model="claude-test", max_tokens=16, messages=MESSAGES)  # type: ignore[arg-type]
    assert len(attempts) == 1 and llm_server.count == 0


def test_async_clients_miss_at_once_without_retry(llm_server: LLMServer, fake_key: str, cassette_dir: Path) -> None:
    oai = openai.AsyncOpenAI(base_url=llm_server.url + "/v1", api_key=fake_key, max_retries=3)
    ant = anthropic.AsyncAnthropic(base_url=llm_server.url, api_key=fake_key, max_retries=3)
    attempts = {"openai": _counted(oai, asynchronous=True), "anthropic": _counted(ant, asynchronous=True)}
    errors: list[BaseException] = []

    async def go() -> None:
        with casstore.use("sdk-miss", mode="replay", cassette_dir=cassette_dir):
            for call in (
                lambda: oai.chat.completions.create(model="gpt-test", messages=MESSAGES),  # type: ignore[arg-type]
                lambda: ant.messages.create(model="claude-test", max_tokens=16, messages=MESSAGES),  # type: ignore[arg-type]
            ):
                try:
                    await call()
                except Exception as exc:  # noqa: BLE001 - the test looks at what arrived
                    errors.append(exc)

    asyncio.run(go())
    assert [isinstance(e, CassetteMiss) for e in errors] == [True, True], errors
    assert {k: len(v) for k, v in attempts.items()} == {"openai": 1, "anthropic": 1}
    assert llm_server.count == 0


def test_offline_refusal_through_the_sdk_is_raised_at_once(
    llm_server: LLMServer, fake_key: str, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    client = _openai(llm_server, fake_key)
    attempts = _counted(client)
    with casstore.use("sdk-offline", mode="record", cassette_dir=cassette_dir), pytest.raises(LiveCallBlocked):
        client.chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
    assert len(attempts) == 1 and llm_server.count == 0


def test_a_hit_and_a_live_call_still_go_through_the_sdk(
    llm_server: LLMServer, fake_key: str, cassette_dir: Path
) -> None:
    client = _openai(llm_server, fake_key)
    with casstore.use("sdk-hit", mode="record", cassette_dir=cassette_dir):
        recorded = client.chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
    assert llm_server.count == 1
    with casstore.use("sdk-hit", mode="replay", cassette_dir=cassette_dir):
        replayed = client.chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
    assert replayed.choices[0].message.content == recorded.choices[0].message.content
    assert llm_server.count == 1


def test_socket_guard_refusal_through_the_sdk_is_raised_at_once(llm_server: LLMServer, fake_key: str) -> None:
    client = _openai(llm_server, fake_key)
    attempts = _counted(client)
    with casstore.block_network(), pytest.raises(LiveCallBlocked) as info:
        client.chat.completions.create(model="gpt-test", messages=MESSAGES)  # type: ignore[arg-type]
    assert "socket guard" in str(info.value)
    assert len(attempts) == 1 and llm_server.count == 0
