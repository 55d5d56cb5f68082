"""Interception details: scoping, concurrency, byte-identical bodies, streams, the transport."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests

import casstore
from casstore.replay import install
from tests.helpers.llm_server import LLMServer


def _originals() -> tuple[Any, Any, Any]:
    import httpx2

    return (
        httpx.HTTPTransport.__dict__["handle_request"],
        httpx2.AsyncHTTPTransport.__dict__["handle_async_request"],
        requests.adapters.HTTPAdapter.__dict__["send"],
    )


def test_installer_is_scoped_and_reference_counted(cassette_dir: Path) -> None:
    before = _originals()
    assert not any(getattr(f, "__casstore__", False) for f in before)  # never patched at import
    with casstore.use("a", mode="live", cassette_dir=cassette_dir):
        during = _originals()
        assert all(getattr(f, "__casstore__", False) for f in during)
        with casstore.use("b", mode="live", cassette_dir=cassette_dir):
            assert _originals() == during
        assert _originals() == during and install.installed()  # still one block open
    assert _originals() == before and not install.installed()


def test_calls_outside_use_pass_through_while_another_thread_records(cassette_dir: Path, llm_server: LLMServer) -> None:
    inside = threading.Event()
    done = threading.Event()

    def recorder() -> None:
        with casstore.use("thread_rec", mode="record", cassette_dir=cassette_dir):
            requests.get(llm_server.url + "/echo?who=recorder", timeout=5)
            inside.set()
            done.wait(5)

    t = threading.Thread(target=recorder)
    t.start()
    assert inside.wait(5)
    assert install.installed()
    outside = requests.get(llm_server.url + "/echo?who=outside", timeout=5)  # not in any use()
    with httpx.Client() as c:
        c.get(llm_server.url + "/echo?who=outside-httpx")
    done.set()
    t.join(5)
    assert outside.status_code == 200
    entries = json.loads((cassette_dir / "thread_rec.json").read_text())["entries"]
    assert [e["target"].split("?")[1] for e in entries] == ["who=recorder"]


def test_concurrent_use_blocks_in_threads_never_capture_each_other(cassette_dir: Path, llm_server: LLMServer) -> None:
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            with casstore.use(f"t{i}", mode="record", cassette_dir=cassette_dir):
                barrier.wait(5)
                for j in range(5):
                    requests.post(llm_server.url + "/echo", json={"worker": i, "j": j}, timeout=5)
                    with httpx.Client() as c:
                        c.get(llm_server.url + f"/echo?worker={i}&j={j}")
                barrier.wait(5)
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not errors
    for i in range(4):
        entries = json.loads((cassette_dir / f"t{i}.json").read_text())["entries"]
        assert len(entries) == 10
        for e in entries:
            body = e["request"]["body"]
            assert (body or {}).get("worker", i) == i
            assert f"worker={i}" in e["target"] or body["worker"] == i


def test_concurrent_asyncio_tasks_each_see_their_own_cassette(cassette_dir: Path, llm_server: LLMServer) -> None:
    async def task(i: int) -> list[Any]:
        async with casstore.use(f"task{i}", mode="record", cassette_dir=cassette_dir):
            out = []
            async with httpx.AsyncClient() as c:
                for j in range(3):
                    out.append((await c.get(llm_server.url + f"/echo?task={i}&j={j}")).json())
                    await asyncio.sleep(0)
            return out

    async def main() -> list[list[Any]]:
        return await asyncio.gather(*(task(i) for i in range(5)))

    results = asyncio.run(main())
    for i in range(5):
        entries = json.loads((cassette_dir / f"task{i}.json").read_text())["entries"]
        assert [e["target"].rsplit("?", 1)[1] for e in entries] == [f"j={j}&task={i}" for j in range(3)]
    llm_server.stop()

    async def replay_all() -> list[list[Any]]:
        async def one(i: int) -> list[Any]:
            async with casstore.use(f"task{i}", mode="replay", cassette_dir=cassette_dir):
                async with httpx.AsyncClient() as c:
                    return [(await c.get(llm_server.url + f"/echo?task={i}&j={j}")).json() for j in range(3)]

        return await asyncio.gather(*(one(i) for i in range(5)))

    assert asyncio.run(replay_all()) == results


def test_bodies_replay_byte_for_byte(cassette_dir: Path, llm_server: LLMServer) -> None:
    def run() -> list[tuple[int, dict[str, str], bytes]]:
        out = []
        with httpx.Client() as c:
            for method, path, kw in (
                ("POST", "/text", {"content": "ünïcode  body \n"}),
                ("POST", "/bytes", {"content": bytes(range(256))}),
                ("GET", "/gzip?x=1", {}),
                ("POST", "/echo", {"json": {"b": 1, "a": [1.5, None]}}),
                ("POST", "/v1/chat/completions", {"json": {"model": "m", "messages": [{"role": "user", "content": "é"}]}}),
                ("GET", "/status/404", {}),
            ):
                r = c.request(method, llm_server.url + path, **kw)
                headers = {k: v for k, v in r.headers.items() if k in ("content-type", "x-request-id")}
                out.append((r.status_code, headers, r.content))
        r2 = requests.post(llm_server.url + "/bytes", data=b"\x00\xff", timeout=5)
        out.append((r2.status_code, {"content-type": r2.headers["content-type"]}, r2.content))
        r3 = requests.get(llm_server.url + "/gzip?via=requests", timeout=5)
        out.append((r3.status_code, {}, r3.content))
        return out

    with casstore.use("bytes", mode="record", cassette_dir=cassette_dir):
        live = run()
    data = json.loads((cassette_dir / "bytes.json").read_text())
    responses = [e["response"] for e in data["entries"]]
    assert responses[0]["body"].startswith("plain #1: ünïcode")  # text stored as text
    assert set(responses[1]["body"]) == {"base64"}  # bytes stored as base64
    assert isinstance(responses[2]["body"], dict) and "content-encoding" not in responses[2]["headers"]  # decoded
    assert isinstance(responses[3]["body"], dict)  # sorted compact JSON: stored parsed, re-serializes exactly
    assert "body_text" in responses[4]  # pretty, unsorted JSON: exact text kept
    assert responses[5]["status"] == 404
    llm_server.stop()
    with casstore.use("bytes", mode="replay", cassette_dir=cassette_dir):
        assert run() == live


def test_requests_streaming_sse(cassette_dir: Path, llm_server: LLMServer) -> None:
    def run() -> list[str]:
        with requests.post(
            llm_server.url + "/v1/chat/completions",
            json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "lines"}]},
            stream=True,
            timeout=5,
        ) as r:
            return [line.decode() for line in r.iter_lines() if line]

    with casstore.use("req_sse", mode="record", cassette_dir=cassette_dir):
        live = run()
    assert live[-1] == "data: [DONE]"
    entry = json.loads((cassette_dir / "req_sse.json").read_text())["entries"][0]
    assert entry["response"]["stream"] is True and len(entry["response"]["chunks"]) == len(live)
    llm_server.stop()
    with casstore.use("req_sse", mode="replay", cassette_dir=cassette_dir):
        assert run() == live


def test_unfinished_stream_is_recorded_with_what_arrived(cassette_dir: Path, llm_server: LLMServer) -> None:
    with casstore.use("partial", mode="record", cassette_dir=cassette_dir):
        c = httpx.Client()
        with c.stream(
            "POST",
            llm_server.url + "/v1/chat/completions",
            json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "abandon me"}]},
        ) as r:
            first = next(r.iter_lines())
        c.close()
    entry = json.loads((cassette_dir / "partial.json").read_text())["entries"][0]
    assert entry["response"]["stream"] is True and entry["response"]["chunks"]
    assert entry["response"]["chunks"][0].startswith(first)


def test_explicit_replay_transport(cassette_dir: Path, llm_server: LLMServer) -> None:
    from casstore.replay.httpx import AsyncReplayTransport, ReplayTransport  # the documented path

    with casstore.use("explicit", mode="record", cassette_dir=cassette_dir) as s:
        with httpx.Client(transport=ReplayTransport()) as c:
            a = c.get(llm_server.url + "/echo?t=1").json()

        async def go() -> Any:
            async with httpx.AsyncClient(transport=AsyncReplayTransport()) as ac:
                return (await ac.get(llm_server.url + "/echo?t=2")).json()

        b = asyncio.run(go())
    assert s.live == 2 and len(s.new_entries) == 2  # recorded once each, not twice
    llm_server.stop()
    with casstore.use("explicit", mode="replay", cassette_dir=cassette_dir):
        with httpx.Client(transport=ReplayTransport()) as c:
            assert c.get(llm_server.url + "/echo?t=1").json() == a
        assert asyncio.run(go()) == b


def test_worker_tasks_belong_to_the_block_with_or_without_a_copied_context(cassette_dir: Path, llm_server: LLMServer) -> None:
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    def get(q: str) -> int:
        return requests.get(llm_server.url + f"/echo?q={q}", timeout=5).status_code

    with casstore.use("pool", mode="record", cassette_dir=cassette_dir) as s, ThreadPoolExecutor(2) as pool:
        assert pool.submit(contextvars.copy_context().run, get, "bound").result() == 200
        assert pool.submit(get, "unbound").result() == 200  # submit() carries the block (threads.py)
    entries = json.loads((cassette_dir / "pool.json").read_text())["entries"]
    assert [e["target"].rsplit("=", 1)[1] for e in entries] == ["bound", "unbound"] and s.live == 2


def test_sdk_retries_never_hide_a_miss(cassette_dir: Path, llm_server: LLMServer, fake_key: str) -> None:
    import anthropic
    import openai

    attempts: list[str] = []  # an httpx request hook fires once per attempt the SDK makes

    def hooks() -> dict[str, Any]:
        return {"event_hooks": {"request": [lambda r: attempts.append(r.url.path)]}}

    # default retries (2 each): a miss must not be retried, nor waited for
    ant = anthropic.Anthropic(base_url=llm_server.url, api_key=fake_key,
                              http_client=anthropic.DefaultHttpxClient(**hooks()))
    oai = openai.OpenAI(base_url=llm_server.url + "/v1", api_key=fake_key,
                        http_client=openai.DefaultHttpxClient(**hooks()))
    assert ant.max_retries >= 1 and oai.max_retries >= 1
    with casstore.use("no_retry", mode="replay", cassette_dir=cassette_dir):
        with pytest.raises(casstore.CassetteMiss):
            ant.messages.create(model="c", max_tokens=5, messages=[{"role": "user", "content": "x"}])
        with pytest.raises(casstore.CassetteMiss):
            oai.chat.completions.create(model="g", messages=[{"role": "user", "content": "x"}])
    assert attempts == ["/v1/messages", "/v1/chat/completions"]  # one attempt each, no retry
    assert llm_server.count == 0


def test_requests_reads_the_proxy_environment_only_for_calls_that_can_go_live(
    cassette_dir: Path, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # would be a dead end for a live call
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")  # ...so the live calls skip it
    url = llm_server.url + "/v1/chat/completions"

    def merged() -> dict[str, Any]:
        return requests.Session().merge_environment_settings("http://example.invalid/x", {}, None, None, None)

    assert merged()["proxies"].get("http") == "http://127.0.0.1:9"  # requests' own behaviour
    body = {"model": "m", "messages": [{"role": "user", "content": "proxy env"}]}
    with casstore.use("proxy_env", mode="record", cassette_dir=cassette_dir):
        assert merged()["proxies"].get("http") == "http://127.0.0.1:9"  # can go live: unchanged
        recorded = requests.post(url, json=body, timeout=5).json()
    before = requests.Session.__dict__["merge_environment_settings"]
    with casstore.use("proxy_env", mode="replay", cassette_dir=cassette_dir):
        assert getattr(requests.Session.__dict__["merge_environment_settings"], "__casstore__", False)
        assert "http" not in merged()["proxies"]  # cannot go live: no environment lookup
        s = requests.Session()
        s.proxies = {"https": "http://set-by-the-test:1"}
        assert s.merge_environment_settings(url, {}, None, False, None) == {
            "proxies": {"https": "http://set-by-the-test:1"}, "stream": False, "verify": False, "cert": None}
        given = {"https": None, "http": "http://given:2"}  # the request's win; None drops a key
        got = s.merge_environment_settings(url, dict(given), None, None, None)["proxies"]
        assert list(got.items()) == list(requests.sessions.merge_setting(dict(given), s.proxies).items())
        assert got == {"http": "http://given:2"}
        assert requests.post(url, json=body, timeout=5).json() == recorded
    assert requests.Session.__dict__["merge_environment_settings"] is before  # restored


def test_a_replayed_requests_response_reads_as_the_live_one(cassette_dir: Path, llm_server: LLMServer) -> None:
    """A replayed call without ``stream=True`` hands requests its body as read already: what
    the test sees (headers, encoding, text, raw at its end, iter_content) is the live call's."""
    def run() -> list[object]:
        with requests.Session() as s:
            r = s.post(llm_server.url + "/v1/chat/completions?x=1", timeout=5,
                       json={"model": "m", "messages": [{"role": "user", "content": "é"}]})
            return [r.status_code, r.reason, sorted(r.headers.lower_items()), r.encoding, r.url, r.text, r.json(), r.raw.status,
                    r.raw.read(), b"".join(r.iter_content(7)) == r.content, r.connection is s.get_adapter(r.url)]

    with casstore.use("surface", mode="record", cassette_dir=cassette_dir):
        live = run()
    llm_server.stop()
    with casstore.use("surface", mode="replay", cassette_dir=cassette_dir) as session:
        assert run() == live
    assert session.served == 1 and live[8] == b"" and live[9] is True


