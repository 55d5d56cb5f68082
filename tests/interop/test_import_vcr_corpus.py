"""A corpus of real vcrpy recordings: every imported interaction replays.

A few hundred cassettes are recorded by the real vcrpy against the loopback stub: several
clients (requests, httpx, urllib3, aiohttp), many kinds of call (JSON, form, text and
binary bodies, gzip answers, query strings, streams, LLM endpoints, errors), five
serializers (vcrpy's YAML and JSON, and three custom layouts seen in real projects:
bodies kept parsed under ``parsed_body`` in YAML and in JSON, Ruby-VCR-style
``{encoding, string}`` / ``base64_string`` bodies). The folder is imported in one go;
every cassette must report all its interactions replayable, and the requests and httpx
calls are then replayed offline by the same code that recorded them, answer for answer.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import importlib.util
import json
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import requests
import urllib3
import vcr
import yaml
from vcr.serialize import serialize
from vcr.serializers import jsonserializer, yamlserializer

import casstore as cs
from casstore.model.identity import is_volatile_header
from tests.helpers.llm_server import LLMServer

pytestmark = pytest.mark.usefixtures("replay_env")

Call = dict[str, Any]


def _scenarios() -> list[list[Call]]:
    """Each scenario is the list of calls one test makes (varied on purpose)."""
    out: list[list[Call]] = []
    for i in range(26):
        calls: list[Call] = []
        kind = i % 13
        if kind == 0:
            calls.append({"method": "GET", "path": "/echo", "params": {"i": str(i), "q": "a b&c"}})
        elif kind == 1:
            calls.append({"method": "POST", "path": "/echo", "json": {"i": i, "nested": {"x": [1, 2.5, None]}, "s": "é"}})
        elif kind == 2:
            calls.append({"method": "PUT", "path": "/text", "form": {"name": f"n{i}", "v": "x y"}})
        elif kind == 3:
            calls.append({"method": "POST", "path": "/text", "text": f"plain body {i}\n"})
        elif kind == 4:
            calls.append({"method": "POST", "path": "/bytes", "bytes": bytes([i, 0, 255, 128]) * 4})
        elif kind == 5:
            calls.append({"method": "GET", "path": "/gzip", "params": {"g": str(i)}})
        elif kind == 6:
            calls.append({"method": "POST", "path": "/v1/chat/completions", "json": {
                "model": "gpt-test", "temperature": 0.2, "messages": [{"role": "user", "content": f"hello {i}"}]}})
        elif kind == 7:
            calls.append({"method": "POST", "path": "/v1/chat/completions", "json": {
                "model": "gpt-test", "stream": True, "messages": [{"role": "user", "content": f"stream {i}"}]}})
        elif kind == 8:
            calls.append({"method": "POST", "path": "/v1/embeddings", "json": {"model": "emb", "input": [f"t{i}"]}})
        elif kind == 9:
            calls.append({"method": "POST", "path": "/v1/messages", "headers": {"anthropic-version": "2023-06-01"},
                          "json": {"model": "claude-test", "max_tokens": 20,
                                   "messages": [{"role": "user", "content": f"hi {i}"}]}})
        elif kind == 10:
            calls.append({"method": "DELETE", "path": f"/status/{404 if i % 2 else 500}"})
        elif kind == 11:  # the same call twice, then another: served in recorded order
            call = {"method": "POST", "path": "/echo", "json": {"repeat": i}, "headers": {"x-app": "corpus"}}
            calls += [call, call, {"method": "PATCH", "path": "/echo", "json": {"after": i}}]
        else:
            calls.append({"method": "GET", "path": "/text", "params": {"page": str(i)}, "headers": {"accept": "text/plain"}})
        out.append(calls)
    return out


def _binary(calls: list[Call], client: str) -> bool:
    """Calls whose cassette holds bytes vcrpy's JSON serializer refuses."""
    return any(c.get("bytes") or c["path"] == "/bytes" or (c["path"] == "/gzip" and client != "requests") for c in calls)


# -- the clients, each doing a call its own way --------------------------------------------------


def _requests(url: str, c: Call) -> tuple[int, bytes]:
    kw: dict[str, Any] = {"params": c.get("params"), "headers": c.get("headers"), "timeout": 5}
    if "json" in c:
        kw["json"] = c["json"]
    elif "form" in c:
        kw["data"] = c["form"]
    elif "text" in c:
        kw["data"] = c["text"].encode()
    elif "bytes" in c:
        kw["data"] = c["bytes"]
    r = requests.request(c["method"], url + c["path"], **kw)
    return r.status_code, r.content


