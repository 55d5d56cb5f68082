"""Threads and executor tasks started inside a ``use()`` block belong to it: recorded into
it, replayed from it, blocked by offline mode; and only while the block lasts.

Real threads, real ``ThreadPoolExecutor``s and asyncio's default executor, real clients,
a stub provider on 127.0.0.1 that counts what reaches it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import requests

import casstore
from casstore.errors import CassetteMiss, LiveCallBlocked
from tests.helpers.llm_server import LLMServer


def _fan_out(url: str, key: str) -> list[Any]:
    """What an agent framework does: worker threads, a pool, map, and asyncio's executor."""
    results: dict[str, Any] = {}

    def worker() -> None:
        results["thread"] = requests.get(url + "/echo?via=thread", timeout=5).json()["query"]

    t = threading.Thread(target=worker)
    t.start()
    t.join(10)
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [pool.submit(lambda i=i: httpx.get(url + f"/echo?via=pool&i={i}").json()["query"]) for i in range(3)]
        results["pool"] = [f.result(10) for f in futures]
        results["map"] = list(pool.map(lambda i: requests.post(url + "/echo", json={"map": i}, timeout=5).json()["body"],
                                       range(2)))
    client = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)

    async def in_executor() -> Any:
        loop = asyncio.get_running_loop()
        chat = await loop.run_in_executor(None, lambda: client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "from the default executor"}]))
        return chat.choices[0].message.content

    results["executor"] = asyncio.run(in_executor())
    return [results[k] for k in ("thread", "pool", "map", "executor")]