def test_requests_helpers_give_requests_own_answers_inside_a_block(cassette_dir: Path) -> None:
    """Inside a block, requests' ``to_key_val_list`` and ``_encode_params`` answer requests' own
    mapping types without its runtime ``Protocol`` checks: the same answers (exceptions too),
    any other value handed to requests' own function; restored after the block."""
    from collections import OrderedDict

    from requests.models import RequestEncodingMixin
    from requests.structures import CaseInsensitiveDict

    own_kv = requests.utils.to_key_val_list  # the module that defines it is never patched
    own_encode = RequestEncodingMixin.__dict__["_encode_params"]

    class Mine(dict):  # type: ignore[type-arg]
        def items(self) -> Any:
            return [("mine", "1")]

    values: list[Any] = [{}, {"a": "1", "b": None}, OrderedDict(), OrderedDict([("z", "1"), ("a", ["x", "y"])]),
                         CaseInsensitiveDict(), CaseInsensitiveDict({"Accept": "x"}), Mine(a="2"), Mine(),
                         [("k", "v")], (("k", "v"),), None]
    queries: list[Any] = [*values, "a=1", b"raw"]
    expected_kv = [own_kv(v) for v in values]
    expected_query = [own_encode.__func__(v) for v in queries]
    with casstore.use("helpers", mode="live", cassette_dir=cassette_dir):
        for module in (requests.sessions, requests.models):
            assert getattr(module.to_key_val_list, "__casstore__", False)
            assert [module.to_key_val_list(v) for v in values] == expected_kv
            for bad in ("str", b"bytes", 3, True):
                with pytest.raises(ValueError) as theirs:
                    own_kv(bad)
                with pytest.raises(type(theirs.value)) as ours:
                    module.to_key_val_list(bad)
                assert ours.value.args == theirs.value.args  # requests' own error, whatever its words
        assert getattr(RequestEncodingMixin.__dict__["_encode_params"].__func__, "__casstore__", False)
        assert [requests.models.PreparedRequest._encode_params(v) for v in queries] == expected_query
    assert requests.sessions.to_key_val_list is own_kv and requests.models.to_key_val_list is own_kv
    assert RequestEncodingMixin.__dict__["_encode_params"] is own_encode