def _httpx(url: str, c: Call) -> tuple[int, bytes]:
    kw: dict[str, Any] = {"params": c.get("params"), "headers": c.get("headers")}
    if "json" in c:
        kw["json"] = c["json"]
    elif "form" in c:
        kw["data"] = c["form"]
    elif "text" in c:
        kw["content"] = c["text"].encode()
    elif "bytes" in c:
        kw["content"] = c["bytes"]
    with httpx.Client(timeout=5) as client:
        r = client.request(c["method"], url + c["path"], **kw)
        return r.status_code, r.content


def _urllib3(url: str, c: Call) -> tuple[int, bytes]:
    pool = urllib3.PoolManager()
    headers = dict(c.get("headers") or {})
    full = url + c["path"] + ("?" + urlencode(c["params"]) if c.get("params") else "")
    if "json" in c:
        r = pool.request(c["method"], full, json=c["json"], headers=headers)
    elif "form" in c:
        headers["content-type"] = "application/x-www-form-urlencoded"
        r = pool.request(c["method"], full, body=urlencode(c["form"]), headers=headers)
    else:
        body = c["text"].encode() if "text" in c else c.get("bytes")
        r = pool.request(c["method"], full, body=body, headers=headers)
    return r.status, r.data


def _aiohttp(url: str, c: Call) -> tuple[int, bytes]:
    import aiohttp

    async def go() -> tuple[int, bytes]:
        kw: dict[str, Any] = {"params": c.get("params"), "headers": c.get("headers")}
        if "json" in c:
            kw["json"] = c["json"]
        elif "form" in c:  # vcrpy would keep a data= mapping as it keeps json= (see docs/migrating.md)
            kw["data"] = urlencode(c["form"])
            kw["headers"] = {**(kw["headers"] or {}), "content-type": "application/x-www-form-urlencoded"}
        elif "text" in c or "bytes" in c:
            # aiohttp adds a content type to a bytes body after vcrpy recorded the headers:
            # a test that sets it records it (see docs/migrating.md)
            kw["data"] = c["text"].encode() if "text" in c else c["bytes"]
            kw["headers"] = {**(kw["headers"] or {}), "content-type": "application/octet-stream"}
        async with aiohttp.ClientSession() as s, s.request(c["method"], url + c["path"], **kw) as r:
            return r.status, await r.read()

    return asyncio.run(go())


CLIENTS: dict[str, Callable[[str, Call], tuple[int, bytes]]] = {
    "requests": _requests, "httpx": _httpx, "urllib3": _urllib3, "aiohttp": _aiohttp,
}


# -- custom serializers seen in real projects (written for this test) ----------------------------


def _parsed_layout(cassette: dict[str, Any]) -> dict[str, Any]:
    """JSON bodies kept parsed under ``parsed_body``, headers lower-cased and a few dropped."""
    for interaction in cassette["interactions"]:
        for data in interaction.values():
            headers = {k.lower(): v for k, v in (data.get("headers") or {}).items()
                       if k.lower() not in ("authorization", "date", "user-agent", "server")}
            data["headers"] = headers
            body = data.get("body")
            raw = body.get("string") if isinstance(body, dict) else body
            if any("application/json" in v for v in headers.get("content-type", [])) and raw:
                if isinstance(raw, bytes):
                    try:
                        raw = raw.decode()
                    except UnicodeDecodeError:
                        continue  # still compressed: leave it
                try:
                    data["parsed_body"] = json.loads(raw)
                except ValueError:
                    continue
                del data["body"]
    return cassette


def _ruby_layout(cassette: dict[str, Any]) -> dict[str, Any]:
    for interaction in cassette["interactions"]:
        for data in interaction.values():
            body = data.get("body")
            if isinstance(body, dict) and "string" not in body and body:  # aiohttp's json= mapping
                body = json.dumps(body)
            raw = body.get("string") if isinstance(body, dict) else body
            if raw is None:
                data["body"] = {"encoding": "UTF-8", "string": ""}
            elif isinstance(raw, bytes):
                try:
                    data["body"] = {"encoding": "UTF-8", "string": raw.decode()}
                except UnicodeDecodeError:
                    data["body"] = {"encoding": "ASCII-8BIT", "base64_string": base64.b64encode(raw).decode()}
            else:
                data["body"] = {"encoding": "UTF-8", "string": raw}
    return cassette


