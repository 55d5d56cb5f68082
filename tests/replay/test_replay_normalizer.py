"""``casstore.use(name, normalizer=...)``: the recorded entries are looked up under the normalizer.

A normalizer is the documented way to leave a volatile field out of a call's identity. It
applies to the recording too, whatever the cassette was recorded with (no normalizer, an
older one, vcrpy through ``casstore import vcr``): the entries are re-indexed under it when
the block starts. A normalizer that names the host (``with_target``) makes the host count
for LLM calls too. The requests go through the real httpx client to the stub on 127.0.0.1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

import casstore
from casstore.errors import CassetteMiss
from tests.helpers.llm_server import LLMServer


def drop_session(doc: dict[str, Any]) -> dict[str, Any]:
    body = doc.get("body")
    if isinstance(body, dict) and isinstance(body.get("json"), dict):
        body["json"].pop("session", None)
    if isinstance(doc.get("input"), dict):
        doc["input"].pop("max_tokens", None)
    return doc


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    with httpx.Client() as client:
        response = client.post(url, json=body)
    return response.json()  # type: ignore[no-any-return]


def test_entries_recorded_without_the_normalizer_are_found_under_it(
    llm_server: LLMServer, cassette_dir: Path
) -> None:
    with casstore.use("norm", mode="record", cassette_dir=cassette_dir):
        first = _post(llm_server.url + "/echo", {"q": "order 7", "session": "s-1"})
        second = _post(llm_server.url + "/echo", {"q": "order 8", "session": "s-1"})
    count = llm_server.count
    with casstore.use("norm", mode="replay", cassette_dir=cassette_dir, normalizer=drop_session):
        assert _post(llm_server.url + "/echo", {"q": "order 7", "session": "s-1"}) == first  # the exact call
        assert _post(llm_server.url + "/echo", {"q": "order 8", "session": "s-2"}) == second  # session left out
        with pytest.raises(CassetteMiss):
            _post(llm_server.url + "/echo", {"q": "order 9", "session": "s-1"})  # still a different call
    assert llm_server.count == count


def test_llm_entries_are_found_under_the_normalizer(llm_server: LLMServer, cassette_dir: Path) -> None:
    url = llm_server.url + "/v1/chat/completions"
    call = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8192}
    with casstore.use("norm-llm", mode="record", cassette_dir=cassette_dir):
        recorded = _post(url, call)
    with casstore.use("norm-llm", mode="replay", cassette_dir=cassette_dir, normalizer=drop_session):
        assert _post(url, call) == recorded
    with casstore.use("norm-llm", mode="replay", cassette_dir=cassette_dir, normalizer=drop_session):
        assert _post(url, {**call, "max_tokens": 64000}) == recorded  # the SDK's default changed since


def test_entries_recorded_with_the_normalizer_and_a_secret_still_match(
    llm_server: LLMServer, cassette_dir: Path
) -> None:
    secret = "sk-proj-" + "aB3dE5gH7jK9" * 3  # a key pasted into a prompt: redacted in the cassette
    call = {"q": f"why does {secret} fail", "session": "s-1"}
    with casstore.use("norm-secret", mode="record", cassette_dir=cassette_dir, normalizer=drop_session):
        recorded = _post(llm_server.url + "/echo", call)
    assert secret not in (cassette_dir / "norm-secret.json").read_text()
    count = llm_server.count
    with casstore.use("norm-secret", mode="replay", cassette_dir=cassette_dir, normalizer=drop_session):
        replayed = _post(llm_server.url + "/echo", {**call, "session": "s-9"})
    assert replayed["n"] == recorded["n"] and llm_server.count == count  # served (the echo shown redacted)


def test_a_normalizer_that_names_the_host_makes_it_count_for_llm_calls(cassette_dir: Path) -> None:
    call = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
    with LLMServer() as first, LLMServer() as second:
        _post(second.url + "/echo", {})  # the two stubs now number their answers apart
        with casstore.use("hosts", mode="record", cassette_dir=cassette_dir):
            from_first = _post(first.url + "/v1/chat/completions", call)
            from_second = _post(second.url + "/v1/chat/completions", call)
        assert from_first != from_second

        def by_host(doc: dict[str, Any]) -> dict[str, Any]:
            return doc

        by_host.with_target = True  # type: ignore[attr-defined]
        with casstore.use("hosts", mode="replay", cassette_dir=cassette_dir, normalizer=by_host):
            assert _post(second.url + "/v1/chat/completions", call) == from_second
            assert _post(first.url + "/v1/chat/completions", call) == from_first
        # without it, LLM calls do not depend on the host: served in recorded order
        with casstore.use("hosts", mode="replay", cassette_dir=cassette_dir):
            assert _post(second.url + "/v1/chat/completions", call) == from_first
