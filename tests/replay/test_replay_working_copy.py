"""A re-recorded working copy that differs from its pin.

``record-new`` on a pinned cassette writes the new calls into the working copy; the pin in
casstore.lock stays what was reviewed until ``casstore add``. Then:

* ``record-new`` / ``refresh`` sessions build on the working copy (so the calls recorded
  last time replay, instead of being recorded again and again);
* strict ``replay`` keeps serving the pin, and its miss says so: which one it served, that
  the working copy differs, and that ``casstore add`` pins the new recording.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests

import casstore as lib
from casstore.errors import CassetteMiss
from tests.helpers.calls import requests_chat
from tests.helpers.llm_server import LLMServer


@pytest.fixture
def pinned(repo: Path, casstore: Any, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch,
           replay_env: None) -> Path:
    """``flow`` pinned with one call (``first``); returns its working copy path."""
    monkeypatch.chdir(repo)
    with lib.use("flow", mode="record"):
        requests_chat(llm_server, "first")
    working = repo / "tests" / "cassettes" / "flow.json"
    assert casstore("add", str(working), cwd=repo).exit_code == 0
    return working


def test_record_new_builds_on_the_working_copy_not_the_pin(
        pinned: Path, llm_server: LLMServer, casstore: Any, repo: Path) -> None:
    with lib.use("flow", mode="record-new"):
        requests_chat(llm_server, "first")
        requests_chat(llm_server, "second")  # new: recorded into the working copy
    assert llm_server.count == 2  # 'first' replayed from the pin, 'second' went live
    # a second record-new run: 'second' is in the working copy, so nothing goes live
    with lib.use("flow", mode="record-new") as s:
        requests_chat(llm_server, "first")
        requests_chat(llm_server, "second")
    assert llm_server.count == 2, "record-new recorded the same call again"
    assert s.served == 2
    # refresh builds on the working copy too: it keeps the unexercised 'second'
    with lib.use("flow", mode="refresh"):
        requests_chat(llm_server, "first")
    assert llm_server.count == 3
    with lib.use("flow", mode="record-new") as s:
        requests_chat(llm_server, "second")
    assert llm_server.count == 3 and s.served == 1


def test_replay_serves_the_pin_and_says_casstore_add_pins_the_new_recording(
        pinned: Path, llm_server: LLMServer, casstore: Any, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with lib.use("flow", mode="record-new"):
        requests_chat(llm_server, "second")
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with pytest.raises(CassetteMiss) as info, lib.use("flow", mode="replay"):
        requests_chat(llm_server, "second")
    text = str(info.value)
    assert "served the pin in casstore.lock" in text, text
    assert "tests/cassettes/flow.json differs from the pin" in text, text
    assert "has this call" in text, text
    assert "casstore add tests/cassettes/flow.json" in text, text
    assert "record-new" not in text.split("casstore add", 1)[1], "it must not advise recording again"
    # once pinned, replay serves it
    assert casstore("add", "tests/cassettes/flow.json", cwd=repo).exit_code == 0
    before = llm_server.count
    with lib.use("flow", mode="replay") as s:
        requests_chat(llm_server, "second")
    assert s.served == 1 and llm_server.count == before


def test_replay_of_an_unchanged_working_copy_says_nothing_extra(
        pinned: Path, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with pytest.raises(CassetteMiss) as info, lib.use("flow", mode="replay"):
        requests_chat(llm_server, "never recorded")
    text = str(info.value)
    assert "differs from the pin" not in text
    assert "record-new" in text  # the ordinary advice


def test_the_recording_and_its_pin_list_the_same_models(
        repo: Path, casstore: Any, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch, replay_env: None) -> None:
    """One rule for "which models a cassette uses": the working copy's meta and the pin's
    summary in casstore.lock agree, also for a call to an endpoint casstore does not know
    as an LLM (an ``http`` entry whose body names a model)."""
    monkeypatch.chdir(repo)
    with lib.use("models", mode="record"):
        requests_chat(llm_server, "one")
        requests.post(llm_server.url + "/echo", json={"model": "in-house-7b", "prompt": "hi"}, timeout=5)
    working = repo / "tests" / "cassettes" / "models.json"
    data = json.loads(working.read_text())
    assert [e["kind"] for e in data["entries"]] == ["llm", "http"]
    assert data["meta"]["models"] == ["gpt-test", "in-house-7b"]
    r = casstore("add", "--json", str(working), cwd=repo)
    assert r.exit_code == 0, r.stderr
    r = casstore("show", "--json", "models", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert r.json["models"] == data["meta"]["models"]