def _serializer(transform: Callable[[dict[str, Any]], dict[str, Any]], fmt: str) -> types.SimpleNamespace:
    def serialize(cassette: dict[str, Any]) -> str:
        data = transform(cassette)
        if fmt == "json":
            return json.dumps(data, indent=2)
        return yaml.dump(data, Dumper=yaml.Dumper, allow_unicode=True)

    def deserialize(text: str) -> dict[str, Any]:  # never called: every cassette is new
        raise AssertionError("not used")

    return types.SimpleNamespace(serialize=serialize, deserialize=deserialize)


SERIALIZERS = {
    "yaml": None,
    "json": None,
    "parsed": _serializer(_parsed_layout, "yaml"),
    "parsedjson": _serializer(_parsed_layout, "json"),
    "ruby": _serializer(_ruby_layout, "yaml"),
}


def _record(root: Path, url: str) -> list[tuple[Path, str, list[Call], list[tuple[int, bytes]]]]:
    """Record every (client, scenario) once with vcrpy, then write the cassette with each
    serializer through vcrpy's own ``serialize``; returns what each live run answered."""
    done = []
    scenarios = _scenarios()
    builtin = {"yaml": yamlserializer, "json": jsonserializer}
    for client, fn in CLIENTS.items():
        picked = scenarios if client in ("requests", "httpx") else scenarios[:13:2]
        for i, calls in enumerate(picked):
            recorder = vcr.VCR(record_mode="all")
            with recorder.use_cassette(str(root.parent / "raw" / client / f"{i}.yaml")) as cassette:
                answers = [fn(url, c) for c in calls]
            for ser, module in SERIALIZERS.items():
                if "json" in ser and _binary(calls, client):
                    continue
                path = root / client / ser / f"test_{i:02d}.{'json' if 'json' in ser else 'yaml'}"
                path.parent.mkdir(parents=True, exist_ok=True)
                data = {"requests": [copy.deepcopy(r) for r, _ in cassette.data],
                        "responses": [copy.deepcopy(r) for _, r in cassette.data]}
                path.write_text(serialize(data, module or builtin[ser]))
                done.append((path, client, calls, answers))
    return done


def test_every_imported_interaction_of_a_corpus_replays(
    tmp_path: Path, repo: Path, casstore: Any, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "corpus"
    recorded = _record(corpus, llm_server.url)
    files = sorted(corpus.rglob("test_*.*"))
    assert len(files) == len(recorded) >= 250
    interactions = llm_server.count

    r = casstore("import", "vcr", str(corpus), "--json", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert len(r.json) == len(files)
    per_file = {p: len(calls) for p, _, calls, _ in recorded}
    assert sum(x["interactions"] for x in r.json) == sum(per_file.values())
    not_replayed = [(x["name"], x["replayed"], x["interactions"]) for x in r.json if x["replayed"] != x["interactions"]]
    assert not not_replayed
    assert any(any("parsed_body" in n for n in x["notes"]) for x in r.json)

    # the same code, offline, through casstore: the recorded answers, in order
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    # vcrpy's aiohttp stub records the headers before aiohttp adds its defaults (accept):
    # those replay once client default headers leave the identity (the hermetic-replay work)
    intercepted = {"requests", "httpx"} | (
        {"aiohttp"} if importlib.util.find_spec("casstore.replay.aiohttp") and is_volatile_header("accept") else set()
    ) | ({"urllib3"} if importlib.util.find_spec("casstore.replay.urllib3") else set())
    replayed = 0
    for path, client, calls, answers in recorded:
        if client not in intercepted:
            continue
        name = path.relative_to(corpus).with_suffix("").as_posix()
        with cs.use(name, mode="replay"):
            got = [CLIENTS[client](llm_server.url, c) for c in calls]
        for (status, body), (live_status, live_body) in zip(got, answers, strict=True):
            assert status == live_status, (name, status, live_status)
            if not any("parsed" in part for part in path.parts):
                assert body == live_body, name
            else:  # a parsed body is served as canonical JSON: the same JSON value
                assert body == live_body or json.loads(body) == json.loads(live_body), name
        replayed += len(calls)
    assert replayed >= 150
    assert llm_server.count == interactions  # replay sent nothing