def test_a_replayed_requests_call_is_prepared_as_requests_prepares_it(cassette_dir: Path, llm_server: LLMServer) -> None:
    """The session's and the call's params, headers, auth and cookies merge as requests
    merges them outside any block: the request a replayed response carries is that one."""
    def session() -> requests.Session:
        s = requests.Session()
        s.params = {"api-version": "2024"}
        s.headers.update({"X-Team": "blue"})
        s.auth = ("user", "pass")
        s.cookies.set("sid", "abc")
        return s

    url = llm_server.url + "/v1/chat/completions"
    kwargs: dict[str, Any] = {"params": {"q": "1"}, "headers": {"X-Call": "7"}, "cookies": {"c": "2"},
                              "json": {"model": "m", "messages": [{"role": "user", "content": "merge"}]}}

    def shown(p: Any) -> tuple[Any, ...]:
        return p.method, p.url, sorted(p.headers.items()), p.body

    expected = shown(session().prepare_request(requests.Request("POST", url, **kwargs)))
    assert "api-version=2024" in expected[1] and "q=1" in expected[1]
    with casstore.use("merge", mode="record", cassette_dir=cassette_dir), session() as s:
        assert shown(s.post(url, timeout=5, **kwargs).request) == expected
    sent = llm_server.count
    with casstore.use("merge", mode="replay", cassette_dir=cassette_dir) as cassette, session() as s:
        replayed = s.post(url, timeout=5, **kwargs)
    assert shown(replayed.request) == expected
    assert cassette.served == 1 and llm_server.count == sent == 1
