"""Replay modes, their resolution order, fallback, drift, tool calls and cassette resolution."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import requests

import casstore
from casstore.errors import CassetteMiss, IntegrityError, LiveCallBlocked, UsageError
from casstore.replay import api as replay
from casstore.replay.api import resolve_mode
from casstore.replay.codec import ReplayedError
from casstore.replay.drift import DriftWarning
from tests.helpers.calls import requests_chat
from tests.helpers.llm_server import LLMServer


def _entries(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text())["entries"]


# -- resolution ----------------------------------------------------------------------


def test_mode_resolution_order(replay_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_mode() == ("auto", "default")
    monkeypatch.setenv("CI", "true")
    assert resolve_mode() == ("replay", "default (CI is set)")
    monkeypatch.setenv("CI", "0")
    assert resolve_mode()[0] == "auto"
    assert resolve_mode(None, "record") == ("record", "config")
    assert resolve_mode("refresh", "record") == ("refresh", "use(mode=...)")
    monkeypatch.setenv("CASSTORE_MODE", "drift")
    assert resolve_mode("refresh", "record") == ("drift", "CASSTORE_MODE")
    replay.set_forced_mode("live")
    assert resolve_mode("refresh", "record") == ("live", "--casstore-mode")
    replay.set_forced_mode(None)
    monkeypatch.setenv("CASSTORE_MODE", "bogus")
    with pytest.raises(UsageError, match="CASSTORE_MODE: unknown casstore mode 'bogus'"):
        resolve_mode()
    with pytest.raises(UsageError):
        casstore.use("x", mode="replay-ish")
    with pytest.raises(UsageError):
        casstore.use("../escape")
    with pytest.raises(UsageError):
        casstore.use("x", fallback="record")


def test_config_mode_applies_below_use_mode(
    tmp_path: Path, replay_env: None, monkeypatch: pytest.MonkeyPatch, llm_server: LLMServer
) -> None:
    (tmp_path / "casstore.toml").write_text('mode = "record"\ncassette_dir = "recs"\n')
    monkeypatch.chdir(tmp_path)
    with casstore.use("cfg") as s:
        requests_chat(llm_server, "from config")
    assert (s.mode, s.mode_source) == ("record", "config")
    assert s.path == tmp_path / "recs" / "cfg.json" and s.path.is_file()
    with casstore.use("cfg", mode="replay") as s2:
        requests_chat(llm_server, "from config")
    assert (s2.mode, s2.served) == ("replay", 1)
    monkeypatch.setenv("CI", "1")  # config still beats the CI default
    monkeypatch.setenv("CASSTORE_ALLOW_RECORD", "1")  # (and recording in CI needs the lift)
    with casstore.use("cfg2") as s3:
        pass
    assert s3.mode == "record"


# -- the modes ---------------------------------------------------------------------------


def test_replay_without_a_cassette_explains_how_to_record(cassette_dir: Path, llm_server: LLMServer) -> None:
    with casstore.use("never_recorded", mode="replay", cassette_dir=cassette_dir) as s:
        with pytest.raises(CassetteMiss, match="does not exist yet") as info:
            requests_chat(llm_server, "hello")
    assert "to record it: `CASSTORE_MODE=record pytest 'tests/replay/test_replay_modes.py::" in str(info.value)
    assert llm_server.count == 0 and not s.written
    assert not (cassette_dir / "never_recorded.json").exists()


def test_identical_calls_are_served_in_recorded_order(cassette_dir: Path, llm_server: LLMServer) -> None:
    with casstore.use("repeat", mode="record", cassette_dir=cassette_dir):
        live = [requests_chat(llm_server, "same question") for _ in range(3)]
    assert len({r["id"] for r in live}) == 3  # the server answers differently each time
    entries = _entries(cassette_dir / "repeat.json")
    assert len({e["identity"] for e in entries}) == 1 and [e["seq"] for e in entries] == [0, 1, 2]
    with casstore.use("repeat", mode="replay", cassette_dir=cassette_dir):
        assert [requests_chat(llm_server, "same question") for _ in range(3)] == live
        with pytest.raises(CassetteMiss, match=r"recorded 3 time\(s\)"):
            requests_chat(llm_server, "same question")


def test_record_new_replays_hits_and_records_misses(cassette_dir: Path, llm_server: LLMServer) -> None:
    with casstore.use("grow", mode="record", cassette_dir=cassette_dir):
        first = requests_chat(llm_server, "one")
    with casstore.use("grow", mode="record-new", cassette_dir=cassette_dir) as s:
        assert requests_chat(llm_server, "one") == first  # served, not live
        second = requests_chat(llm_server, "two")
    assert (s.served, s.live, llm_server.count) == (1, 1, 2)
    entries = _entries(cassette_dir / "grow.json")
    assert [e["seq"] for e in entries] == [0, 1]
    with casstore.use("grow", mode="replay", cassette_dir=cassette_dir):
        assert requests_chat(llm_server, "one") == first and requests_chat(llm_server, "two") == second
    # nothing new: the file is not rewritten
    before = (cassette_dir / "grow.json").read_bytes()
    with casstore.use("grow", mode="record-new", cassette_dir=cassette_dir) as s2:
        requests_chat(llm_server, "one")
    assert not s2.written and (cassette_dir / "grow.json").read_bytes() == before


def test_refresh_rerecords_exercised_entries_and_keeps_the_rest(cassette_dir: Path, llm_server: LLMServer) -> None:
    with casstore.use("fresh", mode="record", cassette_dir=cassette_dir):
        old_a = requests_chat(llm_server, "a")
        old_b = requests_chat(llm_server, "b")
    with casstore.use("fresh", mode="refresh", cassette_dir=cassette_dir) as s:
        new_a = requests_chat(llm_server, "a")
    assert s.live == 1 and new_a != old_a
    with casstore.use("fresh", mode="replay", cassette_dir=cassette_dir):
        assert requests_chat(llm_server, "a") == new_a
        assert requests_chat(llm_server, "b") == old_b
    assert len(_entries(cassette_dir / "fresh.json")) == 2


def test_live_mode_touches_no_cassette(cassette_dir: Path, llm_server: LLMServer) -> None:
    with casstore.use("live_only", mode="live", cassette_dir=cassette_dir) as s:
        requests_chat(llm_server, "x")
    assert s.live == 1 and not s.written and not list(cassette_dir.iterdir())


def test_live_fallback_answers_provider_failures_from_the_cassette(cassette_dir: Path, llm_server: LLMServer) -> None:
    with casstore.use("fb", mode="record", cassette_dir=cassette_dir):
        recorded = requests_chat(llm_server, "resilient")
        requests.get(llm_server.url + "/status/503", timeout=5)  # recorded as-is
    # 5xx from the provider: served from the cassette
    with casstore.use("fb", mode="live", fallback="replay", cassette_dir=cassette_dir) as s:
        fresh = requests_chat(llm_server, "resilient")
        assert fresh != recorded  # a healthy provider answers live
    assert s.served == 0 and s.live == 1
    llm_server.stop()
    with casstore.use("fb", mode="live", fallback="replay", cassette_dir=cassette_dir) as s2:
        assert requests_chat(llm_server, "resilient") == recorded  # connection refused: fallback
        with pytest.raises(requests.ConnectionError):
            requests_chat(llm_server, "never recorded")
    assert s2.served == 1
    with casstore.use("fb", mode="live", cassette_dir=cassette_dir), pytest.raises(requests.ConnectionError):
        requests_chat(llm_server, "resilient")  # no fallback asked for


def test_live_fallback_on_5xx_and_429(cassette_dir: Path, llm_server: LLMServer) -> None:
    path = cassette_dir / "fb5.json"
    with casstore.use("fb5", mode="record", cassette_dir=cassette_dir):
        ok = requests.get(llm_server.url + "/echo?x=1", timeout=5).json()
    # rewrite the recording so the same request now hits a failing endpoint live
    data = json.loads(path.read_text())
    entry = data["entries"][0]
    for code in (429, 500, 503):
        url = llm_server.url + f"/status/{code}"
        from casstore.model.identity import http_identity

        entry["identity"] = http_identity("GET", url, {"accept": "*/*"}, None).identity
        path.write_text(json.dumps(data))
        with casstore.use("fb5", mode="live", fallback="replay", cassette_dir=cassette_dir):
            r = requests.get(url, timeout=5, headers={"accept": "*/*"})
        assert r.status_code == 200 and r.json() == ok, code
    with casstore.use("fb5", mode="live", cassette_dir=cassette_dir):
        assert requests.get(llm_server.url + "/status/500", timeout=5).status_code == 500


def test_drift_reports_differences_and_writes_nothing(cassette_dir: Path, llm_server: LLMServer) -> None:
    with casstore.use("drifty", mode="record", cassette_dir=cassette_dir):
        requests_chat(llm_server, "stable?")
        requests_chat(llm_server, "gone later")
    before = (cassette_dir / "drifty.json").read_bytes()
    with pytest.warns(DriftWarning) as warned:
        with casstore.use("drifty", mode="drift", cassette_dir=cassette_dir) as s:
            live = requests_chat(llm_server, "stable?")
            requests_chat(llm_server, "brand new")
    assert live["choices"][0]["message"]["content"].startswith("chat#3")  # a live answer
    assert (cassette_dir / "drifty.json").read_bytes() == before
    by_status = {item.status: item for item in s.drift}
    assert set(by_status) == {"changed", "new", "missing"}
    changed = by_status["changed"]
    assert any(d.startswith("body.choices[0].message.content:") and "chat#1" in d and "chat#3" in d for d in changed.differences)
    assert not any(d.startswith("body.id") or d.startswith("body.created") for d in changed.differences)
    assert "drifty" in str(warned[0].message) and "missing" in s.drift_report()


def test_an_exception_in_the_block_writes_nothing(cassette_dir: Path, llm_server: LLMServer) -> None:
    with pytest.raises(RuntimeError), casstore.use("boom", mode="record", cassette_dir=cassette_dir):
        requests_chat(llm_server, "x")
        raise RuntimeError("test failed")
    assert not (cassette_dir / "boom.json").exists()


def test_decorator_on_sync_and_async_functions(cassette_dir: Path, llm_server: LLMServer) -> None:
    @casstore.use("deco", mode="record-new", cassette_dir=cassette_dir)
    def sync_fn(q: str) -> dict[str, Any]:
        return requests_chat(llm_server, q)

    @casstore.use("deco_async", mode="record-new", cassette_dir=cassette_dir)
    async def async_fn(q: str) -> dict[str, Any]:
        import httpx

        async with httpx.AsyncClient() as c:
            return (await c.post(llm_server.url + "/echo", json={"q": q})).json()

    a = sync_fn("hello")
    b = asyncio.run(async_fn("hello"))
    count = llm_server.count
    assert sync_fn("hello") == a and asyncio.run(async_fn("hello")) == b
    assert llm_server.count == count
    assert sync_fn.__name__ == "sync_fn"


# -- tools ---------------------------------------------------------------------------------


def test_tool_calls_record_and_replay_without_running(cassette_dir: Path) -> None:
    calls: list[Any] = []

    def lookup_order(order_id: int, *, verbose: bool = False) -> dict[str, Any]:
        calls.append(order_id)
        if order_id < 0:
            raise KeyError(f"no order {order_id}")
        return {"id": order_id, "status": "shipped", "items": (1, 2)}

    @casstore.tool("refund")
    def refund(order_id: int) -> str:
        calls.append(("refund", order_id))
        return f"refunded {order_id}"

    @casstore.tool
    async def notify(user: str) -> bool:
        calls.append(("notify", user))
        return True

    def run() -> list[Any]:
        tool = casstore.tool("lookup_order", lookup_order)
        out: list[Any] = [tool(7, verbose=True), tool(order_id=8), refund(7), asyncio.run(notify("ann"))]
        with pytest.raises(KeyError, match="no order -1"):
            tool(-1)
        return out

    with casstore.use("tools", mode="record", cassette_dir=cassette_dir):
        recorded = run()
    assert len(calls) == 5
    entries = _entries(cassette_dir / "tools.json")
    assert [e["kind"] for e in entries] == ["tool"] * 5
    assert [e["target"] for e in entries][:3] == ["lookup_order", "lookup_order", "refund"]
    assert entries[4]["response"]["error"]["type"] == "builtins.KeyError"
    calls.clear()
    with casstore.use("tools", mode="replay", cassette_dir=cassette_dir):
        replayed = run()
        with pytest.raises(CassetteMiss, match="lookup_order"):
            casstore.tool("lookup_order", lookup_order)(9)
    assert calls == []  # nothing ran
    # replay returns the JSON form: the tuple comes back as a list
    assert recorded[0]["items"] == (1, 2) and replayed[0]["items"] == [1, 2]
    recorded[1]["items"] = [1, 2]
    assert replayed[1:] == recorded[1:] and replayed[1]["items"] == [1, 2]
    # outside any use() block the function simply runs
    assert refund(3) == "refunded 3" and calls == [("refund", 3)]


def test_tool_exception_that_cannot_be_rebuilt(cassette_dir: Path) -> None:
    class LocalError(Exception):
        def __init__(self, a: int, b: int) -> None:
            super().__init__(a, b)

    def bad() -> None:
        raise LocalError(1, 2)

    with casstore.use("toolerr", mode="record", cassette_dir=cassette_dir), pytest.raises(LocalError):
        casstore.tool("bad", bad)()
    # the block raised, so nothing was written; record again catching the error inside
    with casstore.use("toolerr", mode="record", cassette_dir=cassette_dir):
        with pytest.raises(LocalError):
            casstore.tool("bad", bad)()
    with casstore.use("toolerr", mode="replay", cassette_dir=cassette_dir):
        with pytest.raises((LocalError, ReplayedError)):
            casstore.tool("bad", bad)()


def test_http_inside_a_tool_is_not_recorded_but_offline_still_applies(
    cassette_dir: Path, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fetch(q: str) -> dict[str, Any]:
        return requests.get(llm_server.url + "/echo", params={"q": q}, timeout=5).json()

    with casstore.use("tool_http", mode="record", cassette_dir=cassette_dir):
        live = casstore.tool("fetch", fetch)("x")
    entries = _entries(cassette_dir / "tool_http.json")
    assert [e["kind"] for e in entries] == ["tool"]
    llm_server.stop()
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with casstore.use("tool_http", mode="replay", cassette_dir=cassette_dir):
        assert casstore.tool("fetch", fetch)("x") == live
    with casstore.use("tool_http2", mode="record", cassette_dir=cassette_dir), pytest.raises(LiveCallBlocked):
        casstore.tool("fetch", fetch)("y")


# -- resolution by name: lock first, then the working copy --------------------------------------


def test_use_resolves_pinned_cassettes_through_the_lock(
    repo: Path, casstore: Any, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch, replay_env: None
) -> None:
    import casstore as lib

    monkeypatch.chdir(repo)
    with lib.use("pinned/flow", mode="record") as s:
        recorded = requests_chat(llm_server, "pin me")
    working = repo / "tests" / "cassettes" / "pinned" / "flow.json"
    assert s.path == working and working.is_file()
    r = casstore("add", str(working), cwd=repo)
    assert r.exit_code == 0, r.stderr
    # the working copy goes away: replay still finds the pinned, verified object
    shutil.rmtree(repo / "tests" / "cassettes")
    llm_server.stop()
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with lib.use("pinned/flow", mode="replay") as s2:
        assert requests_chat(llm_server, "pin me") == recorded
    assert s2.served == 1
    # a pinned object that fails verification is an error, never a silent re-record
    assert casstore("push", cwd=repo).exit_code == 0
    objects = [p for p in (repo / ".casstore" / "store" / "objects").rglob("*") if p.is_file()]
    cache = [p for p in Path(str(lib_cache_dir())).rglob("*") if p.is_file() and "objects" in p.parts]
    for p in objects + cache:
        p.chmod(0o644)
        p.write_bytes(b"tampered")
    assert objects and cache
    with pytest.raises(IntegrityError):
        with lib.use("pinned/flow", mode="auto"):
            pass
    assert not working.exists()


def lib_cache_dir() -> str:
    import os

    return os.environ["CASSTORE_CACHE_DIR"]
