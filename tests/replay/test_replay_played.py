"""all_played, the run fingerprint (meta.fingerprint, `casstore show`) and provenance in meta."""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import openai
import pytest

import casstore
from casstore.errors import NotAllPlayed
from casstore.replay.api import Use, use
from tests.helpers.calls import openai_chat
from tests.helpers.llm_server import LLMServer


def _record_two(cassette_dir: Path, server: LLMServer, key: str) -> Use:
    block = casstore.use("two", mode="record", cassette_dir=cassette_dir)
    with block:
        openai_chat(server, key, "first")
        openai_chat(server, key, "second")
    return block


def test_a_replay_that_skips_a_recorded_call_raises_not_all_played(
    cassette_dir: Path, llm_server: LLMServer, fake_key: str
) -> None:
    _record_two(cassette_dir, llm_server, fake_key)
    with pytest.raises(NotAllPlayed, match="1 recorded entry not played") as info:
        with casstore.use("two", mode="replay", cassette_dir=cassette_dir, all_played=True):
            openai_chat(llm_server, fake_key, "first")
    assert [u["seq"] for u in info.value.unplayed] == [1]
    assert "seq 1: llm POST" in str(info.value)
    with casstore.use("two", mode="replay", cassette_dir=cassette_dir, all_played=True):
        openai_chat(llm_server, fake_key, "first")
        openai_chat(llm_server, fake_key, "second")
    with casstore.use("two", mode="replay", cassette_dir=cassette_dir):  # off: no check
        openai_chat(llm_server, fake_key, "first")


def test_not_all_played_does_not_hide_the_blocks_own_error(cassette_dir: Path, llm_server: LLMServer, fake_key: str) -> None:
    _record_two(cassette_dir, llm_server, fake_key)
    with pytest.raises(KeyError):
        with casstore.use("two", mode="replay", cassette_dir=cassette_dir, all_played=True):
            raise KeyError("the test's own failure")


def test_the_fingerprint_is_stored_and_a_faithful_replay_reproduces_it(
    cassette_dir: Path, llm_server: LLMServer, fake_key: str
) -> None:
    recorded = _record_two(cassette_dir, llm_server, fake_key)
    data = json.loads((cassette_dir / "two.json").read_text())
    assert recorded.fingerprint is not None and recorded.fingerprint.startswith("sha256:")
    assert data["meta"]["fingerprint"] == recorded.fingerprint
    replay = casstore.use("two", mode="replay", cassette_dir=cassette_dir)
    with replay as s:
        openai_chat(llm_server, fake_key, "first")
        openai_chat(llm_server, fake_key, "second")
    assert replay.fingerprint == s.fingerprint == recorded.fingerprint
    swapped = casstore.use("two", mode="replay", cassette_dir=cassette_dir)
    with swapped:  # the same calls in another order: another run
        openai_chat(llm_server, fake_key, "second")
        openai_chat(llm_server, fake_key, "first")
    assert swapped.fingerprint != recorded.fingerprint
    with casstore.use("two", mode="replay", cassette_dir=cassette_dir, faults={1: 503}) as faulted:
        openai_chat(llm_server, fake_key, "first")
        with pytest.raises(openai.InternalServerError):
            openai_chat(llm_server, fake_key, "second")
    assert faulted.fingerprint != recorded.fingerprint


def test_meta_records_platform_and_client_package_versions(cassette_dir: Path, llm_server: LLMServer, fake_key: str) -> None:
    _record_two(cassette_dir, llm_server, fake_key)
    meta = json.loads((cassette_dir / "two.json").read_text())["meta"]
    assert meta["platform"] == {"os": sys.platform, "arch": platform.machine(), "python": platform.python_version(),
                                "implementation": platform.python_implementation()}
    assert meta["packages"]["openai"] == openai.__version__
    assert "httpx" in meta["packages"] and "google-genai" not in meta["packages"]


def test_casstore_show_prints_the_fingerprint_and_platform(
    repo: Path, casstore, llm_server: LLMServer, fake_key: str, replay_env: None  # type: ignore[no-untyped-def]
) -> None:
    block = use("shown", mode="record", path=repo / "tests" / "cassettes" / "shown.json")
    with block:
        openai_chat(llm_server, fake_key, "hello")
    assert casstore("add", "tests/cassettes/shown.json", cwd=repo).exit_code == 0
    r = casstore("show", "shown", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert f"run:      {block.fingerprint}" in r.stdout
    assert f"Python {platform.python_version()}" in r.stdout and "openai " in r.stdout
