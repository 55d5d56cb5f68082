"""http.client and urllib.request through casstore."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import casstore
from tests.helpers.llm_server import LLMServer
from tests.helpers.replay import record_then_replay


def test_urllib_request_records_and_replays_offline(cassette_dir: Path, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    def run() -> list[Any]:
        out: list[Any] = []
        with urllib.request.urlopen(llm_server.url + "/echo?q=1", timeout=5) as f:
            out.append((f.status, f.headers["content-type"], json.loads(f.read()), f.url))
        req = urllib.request.Request(
            llm_server.url + "/v1/chat/completions",
            data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=5) as f:
            out.append(json.loads(f.read())["choices"][0]["message"]["content"])
        with urllib.request.urlopen(llm_server.url + "/bytes", timeout=5) as f:
            out.append(f.read())
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(llm_server.url + "/status/404", timeout=5)
        out.append((err.value.code, json.loads(err.value.read())))
        return out

    live, replayed = record_then_replay("ur", cassette_dir, monkeypatch, llm_server, run)
    assert replayed == live
    assert live[0][2]["n"] == 1 and live[1].startswith("chat#2 m")


def test_http_client_step_by_step_api_and_connection_reuse(cassette_dir: Path, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    def run() -> list[Any]:
        conn = http.client.HTTPConnection("127.0.0.1", llm_server.port, timeout=5)
        conn.putrequest("POST", "/echo?step=1")
        conn.putheader("content-type", "text/plain")
        conn.putheader("content-length", "11")
        conn.endheaders()
        conn.send(b"hello")
        conn.send(b" world")
        first = conn.getresponse()
        out = [first.status, json.loads(first.read())]
        conn.request("GET", "/text")  # the same connection again
        second = conn.getresponse()
        out += [second.getheader("content-type"), second.read()]
        conn.close()
        return out

    live, replayed = record_then_replay("hc", cassette_dir, monkeypatch, llm_server, run)
    assert replayed == live
    assert live[1]["body"] == "hello world" and live[1]["query"] == [["step", "1"]]


def test_http_client_stream_replays_chunk_by_chunk(cassette_dir: Path, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "a long story"}]})

    def run() -> list[bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", llm_server.port, timeout=5)
        conn.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
        response = conn.getresponse()
        pieces = []
        while piece := response.read1(65536):
            pieces.append(piece)
        conn.close()
        return pieces

    live, replayed = record_then_replay("hc_stream", cassette_dir, monkeypatch, llm_server, run)
    assert b"".join(replayed) == b"".join(live)
    chunks = json.loads((cassette_dir / "hc_stream.json").read_text())["entries"][0]["response"]["chunks"]
    assert len(chunks) > 3 and [p.decode() for p in replayed] == chunks


def test_offline_blocks_http_client(cassette_dir: Path, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with casstore.use("hc_off", mode="record-new", cassette_dir=cassette_dir):
        with pytest.raises(casstore.LiveCallBlocked):
            urllib.request.urlopen(llm_server.url + "/echo", timeout=5)
        conn = http.client.HTTPConnection("127.0.0.1", llm_server.port, timeout=5)
        conn.request("GET", "/echo")
        with pytest.raises(casstore.LiveCallBlocked):
            conn.getresponse()
    assert llm_server.count == 0


def test_http_client_patched_only_inside_use(cassette_dir: Path, llm_server: LLMServer) -> None:
    names = ("endheaders", "send", "getresponse")

    def patched() -> list[bool]:
        return [getattr(http.client.HTTPConnection.__dict__[n], "__casstore__", False) for n in names]

    assert patched() == [False] * 3
    with casstore.use("hc_scope", mode="live", cassette_dir=cassette_dir):
        assert patched() == [True] * 3
    assert patched() == [False] * 3
    with urllib.request.urlopen(llm_server.url + "/echo", timeout=5) as f:  # outside: untouched
        assert json.loads(f.read())["n"] == 1
