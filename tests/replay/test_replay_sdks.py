"""Acceptance test of the replay library with the real OpenAI and Anthropic SDKs.

Only the provider is fake (``tests/helpers/llm_server.py`` on 127.0.0.1); the SDKs, httpx,
httpx2 and requests are the real ones. A run is recorded, the server is stopped, and the
same code replays offline with identical results and no request reaching the server.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
import requests

import casstore
from casstore.errors import CassetteMiss, LiveCallBlocked
from tests.helpers.llm_server import LLMServer


def _clients(server: LLMServer, key: str) -> tuple[openai.OpenAI, anthropic.Anthropic]:
    # max_retries=0: a replay miss or a stopped server must surface at once
    oai = openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)
    ant = anthropic.Anthropic(base_url=server.url, api_key=key, max_retries=0)
    return oai, ant


def _agent_run(server: LLMServer, key: str) -> list[Any]:
    """What an agent under test does: every kind of call the issue lists."""
    oai, ant = _clients(server, key)
    out: list[Any] = []
    for question, temperature in (("triage order 7", 0), ("summarize ticket 12", 0.2), ("draft reply", 0.7)):
        chat = oai.chat.completions.create(
            model="gpt-test",
            messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": question}],
            temperature=temperature,
        )
        out.append(chat.model_dump())
    stream = oai.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "stream a haiku"}], stream=True
    )
    out.append([chunk.model_dump() for chunk in stream])
    msg = ant.messages.create(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "classify this email"}]
    )
    out.append(msg.model_dump())
    with ant.messages.stream(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "stream the answer"}]
    ) as st:
        text = "".join(st.text_stream)
        final = st.get_final_message().model_dump()
    out.append({"text": text, "final": final})
    posted = requests.post(server.url + "/echo?source=requests", json={"order": 7, "action": "refund"}, timeout=5)
    out.append({"status": posted.status_code, "json": posted.json(), "ctype": posted.headers["content-type"]})

    async def async_call() -> dict[str, Any]:
        async with httpx.AsyncClient() as client:
            resp = await client.post(server.url + "/echo", json={"async": True})
            return {"status": resp.status_code, "json": resp.json()}

    out.append(asyncio.run(async_call()))
    return out


def test_record_then_replay_offline_identical(
    llm_server: LLMServer, fake_key: str, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with casstore.use("agent/happy_path", mode="record", cassette_dir=cassette_dir) as rec:
        recorded = _agent_run(llm_server, fake_key)
    assert llm_server.count == 8 and rec.live == 8 and rec.written
    path = cassette_dir / "agent" / "happy_path.json"
    data = json.loads(path.read_text())
    assert [e["kind"] for e in data["entries"]] == ["llm"] * 6 + ["http"] * 2
    assert data["entries"][3]["response"]["stream"] is True
    assert data["entries"][3]["response"]["chunks"][-1] == "data: [DONE]\n\n"
    assert {"gpt-test", "claude-test"} <= set(data["meta"]["models"])
    # the three chat answers differ (the server echoes the question), so a mixed-up replay fails
    assert len({r["choices"][0]["message"]["content"] for r in recorded[:3]}) == 3

    llm_server.stop()
    seen_before = llm_server.count
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with casstore.use("agent/happy_path", mode="replay", cassette_dir=cassette_dir) as rep:
        replayed = _agent_run(llm_server, fake_key)
    assert replayed == recorded
    assert rep.served == 8 and rep.live == 0
    assert llm_server.count == seen_before  # the server saw nothing during replay
    assert not rep.written  # replay never writes


def test_auto_mode_replays_when_the_cassette_exists(
    llm_server: LLMServer, fake_key: str, cassette_dir: Path
) -> None:
    with casstore.use("auto_case", cassette_dir=cassette_dir) as first:
        one = _agent_run(llm_server, fake_key)
    assert first.mode == "auto" and first.effective_mode == "record" and first.written
    count = llm_server.count
    with casstore.use("auto_case", cassette_dir=cassette_dir) as second:
        two = _agent_run(llm_server, fake_key)
    assert second.effective_mode == "replay" and llm_server.count == count
    assert one == two


def test_changed_parameter_raises_cassette_miss_naming_it(
    llm_server: LLMServer, fake_key: str, cassette_dir: Path
) -> None:
    oai, _ = _clients(llm_server, fake_key)
    messages = [{"role": "user", "content": "triage order 7"}]
    with casstore.use("miss", mode="record", cassette_dir=cassette_dir):
        oai.chat.completions.create(model="gpt-test", messages=messages, temperature=0.0)
    count = llm_server.count
    with casstore.use("miss", mode="replay", cassette_dir=cassette_dir):
        # 0 and 0.0 are the same setting: still a hit
        oai.chat.completions.create(model="gpt-test", messages=messages, temperature=0)
        with pytest.raises(CassetteMiss) as info:
            oai.chat.completions.create(model="gpt-test", messages=messages, temperature=0.7)
    err = info.value
    text = str(err)
    assert "temperature: 0.0 → 0.7" in text
    assert "'miss'" in text and err.identity in text and err.cassette == "miss"
    assert err.kind == "llm" and err.target.endswith("/v1/chat/completions") and err.target in text
    # we are under pytest: the test id is named; re-record this test, or keep the rest
    assert "the request changed: re-record just this test: `CASSTORE_MODE=record pytest 'tests/" in text, text
    assert "or `CASSTORE_MODE=record-new pytest 'tests/" in text and "keeps the old entry" in text
    assert err.differences == ["temperature: 0.0 → 0.7"]
    assert llm_server.count == count  # strict replay never touched the network


def test_changed_prompt_and_model_are_shown(llm_server: LLMServer, fake_key: str, cassette_dir: Path) -> None:
    _, ant = _clients(llm_server, fake_key)
    with casstore.use("miss2", mode="record", cassette_dir=cassette_dir):
        ant.messages.create(model="claude-test", max_tokens=10, messages=[{"role": "user", "content": "hello"}])
    with casstore.use("miss2", mode="replay", cassette_dir=cassette_dir), pytest.raises(CassetteMiss) as info:
        ant.messages.create(model="claude-next", max_tokens=10, messages=[{"role": "user", "content": "hello there"}])
    text = str(info.value)
    assert 'model: "claude-test" → "claude-next"' in text
    assert 'messages[0].content: "hello" → "hello there"' in text


def test_secrets_never_reach_the_cassette_and_replay_still_matches(
    llm_server: LLMServer, fake_key: str, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    oai, ant = _clients(llm_server, fake_key)
    prompt = f"my key is {fake_key}, please rotate it"
    with casstore.use("secrets", mode="record", cassette_dir=cassette_dir) as rec:
        first = oai.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": prompt}])
        second = ant.messages.create(model="claude-test", max_tokens=8, messages=[{"role": "user", "content": prompt}])
        echoed = requests.get(llm_server.url + "/echo", headers={"x-api-key": fake_key}, timeout=5)
    assert rec.written
    # the live server did receive the key, so the redaction below is doing real work
    sent = [{k.lower(): v for k, v in headers.items()} for _, _, headers, _ in llm_server.seen]
    assert sum(fake_key in h.get("authorization", "") for h in sent) == 2
    assert any(fake_key == h.get("x-api-key") for h in sent)
    assert fake_key in first.choices[0].message.content  # the server echoed the prompt back
    text = (cassette_dir / "secrets.json").read_text()
    assert fake_key not in text
    assert fake_key[:20] not in text
    data = json.loads(text)
    assert data["redaction"]["rules"] and sum(data["redaction"]["hits"].values()) >= 5
    headers = data["entries"][0]["request"]["headers"]
    assert "REDACTED" in headers["authorization"] and "REDACTED" in data["entries"][2]["request"]["headers"]["x-api-key"]
    assert "x-stainless-package-version" not in headers and "host" not in headers  # SDK telemetry is not kept

    llm_server.stop()
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with casstore.use("secrets", mode="replay", cassette_dir=cassette_dir) as rep:
        again = oai.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": prompt}])
        again2 = ant.messages.create(model="claude-test", max_tokens=8, messages=[{"role": "user", "content": prompt}])
        echoed2 = requests.get(llm_server.url + "/echo", headers={"x-api-key": fake_key}, timeout=5)
    assert rep.served == 3
    assert again.id == first.id and again2.id == second.id
    assert echoed2.status_code == echoed.status_code == 200


def test_offline_blocks_live_calls_in_every_mode(
    llm_server: LLMServer, fake_key: str, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    oai, _ = _clients(llm_server, fake_key)
    for mode in ("live", "record", "auto", "record-new", "refresh", "drift"):
        with casstore.use(f"offline-{mode}", mode=mode, cassette_dir=cassette_dir):
            with pytest.raises(LiveCallBlocked):
                oai.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": mode}])
            with pytest.raises(LiveCallBlocked):
                requests.get(llm_server.url + "/echo", timeout=5)
    with casstore.use("offline-replay", mode="replay", cassette_dir=cassette_dir), pytest.raises(CassetteMiss):
        oai.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}])
    assert llm_server.count == 0


def test_async_sdk_clients_record_and_replay(llm_server: LLMServer, fake_key: str, cassette_dir: Path) -> None:
    async def run() -> list[Any]:
        oai = openai.AsyncOpenAI(base_url=llm_server.url + "/v1", api_key=fake_key, max_retries=0)
        ant = anthropic.AsyncAnthropic(base_url=llm_server.url, api_key=fake_key, max_retries=0)
        chat = await oai.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "async hi"}])
        stream = await oai.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "async stream"}], stream=True
        )
        chunks = [c.model_dump() async for c in stream]
        async with ant.messages.stream(
            model="claude-test", max_tokens=32, messages=[{"role": "user", "content": "async anthropic"}]
        ) as st:
            text = "".join([t async for t in st.text_stream])
        emb = await oai.embeddings.create(model="emb-test", input=["a", "b"])
        resp = await oai.responses.create(model="gpt-test", input="responses api")
        return [chat.model_dump(), chunks, text, emb.model_dump(), resp.output_text]

    async def recorded() -> list[Any]:
        async with casstore.use("async_sdk", mode="record", cassette_dir=cassette_dir):
            return await run()

    first = asyncio.run(recorded())
    llm_server.stop()

    @casstore.use("async_sdk", mode="replay", cassette_dir=cassette_dir)
    async def replayed() -> list[Any]:
        return await run()

    assert asyncio.run(replayed()) == first
    assert first[4].startswith("resp#")
