"""`casstore fork NAME --at K --set PATH=VALUE --as NEW`, replayed with the real OpenAI SDK."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from casstore.replay.api import use
from tests.helpers.llm_server import LLMServer


def _agent(server: LLMServer, key: str) -> list[str]:
    """Two steps: the second asks about the first answer (so changing it changes step two)."""
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)
    first = client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "plan"}])
    plan = first.choices[0].message.content or ""
    second = client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": f"do: {plan}"}])
    return [plan, second.choices[0].message.content or ""]


def _record(repo: Path, server: LLMServer, key: str) -> Path:
    path = repo / "tests" / "cassettes" / "parent.json"
    with use("parent", mode="record", path=path):
        _agent(server, key)
    return path


def test_a_fork_with_status_429_replays_as_such(
    repo: Path, casstore, llm_server: LLMServer, fake_key: str, replay_env: None  # type: ignore[no-untyped-def]
) -> None:
    _record(repo, llm_server, fake_key)
    r = casstore("fork", "parent", "--at", "1", "--set", "response.status=429", "--set",
                 "response.headers.retry-after=7", "--as", "rate_limited", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert "forked parent at call 1 -> tests/cassettes/rate_limited.json (2 entries)" in r.stdout
    data = json.loads((repo / "tests" / "cassettes" / "rate_limited.json").read_text())
    assert data["meta"]["fork"]["parent"] == "parent" and data["meta"]["fork"]["at"] == 1
    assert data["meta"]["fork"]["parent_digest"].startswith("sha256:") and "fingerprint" not in data["meta"]
    before = llm_server.count
    with use("rate_limited", mode="replay"):
        with pytest.raises(openai.RateLimitError) as info:
            _agent(llm_server, fake_key)
    assert info.value.status_code == 429 and info.value.response.headers["retry-after"] == "7"
    assert llm_server.count == before
    r = casstore("show", "rate_limited", cwd=repo)  # not pinned: show names only pinned ones
    assert r.exit_code != 0


def test_replaying_a_fork_in_record_new_records_only_the_diverging_tail(
    repo: Path, casstore, llm_server: LLMServer, fake_key: str, replay_env: None  # type: ignore[no-untyped-def]
) -> None:
    _record(repo, llm_server, fake_key)
    r = casstore("fork", "parent", "--at", "0", "--set", "response.json.choices.0.message.content=cancel everything",
                 "--as", "what_if", cwd=repo)
    assert r.exit_code == 0, r.stderr
    before = llm_server.count
    with use("what_if", mode="record-new") as s:
        plan, done = _agent(llm_server, fake_key)
    assert plan == "cancel everything"
    assert llm_server.count == before + 1 and s.served == 1  # the prefix is never paid for again
    assert done.endswith("do: cancel everything")
    entries = json.loads((repo / "tests" / "cassettes" / "what_if.json").read_text())["entries"]
    assert len(entries) == 2 and "cancel everything" in json.dumps(entries[1]["request"])


def test_fork_refuses_bad_input_with_exit_2(
    repo: Path, casstore, llm_server: LLMServer, fake_key: str, replay_env: None  # type: ignore[no-untyped-def]
) -> None:
    _record(repo, llm_server, fake_key)
    for args, message in (
        (["nope", "--at", "0", "--set", "response.status=500", "--as", "x"], "no cassette 'nope'"),
        (["parent", "--at", "5", "--set", "response.status=500", "--as", "x"], "has calls 0..1"),
        (["parent", "--at", "0", "--set", "request.url=x", "--as", "x"], "under 'response.'"),
        (["parent", "--at", "0", "--set", "response.json.nothing.here=1", "--as", "x"], "no field 'nothing'"),
        # a list index is ASCII digits: "²" raised ValueError (str.isdigit() is true for it), "٠" was item 0
        (["parent", "--at", "0", "--set", "response.json.choices.\u00b2.index=1", "--as", "x"], "no item '\u00b2'"),
        (["parent", "--at", "0", "--set", "response.json.choices.\u0660.index=1", "--as", "x"], "no item '\u0660'"),
        # ... and at most 18 of them: 5000 raised ValueError (int()'s 4300-digit limit)
        (["parent", "--at", "0", "--set", "response.json.choices." + "1" * 5000 + ".index=1", "--as", "x"], "no item '111"),
        (["parent", "--at", "0", "--set", "response.status=500", "--as", "parent"], "exists"),
    ):
        r = casstore("fork", *args, cwd=repo)
        assert r.exit_code == 2 and message in r.stderr + r.stdout, (args, r.stdout, r.stderr)


def test_a_secret_set_by_fork_is_never_printed_or_written(
    repo: Path, casstore, llm_server: LLMServer, fake_key: str, replay_env: None  # type: ignore[no-untyped-def]
) -> None:
    """`--set` with a credential (a webhook answer, a leaked key in a message): fork prints
    and writes its placeholder, as a recording would; `add` then pins the fork (#16)."""
    from tests.helpers.fakes import openai_key

    _record(repo, llm_server, fake_key)
    secret = openai_key()
    r = casstore("fork", "parent", "--at", "0", "--set", f"response.json.choices.0.message.content=use {secret}",
                 "--set", f"response.headers.x-api-key={secret}", "--as", "leaky_fork", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert "  set response.json.choices.0.message.content=use [REDACTED:openai-key]" in r.stdout
    path = repo / "tests" / "cassettes" / "leaky_fork.json"
    text = path.read_text()
    data = json.loads(text)
    assert data["meta"]["fork"]["set"][0].endswith("=use [REDACTED:openai-key]")
    assert data["entries"][0]["response"]["headers"]["x-api-key"] == "[REDACTED:api-key]"
    assert data["redaction"]["hits"].get("openai-key", 0) >= 2
    bad = casstore("fork", "parent", "--at", "0", "--set", f"request.x={secret}", "--as", "x", cwd=repo)
    assert bad.exit_code == 2 and "[REDACTED:openai-key]" in bad.stderr
    for out in (r.stdout + r.stderr, text, bad.stdout + bad.stderr):
        assert secret not in out and secret[8:40] not in out
    added = casstore("add", str(path), cwd=repo)
    assert added.exit_code == 0, added.stdout + added.stderr
