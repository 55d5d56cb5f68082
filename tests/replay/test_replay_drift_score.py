"""Semantic drift: a scorer and a threshold judge LLM answers; the drift table shows the scores."""

from __future__ import annotations

from pathlib import Path

import pytest

import casstore
from casstore.errors import UsageError
from casstore.model.similarity import text_similarity
from tests.helpers.calls import openai_chat
from tests.helpers.llm_server import LLMServer


def test_the_builtin_scorer_is_word_similarity() -> None:
    assert text_similarity("Refund approved.", "refund APPROVED") == pytest.approx(1.0)
    assert text_similarity("Your refund was approved today", "Your refund was denied today") == pytest.approx(0.8)
    assert text_similarity("Refund approved.", "Shipping delayed.") == 0.0
    assert text_similarity("", "") == 1.0


def _record(cassette_dir: Path, server: LLMServer, key: str) -> None:
    with casstore.use("answers", mode="record", cassette_dir=cassette_dir):
        openai_chat(server, key, "is my refund approved")


def test_each_changed_answer_reports_its_score_and_the_table_is_printed(
    cassette_dir: Path, llm_server: LLMServer, fake_key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _record(cassette_dir, llm_server, fake_key)
    capsys.readouterr()
    # the stub's live answer differs from the recorded one by its request number only
    with pytest.warns(casstore.DriftWarning, match=r"score 0\.\d\d") as warned:
        with casstore.use("answers", mode="drift", cassette_dir=cassette_dir) as s:
            openai_chat(llm_server, fake_key, "is my refund approved")
    [item] = s.drift
    expected = text_similarity("chat#1 gpt-test t=None: is my refund approved", "chat#2 gpt-test t=None: is my refund approved")
    assert item.status == "changed" and item.seq == 0 and item.score == pytest.approx(expected)
    table = capsys.readouterr().err
    assert "seq  status   score  call" in table and f"0    changed  {expected:.2f}   llm POST" in table
    assert str(warned[0].message) in table


def test_a_threshold_turns_cosmetic_changes_into_similar_and_a_custom_scorer_decides(
    cassette_dir: Path, llm_server: LLMServer, fake_key: str
) -> None:
    _record(cassette_dir, llm_server, fake_key)
    with casstore.use("answers", mode="drift", cassette_dir=cassette_dir, threshold=0.8) as s:
        openai_chat(llm_server, fake_key, "is my refund approved")
    assert s.drift == [] and [i.status for i in s.similar] == ["similar"]  # no DriftWarning either
    seen: list[tuple[str, str]] = []

    def strict(recorded: str, live: str) -> float:
        seen.append((recorded, live))
        return 0.1

    with pytest.warns(casstore.DriftWarning):
        with casstore.use("answers", mode="drift", cassette_dir=cassette_dir, scorer=strict, threshold=0.8) as s:
            live = openai_chat(llm_server, fake_key, "is my refund approved")
    assert [(i.status, i.score) for i in s.drift] == [("changed", 0.1)]
    assert seen == [("chat#1 gpt-test t=None: is my refund approved", live)]
    with pytest.raises(UsageError, match="threshold"):
        casstore.use("answers", mode="drift", threshold=2)
    with pytest.raises(UsageError, match="must return a number from 0 to 1"):
        with casstore.use("answers", mode="drift", cassette_dir=cassette_dir, scorer=lambda a, b: 7):
            openai_chat(llm_server, fake_key, "is my refund approved")