def test_threads_and_pools_record_into_and_replay_from_their_block(
    llm_server: LLMServer, fake_key: str, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with casstore.use("threads/fanout", mode="record", cassette_dir=cassette_dir) as rec:
        recorded = _fan_out(llm_server.url, fake_key)
    assert rec.live == 7 and llm_server.count == 7
    entries = json.loads((cassette_dir / "threads" / "fanout.json").read_text())["entries"]
    assert len(entries) == 7 and sum(e["kind"] == "llm" for e in entries) == 1

    monkeypatch.setenv("CASSTORE_OFFLINE", "1")  # the stub still runs: it must see nothing more
    with casstore.use("threads/fanout", mode="replay", cassette_dir=cassette_dir) as rep:
        assert _fan_out(llm_server.url, fake_key) == recorded
    assert rep.served == 7 and rep.live == 0 and llm_server.count == 7


def test_offline_blocks_a_worker_threads_live_call(llm_server: LLMServer, cassette_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            requests.get(llm_server.url + "/echo?via=thread", timeout=5)
        except BaseException as exc:  # noqa: BLE001 - inspected below
            errors.append(exc)

    with casstore.use("threads/offline", mode="record", cassette_dir=cassette_dir):
        t = threading.Thread(target=worker)
        t.start()
        t.join(10)
        with ThreadPoolExecutor(2) as pool:
            with pytest.raises(LiveCallBlocked):
                pool.submit(httpx.get, llm_server.url + "/echo?via=pool").result(10)
    assert len(errors) == 1 and isinstance(errors[0], LiveCallBlocked)
    assert llm_server.count == 0


def test_a_replay_miss_in_a_worker_is_a_miss(llm_server: LLMServer, cassette_dir: Path) -> None:
    with casstore.use("threads/miss", mode="record", cassette_dir=cassette_dir):
        pass
    with casstore.use("threads/miss", mode="replay", cassette_dir=cassette_dir), ThreadPoolExecutor(1) as pool:
        with pytest.raises(CassetteMiss):
            pool.submit(requests.get, llm_server.url + "/echo?via=pool", timeout=5).result(10)
    assert llm_server.count == 0


def test_a_pool_outlives_the_block_but_its_later_tasks_do_not_belong_to_it(
    llm_server: LLMServer, cassette_dir: Path
) -> None:
    def get(tag: str) -> int:
        return requests.get(llm_server.url + f"/echo?tag={tag}", timeout=5).status_code

    with ThreadPoolExecutor(1) as pool:  # created before the block, one worker reused throughout
        assert pool.submit(get, "before").result(10) == 200
        with casstore.use("threads/pool", mode="record", cassette_dir=cassette_dir) as rec:
            assert pool.submit(get, "inside").result(10) == 200
        assert pool.submit(get, "after").result(10) == 200
        # the same worker then serves another block's task: it goes to that block
        with casstore.use("threads/other", mode="record", cassette_dir=cassette_dir) as other:
            assert pool.submit(get, "other").result(10) == 200
    entries = json.loads((cassette_dir / "threads" / "pool.json").read_text())["entries"]
    assert [e["target"].rsplit("=", 1)[1] for e in entries] == ["inside"]
    assert rec.live == 1 and other.live == 1
    assert llm_server.count >= 4


def test_a_thread_still_running_after_its_block_is_outside_every_block(
    llm_server: LLMServer, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go = threading.Event()
    outcome: list[Any] = []

    def late() -> None:
        go.wait(10)
        try:
            outcome.append(requests.get(llm_server.url + "/echo?t=late", timeout=5).status_code)
        except BaseException as exc:  # noqa: BLE001 - inspected below
            outcome.append(exc)

    with casstore.use("threads/outer", mode="record", cassette_dir=cassette_dir) as outer:
        with casstore.use("threads/late", mode="record", cassette_dir=cassette_dir) as rec:
            t = threading.Thread(target=late)
            t.start()
        # its block is closed (the outer one still holds the interception): outside every block
        go.set()
        t.join(10)
    assert outcome == [200] and rec.live == 0 and outer.live == 0
    for name in ("late", "outer"):
        assert json.loads((cassette_dir / "threads" / f"{name}.json").read_text())["entries"] == []
    assert llm_server.count == 1


def test_threads_started_outside_blocks_are_untouched(llm_server: LLMServer, cassette_dir: Path) -> None:
    seen: list[Any] = []

    def probe() -> None:
        seen.append(casstore.replay.current_session())

    start_child = threading.Event()

    def unrelated() -> None:  # started before the block: not in it, nor are its children
        start_child.wait(10)
        child = threading.Thread(target=probe)
        child.start()
        child.join(10)

    bystander = threading.Thread(target=unrelated)
    bystander.start()
    with casstore.use("threads/probe", mode="live", cassette_dir=cassette_dir) as session:
        inside = threading.Thread(target=probe)
        inside.start()
        inside.join(10)
        start_child.set()
        bystander.join(10)
    assert seen == [session, None]


def test_a_thread_outliving_a_replay_block_is_neither_served_nor_recorded(
    llm_server: LLMServer, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[int] = []

    def lookup(order: int) -> dict[str, int]:
        ran.append(order)
        return {"order": order, "live": 1}

    url = llm_server.url + "/echo?t=late"
    with casstore.use("threads/closed", mode="record", cassette_dir=cassette_dir):
        assert requests.get(url, timeout=5).status_code == 200
        assert casstore.tool("lookup", lookup)(7) == {"order": 7, "live": 1}
    assert llm_server.count == 1 and ran == [7]

    go = threading.Event()
    outcome: dict[str, Any] = {}

    def late() -> None:
        go.wait(10)
        outcome["session"] = casstore.replay.current_session()
        outcome["tool"] = casstore.tool("lookup", lookup)(7)  # outside every block: the function runs
        try:
            outcome["http"] = requests.get(url, timeout=5).status_code
        except BaseException as exc:  # noqa: BLE001 - inspected below
            outcome["http"] = exc

    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with casstore.guard():  # holds the interception, as the pytest plugin does offline
        with casstore.use("threads/closed", mode="replay", cassette_dir=cassette_dir) as rep:
            t = threading.Thread(target=late)
            t.start()
        go.set()  # the block has ended: its recording must not answer the thread
        t.join(10)
    assert outcome["session"] is None
    assert outcome["tool"] == {"order": 7, "live": 1} and ran == [7, 7]
    assert isinstance(outcome["http"], LiveCallBlocked)
    assert rep.served == 0 and llm_server.count == 1

    monkeypatch.delenv("CASSTORE_OFFLINE")
    go.clear()
    with casstore.guard():
        with casstore.use("threads/closed2", mode="record", cassette_dir=cassette_dir) as rec:
            t = threading.Thread(target=late)
            t.start()
        go.set()
        t.join(10)
    assert outcome["http"] == 200 and rec.live == 0 and llm_server.count == 2
    assert json.loads((cassette_dir / "threads" / "closed2.json").read_text())["entries"] == []
