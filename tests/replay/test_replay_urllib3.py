"""urllib3 through casstore: PoolManager and HTTPConnectionPool.urlopen, bodies and streams."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import urllib3

import casstore
from tests.helpers.llm_server import LLMServer
from tests.helpers.replay import record_then_replay


def _chat(stream: bool, text: str) -> bytes:
    return json.dumps({"model": "gpt-4o-mini", "stream": stream, "messages": [{"role": "user", "content": text}]}).encode()


def test_pool_manager_records_and_replays_offline(cassette_dir: Path, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    def run() -> list[Any]:
        pm = urllib3.PoolManager()
        out: list[Any] = []
        r = pm.request("POST", llm_server.url + "/echo?a=1", body=b'{"k": [1, 2]}', headers={"content-type": "application/json"})
        out.append((r.status, r.headers["content-type"], r.json()))
        r = pm.request("GET", llm_server.url + "/text")
        out.append((r.status, r.data))
        r = pm.request("GET", llm_server.url + "/bytes")
        out.append((r.status, r.data))
        r = pm.request("GET", llm_server.url + "/gzip")  # content-encoding: decoded as live
        out.append((r.status, r.json()))
        r = pm.request("GET", llm_server.url + "/gzip", preload_content=False)  # replay serves it decoded
        out.append(("streamed", json.loads(b"".join(r.stream(7)))))
        r = pm.request("POST", llm_server.url + "/v1/chat/completions", body=_chat(False, "hi"), headers={"content-type": "application/json"})
        out.append(r.json()["choices"][0]["message"]["content"])
        return out

    live, replayed = record_then_replay("u3", cassette_dir, monkeypatch, llm_server, run)
    assert replayed == live
    assert live[0][2]["n"] == 1 and live[-1].startswith("chat#6 gpt-4o-mini")


def test_stream_replays_chunk_by_chunk(cassette_dir: Path, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    def run() -> list[bytes]:
        pm = urllib3.PoolManager()
        r = pm.request("POST", llm_server.url + "/v1/chat/completions", body=_chat(True, "tell me a story"),
                       headers={"content-type": "application/json"}, preload_content=False)
        chunks = list(r.stream())
        r.release_conn()
        return chunks

    live, replayed = record_then_replay("u3_stream", cassette_dir, monkeypatch, llm_server, run)
    assert b"".join(replayed) == b"".join(live)
    recorded = json.loads((cassette_dir / "u3_stream.json").read_text())["entries"][0]["response"]
    assert recorded["stream"] is True and len(recorded["chunks"]) > 3
    assert [c.decode() for c in replayed] == recorded["chunks"]  # one read per recorded event
    assert replayed[-1] == b"data: [DONE]\n\n"


def test_connection_pool_urlopen_and_line_iteration(cassette_dir: Path, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    def run() -> list[Any]:
        pool = urllib3.HTTPConnectionPool("127.0.0.1", llm_server.port)
        a = pool.urlopen("GET", "/echo?x=1&y=2").json()
        r = pool.urlopen("POST", "/v1/chat/completions", body=_chat(True, "lines"), headers={"content-type": "application/json"},
                         preload_content=False)
        lines = [line for line in r if line.strip()]
        return [a["query"], a["n"], lines]

    live, replayed = record_then_replay("u3_pool", cassette_dir, monkeypatch, llm_server, run)
    assert replayed == live and live[0] == [["x", "1"], ["y", "2"]]
    assert replayed[2][-1].strip() == b"data: [DONE]"


def test_offline_blocks_a_live_urllib3_call(cassette_dir: Path, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with casstore.use("u3_off", mode="record", cassette_dir=cassette_dir):
        with pytest.raises(casstore.LiveCallBlocked, match="127.0.0.1"):
            urllib3.PoolManager().request("GET", llm_server.url + "/echo")
    with casstore.use("u3_off", mode="replay", cassette_dir=cassette_dir):
        with pytest.raises(casstore.CassetteMiss):
            urllib3.PoolManager().request("GET", llm_server.url + "/echo")
    assert llm_server.count == 0


def test_fallback_answers_a_refused_connection(cassette_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with LLMServer() as server:
        url = server.url + "/echo?f=1"
        with casstore.use("u3_fb", mode="record", cassette_dir=cassette_dir):
            recorded = urllib3.PoolManager().request("GET", url).json()
    # the server is gone: a refused connection is a provider failure the recording answers
    with casstore.use("u3_fb", mode="live", fallback="replay", cassette_dir=cassette_dir) as session:
        again = urllib3.PoolManager().request("GET", url, retries=False).json()
    assert again == recorded and session.served == 1
    with casstore.use("u3_fb", mode="live", cassette_dir=cassette_dir):
        with pytest.raises(urllib3.exceptions.HTTPError):
            urllib3.PoolManager().request("GET", url, retries=False)


def test_drift_reports_a_changed_answer(cassette_dir: Path, llm_server: LLMServer) -> None:
    body = _chat(False, "same question")
    headers = {"content-type": "application/json"}
    with casstore.use("u3_drift", mode="record", cassette_dir=cassette_dir):
        urllib3.PoolManager().request("POST", llm_server.url + "/v1/chat/completions", body=body, headers=headers)
    with pytest.warns(casstore.DriftWarning), casstore.use("u3_drift", mode="drift", cassette_dir=cassette_dir) as session:
        urllib3.PoolManager().request("POST", llm_server.url + "/v1/chat/completions", body=body, headers=headers)
    assert [item.status for item in session.drift] == ["changed"]
    assert any("chat#1" in d and "chat#2" in d for d in session.drift[0].differences)


def test_urlopen_is_patched_only_inside_use(cassette_dir: Path) -> None:
    def patched() -> bool:
        return getattr(urllib3.HTTPConnectionPool.__dict__["urlopen"], "__casstore__", False)

    assert not patched()
    with casstore.use("u3_scope", mode="live", cassette_dir=cassette_dir):
        with casstore.use("u3_scope2", mode="live", cassette_dir=cassette_dir):
            assert patched()
        assert patched()
    assert not patched()


def test_an_unsupported_urllib3_is_refused_at_use_entry(cassette_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from casstore.replay import install
    from casstore.replay import urllib3 as adapter

    def urlopen(self: Any, method: str, url: str, body: Any = None) -> Any:  # no options for the response
        raise AssertionError("never called")

    monkeypatch.setattr(adapter, "_URLOPEN_SIG", None)
    monkeypatch.setattr(urllib3.HTTPConnectionPool, "urlopen", urlopen)
    with pytest.raises(casstore.ClientNotSupported, match=r"urllib3 [\d.]+ \(no preload_content, decode_content\)"):
        with casstore.use("u3_old", mode="replay", cassette_dir=cassette_dir):
            pass  # pragma: no cover
    assert not install.installed() and urllib3.HTTPConnectionPool.urlopen is urlopen


def test_urllib3_before_1_26_is_refused_naming_the_supported_range(
    cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from casstore.replay import install
    from casstore.replay import urllib3 as adapter

    monkeypatch.setattr(adapter, "_URLOPEN_SIG", None)
    monkeypatch.setattr(urllib3, "__version__", "1.25.11")
    with pytest.raises(casstore.ClientNotSupported, match=r"urllib3 1\.25\.11: casstore supports urllib3 1\.26 and 2\.x"):
        with casstore.use("u3_125", mode="replay", cassette_dir=cassette_dir):
            pass  # pragma: no cover
    assert not install.installed()
