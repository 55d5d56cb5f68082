"""aiohttp client sessions through casstore: whole bodies and streaming reads."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import casstore
from tests.helpers.llm_server import LLMServer
from tests.helpers.replay import record_then_replay


def _chat(text: str, stream: bool = False) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "stream": stream, "messages": [{"role": "user", "content": text}]}


def test_bodies_record_and_replay_offline(cassette_dir: Path, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    async def calls() -> list[Any]:
        out: list[Any] = []
        async with aiohttp.ClientSession() as http:
            async with http.post(llm_server.url + "/echo?a=1", json={"k": 1}) as r:
                out.append((r.status, r.headers["content-type"], await r.json()))
            async with http.get(llm_server.url + "/text") as r:
                out.append(await r.text())
            async with http.get(llm_server.url + "/bytes") as r:
                out.append(await r.read())
            async with http.get(llm_server.url + "/gzip") as r:
                out.append(await r.json())
            async with http.get(llm_server.url + "/status/503") as r:
                out.append((r.status, r.reason, await r.json()))
            r = await http.post(llm_server.url + "/v1/chat/completions", json=_chat("hi"))
            out.append((await r.json())["choices"][0]["message"]["content"])
            r.release()
            with pytest.raises(aiohttp.ClientResponseError) as err:
                async with http.get(llm_server.url + "/status/404", raise_for_status=True):
                    pass
            out.append(err.value.status)
        return out

    live, replayed = record_then_replay("aio", cassette_dir, monkeypatch, llm_server, lambda: asyncio.run(calls()))
    assert replayed == live
    assert live[0][2]["n"] == 1 and live[5].startswith("chat#6 gpt-4o-mini")


@pytest.mark.parametrize("reader", ["iter_any", "iter_chunks", "iter_chunked", "readline", "async_for", "read"])
def test_streams_replay_chunk_by_chunk(reader: str, cassette_dir: Path, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    async def calls() -> list[bytes]:
        async with aiohttp.ClientSession() as http:
            async with http.post(llm_server.url + "/v1/chat/completions", json=_chat("stream it", True)) as r:
                content = r.content
                if reader == "iter_any":
                    return [c async for c in content.iter_any()]
                if reader == "iter_chunks":
                    return [c async for c, _ in content.iter_chunks()]
                if reader == "iter_chunked":
                    return [c async for c in content.iter_chunked(1 << 16)]
                if reader == "readline":
                    lines = []
                    while line := await content.readline():
                        lines.append(line)
                    return lines
                if reader == "async_for":
                    return [line async for line in content]
                return [await r.read()]

    live, replayed = record_then_replay(f"aio_{reader}", cassette_dir, monkeypatch, llm_server, lambda: asyncio.run(calls()))
    assert b"".join(replayed) == b"".join(live)
    chunks = json.loads((cassette_dir / f"aio_{reader}.json").read_text())["entries"][0]["response"]["chunks"]
    assert len(chunks) > 3
    if reader in ("iter_any", "iter_chunks", "iter_chunked"):
        assert [c.decode() for c in replayed] == chunks  # one read per recorded event
    if reader in ("readline", "async_for"):
        assert replayed == b"".join(live).splitlines(keepends=True)


def test_session_made_before_the_block_and_calls_outside(cassette_dir: Path, llm_server: LLMServer) -> None:
    async def main() -> list[int]:
        async with aiohttp.ClientSession() as http:
            async with http.get(llm_server.url + "/echo?where=outside") as r:
                before = (await r.json())["n"]
            async with casstore.use("aio_scope", mode="record", cassette_dir=cassette_dir):
                async with http.get(llm_server.url + "/echo?where=inside") as r:
                    inside = (await r.json())["n"]
            async with http.get(llm_server.url + "/echo?where=after") as r:
                after = (await r.json())["n"]
        return [before, inside, after]

    assert asyncio.run(main()) == [1, 2, 3]
    entries = json.loads((cassette_dir / "aio_scope.json").read_text())["entries"]
    assert [e["target"].rsplit("?", 1)[1] for e in entries] == ["where=inside"]
    assert not getattr(aiohttp.ClientSession.__dict__["_request"], "__casstore__", False)


def test_offline_and_miss(cassette_dir: Path, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    async def get() -> Any:
        async with aiohttp.ClientSession() as http:
            async with http.get(llm_server.url + "/echo") as r:
                return await r.json()

    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with casstore.use("aio_off", mode="record", cassette_dir=cassette_dir):
        with pytest.raises(casstore.LiveCallBlocked):
            asyncio.run(get())
    with casstore.use("aio_off", mode="replay", cassette_dir=cassette_dir):
        with pytest.raises(casstore.CassetteMiss):
            asyncio.run(get())
    assert llm_server.count == 0


def test_fallback_and_drift(cassette_dir: Path, llm_server: LLMServer) -> None:
    async def get(url: str) -> Any:
        async with aiohttp.ClientSession() as http:
            async with http.get(url) as r:
                return await r.json()

    with LLMServer() as gone:
        url = gone.url + "/echo?fb=1"
        with casstore.use("aio_fb", mode="record", cassette_dir=cassette_dir):
            recorded = asyncio.run(get(url))
    with casstore.use("aio_fb", mode="live", fallback="replay", cassette_dir=cassette_dir) as session:
        assert asyncio.run(get(url)) == recorded and session.served == 1

    with casstore.use("aio_drift", mode="record", cassette_dir=cassette_dir):
        asyncio.run(get(llm_server.url + "/echo?d=1"))
    with pytest.warns(casstore.DriftWarning), casstore.use("aio_drift", mode="drift", cassette_dir=cassette_dir) as session:
        asyncio.run(get(llm_server.url + "/echo?d=1"))
    assert [item.status for item in session.drift] == ["changed"]


def test_an_unsupported_aiohttp_is_refused_at_use_entry(cassette_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from casstore.replay import aiohttp as adapter_aiohttp
    from casstore.replay import install

    monkeypatch.setattr(adapter_aiohttp, "_CHECKED", False)
    monkeypatch.delattr(aiohttp.streams.StreamReader, "_wait")
    with pytest.raises(casstore.ClientNotSupported, match=r"aiohttp .* StreamReader\._wait.*3\.12"):
        with casstore.use("aio_old", mode="replay", cassette_dir=cassette_dir):
            pass  # pragma: no cover
    assert not install.installed()
    assert not getattr(aiohttp.ClientSession.__dict__["_request"], "__casstore__", False)


def test_a_websocket_goes_live_where_a_block_may_and_is_refused_in_strict_replay_and_offline(
        cassette_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Websockets are not recorded: record/auto pass them through live; strict replay (asked
    for, or CI's default) and offline refuse the handshake, naming the URL; the server's
    handshake count proves the refused ones never reached it."""
    from aiohttp import web

    monkeypatch.delenv("CASSTORE_MODE", raising=False)
    monkeypatch.delenv("CASSTORE_OFFLINE", raising=False)
    monkeypatch.delenv("CASSTORE_ALLOWED_HOSTS", raising=False)
    handshakes: list[int] = []

    async def main() -> list[str]:
        async def echo(request: web.Request) -> web.WebSocketResponse:
            handshakes.append(1)
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            async for msg in ws:
                await ws.send_str("echo " + msg.data)
            return ws

        app = web.Application()
        app.router.add_get("/ws", echo)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        url = f"http://127.0.0.1:{port}/ws"
        out = []

        async def talk(http: aiohttp.ClientSession) -> str:
            async with http.ws_connect(url) as ws:
                await ws.send_str("hi")
                return str((await ws.receive()).data)

        async def refused(http: aiohttp.ClientSession, **use: Any) -> str:
            before = len(handshakes)
            with casstore.use("aio_ws", cassette_dir=cassette_dir, **use):
                with pytest.raises(casstore.LiveCallBlocked) as err:
                    await http.ws_connect(url)
            assert len(handshakes) == before  # the server never saw the handshake
            return str(err.value)

        try:
            async with aiohttp.ClientSession() as http:
                for mode in ("record", "auto"):
                    with casstore.use("aio_ws", mode=mode, cassette_dir=cassette_dir) as session:
                        out.append(await talk(http))
                    assert session.live == 0  # not recorded
                message = await refused(http, mode="replay")
                assert "websocket " + url in message and "not recorded" in message and "strict replay" in message
                monkeypatch.setenv("CI", "true")  # CI's default mode is strict replay
                assert "mode replay from default" in await refused(http)
                monkeypatch.setenv("CASSTORE_ALLOWED_HOSTS", f"127.0.0.1:{port}")
                with casstore.use("aio_ws", cassette_dir=cassette_dir):
                    out.append(await talk(http))  # an allowed host may be reached
                monkeypatch.delenv("CASSTORE_ALLOWED_HOSTS")
                monkeypatch.delenv("CI")
                monkeypatch.setenv("CASSTORE_OFFLINE", "1")
                assert "CASSTORE_OFFLINE=1" in await refused(http, mode="record")
                out.append("blocked")
        finally:
            await runner.cleanup()
        return out

    assert asyncio.run(main()) == ["echo hi", "echo hi", "echo hi", "blocked"]
    assert len(handshakes) == 3
