"""The record gate (CI never spends by accident) and the spend line of a recording block.

Real OpenAI SDK against the loopback stub; the stub's request count proves a refused
block sent nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import casstore
from casstore.errors import RecordingRefused
from tests.helpers.calls import openai_chat
from tests.helpers.llm_server import LLMServer


@pytest.mark.parametrize("mode", ["record", "refresh", "drift", "live", "auto"])
def test_ci_refuses_every_mode_that_would_go_live_before_any_call(
    mode: str, cassette_dir: Path, llm_server: LLMServer, fake_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if mode in ("refresh", "drift"):  # these read a cassette: record one first (no CI)
        with casstore.use("gated", mode="record", cassette_dir=cassette_dir):
            openai_chat(llm_server, fake_key, "hello")
    before = llm_server.count
    monkeypatch.setenv("CI", "true")
    with pytest.raises(RecordingRefused, match="CASSTORE_ALLOW_RECORD=1") as info:
        with casstore.use("gated" if mode != "auto" else "missing", mode=mode, cassette_dir=cassette_dir):
            openai_chat(llm_server, fake_key, "hello")
    assert llm_server.count == before, "the stub saw a request"
    assert info.value.cassette in ("gated", "missing") and info.value.mode == mode


def test_ci_refuses_record_new_at_its_first_miss_and_serves_hits(
    cassette_dir: Path, llm_server: LLMServer, fake_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with casstore.use("rn", mode="record", cassette_dir=cassette_dir):
        openai_chat(llm_server, fake_key, "known")
    before = llm_server.count
    monkeypatch.setenv("CI", "1")
    with casstore.use("rn", mode="record-new", cassette_dir=cassette_dir) as s:
        assert openai_chat(llm_server, fake_key, "known").startswith("chat#1")
        with pytest.raises(RecordingRefused, match="met a call to record"):
            openai_chat(llm_server, fake_key, "unknown")
    assert llm_server.count == before and s.served == 1


def test_allow_record_lifts_the_gate_and_replay_needs_no_lift(
    cassette_dir: Path, llm_server: LLMServer, fake_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("CASSTORE_ALLOW_RECORD", "1")
    with casstore.use("lifted", mode="record", cassette_dir=cassette_dir):
        openai_chat(llm_server, fake_key, "hi")
    assert llm_server.count == 1
    monkeypatch.delenv("CASSTORE_ALLOW_RECORD")
    with casstore.use("lifted", cassette_dir=cassette_dir) as s:  # CI default: replay
        openai_chat(llm_server, fake_key, "hi")
    assert (s.mode, s.served, llm_server.count) == ("replay", 1, 1)


def test_a_recording_block_prints_one_spend_line_with_the_usage_tokens(
    cassette_dir: Path, llm_server: LLMServer, fake_key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with casstore.use("spend", mode="record", cassette_dir=cassette_dir):
        a = openai_chat(llm_server, fake_key, "one two")
        b = openai_chat(llm_server, fake_key, "three")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    # the stub reports prompt_tokens=5 and completion_tokens=<words of the reply>
    out_tokens = len(a.split()) + len(b.split())
    assert err[0] == (f"casstore: cassette 'spend': 2 live calls, {10 + out_tokens:,} tokens "
                      f"(10 in, {out_tokens} out)")
    with casstore.use("spend", mode="replay", cassette_dir=cassette_dir):
        openai_chat(llm_server, fake_key, "one two")
    assert capsys.readouterr().err == ""  # a replay spends nothing and says nothing


def test_drift_reports_the_same_tokens_as_recording(
    cassette_dir: Path, llm_server: LLMServer, fake_key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with casstore.use("spent", mode="record", cassette_dir=cassette_dir):
        openai_chat(llm_server, fake_key, "one two")
    recorded = [x for x in capsys.readouterr().err.splitlines() if "live call" in x]
    with pytest.warns(casstore.DriftWarning, match="cassette 'spent'"), \
            casstore.use("spent", mode="drift", cassette_dir=cassette_dir):
        openai_chat(llm_server, fake_key, "one two")  # the stub answers differently: a drift
    drifted = [x for x in capsys.readouterr().err.splitlines() if "live call" in x]
    assert len(recorded) == 1 and "tokens (5 in" in recorded[0], recorded
    assert drifted == recorded  # drift said "no token usage reported" for the same call
