"""Identities that travel: one call is one identity whatever client sends it and wherever
the SDK points (identity rule 2), and cassettes recorded under rule 1 keep replaying.

Real clients (requests, httpx, the OpenAI and Anthropic SDKs) against stub servers on
127.0.0.1: a recording made through one server replays through another, offline, while
both servers keep running and count every request they see.
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
from casstore.errors import CassetteMiss
from casstore.model.identity import IDENTITY_RULE, http_identity, llm_api
from tests.helpers.llm_server import LLMServer

JSON = {"content-type": "application/json"}


@pytest.fixture
def other_server() -> Any:
    """A second stub provider on another port: "the gateway" a test replays through."""
    server = LLMServer().start()
    try:
        yield server
    finally:
        server.stop()


# -- generic HTTP: client defaults and transport headers do not count ---------------------------


def _generic_with_requests(url: str) -> list[Any]:
    out = []
    r = requests.post(url + "/echo?b=2&a=1", json={"order": 7, "note": "refund"}, headers={"x-tenant": "acme"}, timeout=5)
    out.append((r.status_code, r.json()))
    r = requests.get(url + "/echo?q=status", timeout=5)
    out.append((r.status_code, r.json()))
    r = requests.post(url + "/text", data=b"raw body", headers={"content-type": "text/plain"}, timeout=5)
    out.append((r.status_code, r.text))
    return out


def _generic_with_httpx(url: str) -> list[Any]:
    out = []
    with httpx.Client() as c:
        r = c.post(url + "/echo?a=1&b=2", json={"note": "refund", "order": 7}, headers={"X-Tenant": "acme"})
        out.append((r.status_code, r.json()))
        r = c.get(url + "/echo", params={"q": "status"})
        out.append((r.status_code, r.json()))
        r = c.post(url + "/text", content=b"raw body", headers={"Content-Type": "text/plain"})
        out.append((r.status_code, r.text))
    return out


def _generic_with_async_httpx(url: str) -> list[Any]:
    async def go() -> list[Any]:
        out = []
        async with httpx.AsyncClient(headers={"accept": "application/json", "user-agent": "agent/9"}) as c:
            r = await c.post(url + "/echo?b=2&a=1", json={"order": 7, "note": "refund"}, headers={"x-tenant": "acme"})
            out.append((r.status_code, r.json()))
            r = await c.get(url + "/echo?q=status")
            out.append((r.status_code, r.json()))
            r = await c.post(url + "/text", content=b"raw body", headers={"content-type": "text/plain"})
            out.append((r.status_code, r.text))
        return out

    return asyncio.run(go())


def test_recorded_with_requests_replays_through_httpx(
    llm_server: LLMServer, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with casstore.use("generic/requests", mode="record", cassette_dir=cassette_dir) as rec:
        recorded = _generic_with_requests(llm_server.url)
    assert rec.live == 3 and llm_server.count == 3
    entries = json.loads((cassette_dir / "generic" / "requests.json").read_text())["entries"]
    assert all(e["identity_rule"] == IDENTITY_RULE for e in entries)
    # requests sent its own accept / user-agent / accept-encoding / connection headers ...
    assert entries[0]["request"]["headers"]["user-agent"] == requests.utils.default_user_agent()

    monkeypatch.setenv("CASSTORE_OFFLINE", "1")  # the server still runs: it must see nothing
    for client in (_generic_with_httpx, _generic_with_async_httpx):
        with casstore.use("generic/requests", mode="replay", cassette_dir=cassette_dir) as rep:
            assert client(llm_server.url) == recorded
        assert rep.served == 3 and rep.live == 0
    assert llm_server.count == 3


def test_recorded_with_httpx_replays_through_requests(
    llm_server: LLMServer, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with casstore.use("generic/httpx", mode="record", cassette_dir=cassette_dir):
        recorded = _generic_with_async_httpx(llm_server.url)
    count = llm_server.count
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with casstore.use("generic/httpx", mode="replay", cassette_dir=cassette_dir) as rep:
        assert _generic_with_requests(llm_server.url) == recorded
    assert rep.served == 3 and llm_server.count == count


def test_headers_a_caller_sets_still_count(llm_server: LLMServer, cassette_dir: Path) -> None:
    with casstore.use("generic/tenant", mode="record", cassette_dir=cassette_dir):
        requests.get(llm_server.url + "/echo", headers={"x-tenant": "acme"}, timeout=5)
    with casstore.use("generic/tenant", mode="replay", cassette_dir=cassette_dir):
        with pytest.raises(CassetteMiss) as info:
            requests.get(llm_server.url + "/echo", headers={"x-tenant": "globex"}, timeout=5)
    assert 'headers.x-tenant: "acme" → "globex"' in str(info.value)


# -- LLM SDKs: the operation and its parameters, not the host ----------------------------------


def _openai_run(base_url: str, key: str) -> list[Any]:
    client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0)
    out: list[Any] = []
    chat = client.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "triage order 7"}], temperature=0.2
    )
    out.append(chat.choices[0].message.content)
    stream = client.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "stream a haiku"}], stream=True
    )
    out.append("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
    out.append(client.embeddings.create(model="emb-test", input=["a", "b"]).model_dump()["data"])
    out.append(client.responses.create(model="gpt-test", input="summarize ticket 12").output_text)
    return out


def _anthropic_run(base_url: str, key: str) -> list[Any]:
    client = anthropic.Anthropic(base_url=base_url, api_key=key, max_retries=0)
    msg = client.messages.create(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "classify this email"}]
    )
    with client.messages.stream(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "stream the answer"}]
    ) as st:
        text = "".join(st.text_stream)
    return [msg.content[0].text, text]


def test_openai_sdk_recorded_through_one_base_url_replays_through_another(
    llm_server: LLMServer, other_server: LLMServer, fake_key: str, cassette_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with casstore.use("llm/openai", mode="record", cassette_dir=cassette_dir):
        recorded = _openai_run(llm_server.url + "/v1", fake_key)
    entries = json.loads((cassette_dir / "llm" / "openai.json").read_text())["entries"]
    assert [e["kind"] for e in entries] == ["llm"] * 4
    assert all(e["target"].startswith(f"POST {llm_server.url}/v1/") for e in entries)  # the host is shown
    before = (llm_server.count, other_server.count)

    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    # a gateway on another port, under another path prefix, and another key
    gateway = other_server.url + "/gateway/openai/v1"
    with casstore.use("llm/openai", mode="replay", cassette_dir=cassette_dir) as rep:
        assert _openai_run(gateway, "sk-" + "other" * 8) == recorded
    assert rep.served == 4 and (llm_server.count, other_server.count) == before == (4, 0)


def test_anthropic_sdk_recorded_through_one_base_url_replays_through_another(
    llm_server: LLMServer, other_server: LLMServer, fake_key: str, cassette_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with casstore.use("llm/anthropic", mode="record", cassette_dir=cassette_dir):
        recorded = _anthropic_run(llm_server.url, fake_key)
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with casstore.use("llm/anthropic", mode="replay", cassette_dir=cassette_dir) as rep:
        assert _anthropic_run(other_server.url + "/proxy/anthropic", fake_key) == recorded
    assert rep.served == 2 and llm_server.count == 2 and other_server.count == 0


def test_llm_miss_explanation_still_shows_both_hosts(
    llm_server: LLMServer, other_server: LLMServer, fake_key: str, cassette_dir: Path
) -> None:
    messages = [{"role": "user", "content": "triage order 7"}]
    with casstore.use("llm/miss", mode="record", cassette_dir=cassette_dir):
        openai.OpenAI(base_url=llm_server.url + "/v1", api_key=fake_key, max_retries=0).chat.completions.create(
            model="gpt-test", messages=messages, temperature=0.2
        )
    other = openai.OpenAI(base_url=other_server.url + "/v1", api_key=fake_key, max_retries=0)
    with casstore.use("llm/miss", mode="replay", cassette_dir=cassette_dir):
        with pytest.raises(CassetteMiss) as info:
            other.chat.completions.create(model="gpt-test", messages=messages, temperature=0.7)
    text = str(info.value)
    assert f"target:   POST {other_server.url}/v1/chat/completions" in text
    assert f"(llm POST {llm_server.url}/v1/chat/completions)" in text
    assert "temperature: 0.2 → 0.7" in text
    assert other_server.count == 0


# -- the rule on its own: recognized operations of every provider -------------------------------


def _llm(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    return http_identity("POST", url, {**JSON, **(headers or {})}, json.dumps(body))


CONVERSE = {"messages": [{"role": "user", "content": [{"text": "hi"}]}], "inferenceConfig": {"maxTokens": 64}}


def test_bedrock_operations_by_model_not_region_endpoint_or_signature() -> None:
    sigv4 = {
        "authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261123/us-east-1/bedrock/aws4_request, Signature=ab",
        "x-amz-date": "20261123T074500Z",
        "x-amz-security-token": "session" * 4,
        "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
        "amz-sdk-invocation-id": "5e1c9d2a",
        "amz-sdk-request": "attempt=1; max=3",
        "user-agent": "Boto3/1.43 md/Botocore",
        "accept": "application/json",
    }
    model = "anthropic.claude-3-haiku-20240307-v1:0"
    quoted = model.replace(":", "%3A")
    a = _llm(f"https://bedrock-runtime.us-east-1.amazonaws.com/model/{quoted}/converse", CONVERSE, sigv4)
    b = _llm(f"http://127.0.0.1:9000/model/{model}/converse", CONVERSE)
    c = _llm(f"https://vpce-1.bedrock-runtime.eu-west-1.vpce.amazonaws.com/model/{quoted}/converse", CONVERSE,
             {**sigv4, "x-amz-date": "20261124T000000Z", "amz-sdk-invocation-id": "ffff"})
    assert a.identity == b.identity == c.identity
    assert a.kind == "llm" and a.document["api"] == "bedrock.converse" and a.models == [model]
    assert a.target.startswith("POST https://bedrock-runtime.us-east-1.amazonaws.com/model/")  # shown, not hashed
    stream = _llm(f"http://127.0.0.1:9000/model/{model}/converse-stream", CONVERSE)
    assert stream.identity != a.identity and stream.document["input"]["stream"] is True
    other_model = _llm("http://127.0.0.1:9000/model/amazon.nova-lite-v1:0/converse", CONVERSE)
    assert other_model.identity != a.identity
    guarded = _llm(f"http://127.0.0.1:9000/model/{model}/invoke", CONVERSE, {"x-amzn-bedrock-guardrailidentifier": "g1"})
    plain = _llm(f"http://127.0.0.1:9000/model/{model}/invoke", CONVERSE)
    assert guarded.identity != plain.identity and plain.document["api"] == "bedrock.invoke-model"
    assert llm_api("POST", f"http://h/model/{model}/invoke-with-response-stream") == "bedrock.invoke-model-stream"
    assert llm_api("POST", f"http://h/model/{model}/count-tokens") is None


def test_gemini_operations_by_model_not_host_or_key() -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": {"temperature": 0}}
    google = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    a = _llm(google + "?key=AIza" + "x" * 20, body, {"x-goog-api-client": "genai-py/1.0", "x-goog-api-key": "k"})
    b = _llm("http://127.0.0.1:8080/v1beta/models/gemini-2.5-flash:generateContent", body)
    vertex = _llm(
        "https://us-central1-aiplatform.googleapis.com/v1/projects/p1/locations/us-central1/publishers/google/"
        "models/gemini-2.5-flash:generateContent", body)
    assert a.identity == b.identity == vertex.identity
    assert a.document["api"] == "gemini.generateContent" and a.models == ["gemini-2.5-flash"]
    sse = _llm("http://127.0.0.1:8080/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", body)
    assert sse.identity != a.identity and sse.document["params"] == {"model": "gemini-2.5-flash", "alt": "sse"}
    assert _llm(google.replace("2.5-flash", "2.5-pro"), body).identity != a.identity


def test_azure_and_openai_compatible_servers() -> None:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    azure = "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21"
    a = _llm("https://east.openai.azure.com" + azure, body, {"api-key": "k1"})
    b = _llm("https://west.openai.azure.com" + azure, body, {"api-key": "k2"})
    assert a.identity == b.identity and a.document["params"] == {"deployment": "prod-4o", "api-version": "2024-10-21"}
    assert _llm("https://east.openai.azure.com" + azure.replace("prod-4o", "canary"), body).identity != a.identity
    assert _llm("https://east.openai.azure.com" + azure.replace("2024-10-21", "2025-01-01"), body).identity != a.identity
    # any OpenAI-compatible server: vLLM, Ollama, a gateway
    direct = _llm("https://api.openai.com/v1/chat/completions", body, {"x-stainless-os": "Linux", "openai-organization": "o"})
    assert direct.identity == _llm("http://localhost:11434/v1/chat/completions", body).identity
    assert direct.identity == _llm("http://127.0.0.1:4000/openai/v1/chat/completions/", body).identity
    assert direct.identity != a.identity  # an Azure deployment is a parameter of its own
    assert direct.identity != _llm("https://api.openai.com/v1/chat/completions", {**body, "model": "gpt-4.1"}).identity


def test_generic_transport_and_signature_details_do_not_count() -> None:
    base = http_identity("GET", "https://bucket.s3.amazonaws.com/key.json?versionId=3", {}, None)
    presigned = http_identity(
        "GET",
        "https://bucket.s3.amazonaws.com/key.json?versionId=3&X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=AKID%2F20261123%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261123T000000Z"
        "&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature=abcdef",
        {"Accept": "*/*", "Accept-Encoding": "identity", "Connection": "close", "Host": "bucket.s3.amazonaws.com",
         "User-Agent": "Python-urllib/3.11", "Expect": "100-continue", "x-amz-checksum-crc32": "AAAA"},
        None,
    )
    assert presigned.identity == base.identity
    assert base.target == "GET https://bucket.s3.amazonaws.com/key.json?versionId=3"
    # percent-encoding of unreserved characters is not a different path; a real %2F is
    assert http_identity("GET", "http://h/a%7Eb/%41", {}, None).identity == http_identity("GET", "http://h/a~b/A", {}, None).identity
    assert http_identity("GET", "http://h/a%2fb", {}, None).identity == http_identity("GET", "http://h/a%2Fb", {}, None).identity
    assert http_identity("GET", "http://h/a%2Fb", {}, None).identity != http_identity("GET", "http://h/a/b", {}, None).identity
    # ... but what the caller chose still counts
    assert http_identity("GET", "http://h/x", {"x-tenant": "a"}, None).identity != http_identity("GET", "http://h/x", {}, None).identity
    assert http_identity("GET", "http://h/x?v=1", {}, None).identity != http_identity("GET", "http://h/x?v=2", {}, None).identity


# -- rule 1 cassettes keep replaying ------------------------------------------------------------


def _as_rule1(path: Path) -> None:
    """Rewrite a cassette as casstore wrote it before rule 2: rule 1 identities, no identity_rule."""
    data = json.loads(path.read_text())
    for entry in data["entries"]:
        req = entry["request"]
        if entry["kind"] != "tool":
            body = req.get("body")
            raw = json.dumps(body) if isinstance(body, (dict, list)) else body
            entry["identity"] = http_identity(req["method"], req["url"], req["headers"], raw, rule=1).identity
        del entry["identity_rule"]
    path.write_text(json.dumps(data))


def test_a_rule1_cassette_replays_and_grows(
    llm_server: LLMServer, fake_key: str, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with casstore.use("old/agent", mode="record", cassette_dir=cassette_dir):
        recorded = _openai_run(llm_server.url + "/v1", fake_key) + _generic_with_requests(llm_server.url)
    path = cassette_dir / "old" / "agent.json"
    current = {e["identity"] for e in json.loads(path.read_text())["entries"]}
    _as_rule1(path)
    old = {e["identity"] for e in json.loads(path.read_text())["entries"]}
    assert not old & current  # every identity differs under rule 1 (accept headers, LLM hosts)
    count = llm_server.count

    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with casstore.use("old/agent", mode="replay", cassette_dir=cassette_dir) as rep:
        assert _openai_run(llm_server.url + "/v1", fake_key) + _generic_with_requests(llm_server.url) == recorded
    assert rep.served == 7 and llm_server.count == count
    monkeypatch.delenv("CASSTORE_OFFLINE")

    # record-new adds rule 2 entries next to the rule 1 ones; both replay afterwards
    with casstore.use("old/agent", mode="record-new", cassette_dir=cassette_dir) as grow:
        _openai_run(llm_server.url + "/v1", fake_key)
        requests.get(llm_server.url + "/echo?new=1", timeout=5)
    assert grow.served == 4 and grow.live == 1
    entries = json.loads(path.read_text())["entries"]
    assert [e.get("identity_rule", 1) for e in entries] == [1] * 7 + [IDENTITY_RULE]
    with casstore.use("old/agent", mode="replay", cassette_dir=cassette_dir) as again:
        _generic_with_requests(llm_server.url)
        requests.get(llm_server.url + "/echo?new=1", timeout=5)
    assert again.served == 4


def test_refresh_replaces_a_rule1_entry_instead_of_keeping_both(llm_server: LLMServer, cassette_dir: Path) -> None:
    with casstore.use("old/refresh", mode="record", cassette_dir=cassette_dir):
        _generic_with_requests(llm_server.url)
    path = cassette_dir / "old" / "refresh.json"
    _as_rule1(path)
    with casstore.use("old/refresh", mode="refresh", cassette_dir=cassette_dir):
        requests.get(llm_server.url + "/echo?q=status", timeout=5)
    entries = json.loads(path.read_text())["entries"]
    assert len(entries) == 3
    assert sorted(e.get("identity_rule", 1) for e in entries) == [1, 1, IDENTITY_RULE]
