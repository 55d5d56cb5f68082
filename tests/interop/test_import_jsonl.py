"""``casstore import jsonl``: production call logs replay under casstore.use() with the real SDKs.

The SDKs (openai, anthropic) and their HTTP stacks are the real ones; their base URLs point
at 127.0.0.1:9, where nothing listens, and ``CASSTORE_OFFLINE=1`` is set: every answer must
come from the imported cassette.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
import requests

import casstore as cs
from casstore.model.cassette import load_file

pytestmark = pytest.mark.usefixtures("replay_env")

DEAD = "http://127.0.0.1:9"  # nothing listens here: a call that escapes replay fails at once
BASES = ("--base-url", f"openai={DEAD}/v1", "--base-url", f"anthropic={DEAD}")

TOOLS = [{"type": "function", "function": {"name": "lookup_order", "parameters": {
    "type": "object", "properties": {"order_id": {"type": "integer"}}}}}]


def _chat_response(text: str, n: int) -> dict[str, Any]:
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1762000000 + n, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}}


def _trace_lines() -> list[dict[str, Any]]:
    """What a production logger writes: one call a line, in the providers' own shapes."""
    stream_chunks = [
        {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1762000100, "model": "gpt-4o-mini",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": piece}, "finish_reason": None}]}
        for piece in ("Ship", "ped ", "today")
    ] + [{"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1762000100, "model": "gpt-4o-mini",
          "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    return [
        {"kind": "llm", "model": "gpt-4o-mini", "timestamp": "2026-11-01T10:00:00Z", "prompt_hash": "ab12",
         "request": {"messages": [{"role": "user", "content": "where is order 7?"}], "temperature": 0.0, "tools": TOOLS},
         "response": _chat_response("Order 7 shipped.", 1)},
        {"kind": "llm", "model": "gpt-4o-mini", "timestamp": 1793536200,
         "request": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "where is order 7?"}],
                     "temperature": 0.7, "tools": TOOLS},
         "response": _chat_response("It is on its way!", 2)},
        {"kind": "tool", "tool": "lookup_order", "request": {"order_id": 7},
         "response": {"status": "shipped", "eta": "2026-11-03"}, "timestamp": "2026-11-01T10:00:01+00:00"},
        {"kind": "tool", "tool": "lookup_order", "request": {"order_id": 8}, "error": "order 8 not found",
         "timestamp": "2026-11-01T10:00:02Z"},
        {"model": "claude-haiku-4-5", "ts": "Sun, 01 Nov 2026 10:00:03 GMT",
         "request": {"max_tokens": 64, "messages": [{"role": "user", "content": "classify: refund please"}]},
         "response": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
                      "content": [{"type": "text", "text": "refund"}], "stop_reason": "end_turn",
                      "stop_sequence": None, "usage": {"input_tokens": 6, "output_tokens": 1}}},
        {"model": "gpt-4o-mini", "timestamp": "2026-11-01T10:00:04Z",
         "request": {"input": "say hi", "model": "gpt-4o-mini"},
         "response": {"id": "resp_1", "object": "response", "created_at": 1762000004, "status": "completed",
                      "model": "gpt-4o-mini", "output": [{"type": "message", "id": "msg_9", "status": "completed",
                                                          "role": "assistant", "content": [
                                                              {"type": "output_text", "text": "hi!", "annotations": []}]}],
                      "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}},
        {"model": "gpt-4o-mini", "timestamp": "2026-11-01T10:00:05Z",
         "request": {"messages": [{"role": "user", "content": "stream it"}], "stream": True},
         "response": stream_chunks},
    ]


def _write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _agent(key: str) -> list[Any]:
    """The code under test, with the real SDKs."""
    oai = openai.OpenAI(base_url=DEAD + "/v1", api_key=key, max_retries=0)
    ant = anthropic.Anthropic(base_url=DEAD, api_key=key, max_retries=0)
    lookup = cs.tool("lookup_order", lambda order_id: pytest.fail("the tool ran during replay"))
    out: list[Any] = []
    for temperature in (0, 0.7):
        chat = oai.chat.completions.create(model="gpt-4o-mini", temperature=temperature, tools=TOOLS,
                                           messages=[{"role": "user", "content": "where is order 7?"}])
        out.append(chat.choices[0].message.content)
    out.append(lookup(order_id=7))
    with pytest.raises(RuntimeError, match="order 8 not found"):
        lookup(order_id=8)
    msg = ant.messages.create(model="claude-haiku-4-5", max_tokens=64,
                              messages=[{"role": "user", "content": "classify: refund please"}])
    out.append(msg.content[0].text)
    out.append(oai.responses.create(model="gpt-4o-mini", input="say hi").output_text)
    stream = oai.chat.completions.create(model="gpt-4o-mini", stream=True,
                                         messages=[{"role": "user", "content": "stream it"}])
    out.append("".join(c.choices[0].delta.content or "" for c in stream))
    return out


def test_traces_replay_with_the_real_sdks_offline(
    tmp_path: Path, repo: Path, casstore: Any, fake_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = _write_jsonl(tmp_path / "prod-2026-11-01.jsonl", _trace_lines())
    r = casstore("import", "jsonl", str(traces), "--name", "prod/orders", *BASES, "--add", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert "7 entries (5 llm, 2 tool)" in r.stdout
    assert "pinned prod/orders sha256:" in r.stdout

    cas = load_file(repo / "tests" / "cassettes" / "prod" / "orders.json")
    assert [e["recorded_at"] for e in cas.entries] == [
        "2026-11-01T10:00:00Z", "2026-11-01T12:30:00Z", "2026-11-01T10:00:01Z", "2026-11-01T10:00:02Z",
        "2026-11-01T10:00:03Z", "2026-11-01T10:00:04Z", "2026-11-01T10:00:05Z"]
    assert cas.entries[0]["meta"]["source"] == "prod-2026-11-01.jsonl:1"
    assert cas.models() == ["claude-haiku-4-5", "gpt-4o-mini"]
    assert cas.entries[4]["target"] == f"POST {DEAD}/v1/messages"
    assert cas.entries[6]["response"]["stream"] is True

    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with cs.use("prod/orders", mode="replay") as session:
        out = _agent(fake_key)
    assert out == ["Order 7 shipped.", "It is on its way!", {"status": "shipped", "eta": "2026-11-03"},
                   "refund", "hi!", "Shipped today"]
    assert session.served == 7 and session.live == 0


def test_default_endpoints_are_the_providers_public_apis(tmp_path: Path, repo: Path, casstore: Any) -> None:
    traces = _write_jsonl(tmp_path / "t.jsonl", _trace_lines())
    assert casstore("import", "jsonl", str(traces), "--name", "public", cwd=repo).exit_code == 0
    targets = [e["target"] for e in load_file(repo / "tests" / "cassettes" / "public.json").entries]
    assert targets == ["POST https://api.openai.com/v1/chat/completions"] * 2 + ["lookup_order"] * 2 + [
        "POST https://api.anthropic.com/v1/messages", "POST https://api.openai.com/v1/responses",
        "POST https://api.openai.com/v1/chat/completions"]


def test_map_reads_other_shapes(tmp_path: Path, repo: Path, casstore: Any, fake_key: str,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A tracing tool's own shape, mapped with dot-paths (lists indexed by number)."""
    records = [
        {"type": "generation", "startTime": "2026-10-30T08:00:00.123Z",
         "metadata": {"provider": "anthropic"},
         "input": {"payload": {"model": "claude-haiku-4-5", "max_tokens": 32,
                               "messages": [{"role": "user", "content": f"q{i}"}]}},
         "output": [{"id": f"msg_{i}", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
                     "content": [{"type": "text", "text": f"a{i}"}], "stop_reason": "end_turn",
                     "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}]}
        for i in range(3)
    ]
    traces = _write_jsonl(tmp_path / "langfuse.jsonl", records)
    r = casstore("import", "jsonl", str(traces), "--name", "mapped", "--base-url", f"anthropic={DEAD}",
                 "--map", "request=input.payload", "--map", "response=output.0", "--map", "timestamp=startTime",
                 "--map", "api=metadata.provider", "--json", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert r.json[0]["kinds"] == {"llm": 3}
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    ant = anthropic.Anthropic(base_url=DEAD, api_key=fake_key, max_retries=0)
    with cs.use("mapped", mode="replay"):
        answers = [ant.messages.create(model="claude-haiku-4-5", max_tokens=32,
                                       messages=[{"role": "user", "content": f"q{i}"}]).content[0].text
                   for i in (2, 0, 1)]
    assert answers == ["a2", "a0", "a1"]


def test_http_records(tmp_path: Path, repo: Path, casstore: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    traces = _write_jsonl(tmp_path / "http.jsonl", [
        {"kind": "http", "request": {"method": "POST", "url": f"{DEAD}/orders?id=7", "body": {"a": 1},
                                     "headers": {"Accept": "*/*", "User-Agent": "logged-ua/1.0"}},
         "response": {"status": 201, "headers": {"content-type": "application/json"}, "body": {"created": True}}},
        {"kind": "http", "request": {"method": "GET", "url": f"{DEAD}/logo", "headers": [["accept", "*/*"]]},
         "response": {"status": 200, "headers": {"content-type": "image/png"}, "body": {"base64": "iVBORw0KGgo="}}},
    ])
    assert casstore("import", "jsonl", str(traces), "--name", "http", cwd=repo).exit_code == 0
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with cs.use("http", mode="replay"):
        created = requests.post(f"{DEAD}/orders?id=7", json={"a": 1}, timeout=5)
        logo = requests.get(f"{DEAD}/logo", timeout=5)
    assert created.status_code == 201 and created.json() == {"created": True}
    assert logo.content == b"\x89PNG\r\n\x1a\n"


# -- malformed input ------------------------------------------------------------------------------


def _state(repo: Path) -> tuple[list[str], str | None]:
    files = sorted(p.relative_to(repo).as_posix() for p in (repo / "tests" / "cassettes").rglob("*") if p.is_file())
    lock = repo / "casstore.lock"
    return files, lock.read_text() if lock.exists() else None


@pytest.mark.parametrize(("line", "expected"), [
    ('{"request": {"messages": []}, "response": {"object": "chat.completion"}\n', "not valid JSON: column"),
    ('["a", "list"]\n', "expected a JSON object, got list"),
    ('{"model": "gpt-4o-mini", "response": {"object": "chat.completion"}}\n',
     "no request body object (looked at 'request', 'input'; map it with --map request=PATH)"),
    ('{"request": {"model": "m", "messages": []}}\n', "no response"),
    ('{"kind": "tool", "request": {"x": 1}, "response": 2}\n', "needs the tool's name"),
    ('{"request": {"model": "m", "messages": []}, "response": {}, "timestamp": "yesterday"}\n', "not a date"),
    # a valid ISO date that is out of range in UTC: astimezone raised OverflowError
    ('{"request": {"model": "m", "messages": []}, "response": {}, "timestamp": "0001-01-01T00:00:00+01:00"}\n', "not a date"),
    ('{"request": {"model": "m", "messages": []}, "response": {}, "api": "cohere"}\n', "unknown api 'cohere'"),
    ('{"request": {"model": "m", "messages": [], "x": NaN}, "response": {}}\n', "NaN"),
    # both outcomes of one call: keeping one would lose the other without a word (#16)
    ('{"kind": "tool", "tool": "t", "request": {"a": 1}, "response": {"ok": true}, "error": {"message": "boom"}}\n',
     "has both a response ('response', 'output') and an error ('error')"),
    ('{"request": {"model": "m", "messages": []}, "response": {"object": "chat.completion"}, "error": "429"}\n',
     "has both a response"),
    # str.isdigit() / isalpha() take any Unicode digit or letter: "²00" (int() fails on it), "٢٠١" (int() reads 201),
    # a method in Cyrillic letters
    ('{"kind": "http", "request": {"method": "GET", "url": "http://127.0.0.1:9/x"}, "response": {"status": "2\u00b200"}}\n',
     "status must be an HTTP status code"),
    ('{"kind": "http", "request": {"method": "GET", "url": "http://127.0.0.1:9/x"}, "response": {"status": "\u0662\u0660\u0661"}}\n',
     "status must be an HTTP status code"),
    ('{"kind": "http", "request": {"method": "\u041f\u041e\u0421\u0422", "url": "http://127.0.0.1:9/x"}, "response": {}}\n',
     "request.method must be an HTTP method"),
    # 5000 ASCII digits: int() raised ValueError (its 4300-digit limit), "cannot be read"
    ('{"kind": "http", "request": {"method": "GET", "url": "http://127.0.0.1:9/x"}, "response": {"status": "' + "2" * 5000 + '"}}\n',
     "status must be an HTTP status code"),
])
def test_a_malformed_line_is_reported_with_file_and_line(
    tmp_path: Path, repo: Path, casstore: Any, line: str, expected: str
) -> None:
    good = [json.dumps(r) + "\n" for r in _trace_lines()]
    first = tmp_path / "a.jsonl"
    first.write_text("".join(good))
    second = tmp_path / "b.jsonl"
    second.write_text(good[0] + "\n" + line + good[1])  # a blank line still counts: the bad one is line 3
    before = _state(repo)
    r = casstore("import", "jsonl", str(first), str(second), "--name", "half", "--add", cwd=repo)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: b.jsonl:3: "), r.stderr
    assert expected in r.stderr
    assert _state(repo) == before  # nothing written, nothing pinned


def test_usage_errors(tmp_path: Path, repo: Path, casstore: Any) -> None:
    traces = _write_jsonl(tmp_path / "t.jsonl", _trace_lines())
    r = casstore("import", "jsonl", str(traces), cwd=repo)
    assert r.exit_code == 2 and "--name" in r.stderr
    r = casstore("import", "jsonl", str(traces), "--name", "x", "--map", "prompt=input", cwd=repo)
    assert r.exit_code == 2 and "unknown field 'prompt'" in r.stderr
    r = casstore("import", "jsonl", str(traces), "--name", "x", "--map", "request", cwd=repo)
    assert r.exit_code == 2 and "expected FIELD=PATH" in r.stderr
    r = casstore("import", "jsonl", str(traces), "--name", "x", "--base-url", "ftp://nope", cwd=repo)
    assert r.exit_code == 2 and "--base-url" in r.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    r = casstore("import", "jsonl", str(empty), "--name", "x", cwd=repo)
    assert r.exit_code == 2 and "no call records" in r.stderr
    # a list index in a --map path is ASCII digits: "²" raised "invalid literal for int()",
    # "٠" was read as index 0; each now names nothing, and the record has no request there
    listed = _write_jsonl(tmp_path / "listed.jsonl", [{"input": [{"model": "m", "messages": []}],
                                                       "response": {"object": "chat.completion"}}])
    assert casstore("import", "jsonl", str(listed), "--name", "x", "--map", "request=input.0", cwd=repo).exit_code == 0
    for index in ("\u00b2", "\u0660", "0" * 5000):  # 5000 digits: int()'s digit limit, a ValueError
        r = casstore("import", "jsonl", str(listed), "--name", "x", "--map", f"request=input.{index}", cwd=repo)
        assert r.exit_code == 2 and "no request body object" in r.stderr, r.stderr


def test_add_that_cannot_sign_leaves_no_new_working_copy(tmp_path: Path, repo: Path, casstore: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    traces = _write_jsonl(tmp_path / "t.jsonl", _trace_lines())
    before = _state(repo)
    monkeypatch.setenv("CASSTORE_CONFIG_DIR", str(tmp_path / "a-user-without-a-key"))
    r = casstore("import", "jsonl", str(traces), "--name", "unsigned", "--add", cwd=repo)
    assert r.exit_code in (1, 2) and "Traceback" not in r.stderr, r.stderr
    assert "key" in r.stderr
    assert _state(repo) == before  # nothing pinned, and no working copy left behind


def test_a_record_with_both_outcomes_imports_once_the_user_picks_one(tmp_path: Path, repo: Path, casstore: Any) -> None:
    """The refusal says how to keep the response: point --map error at a field that is not there."""
    src = _write_jsonl(tmp_path / "t.jsonl", [
        {"kind": "tool", "tool": "t", "request": {"a": 1}, "response": {"ok": True}, "error": {"message": "boom"}},
    ])
    r = casstore("import", "jsonl", str(src), "--name", "both", "--map", "error=none", cwd=repo)
    assert r.exit_code == 0, r.stdout + r.stderr
    entries = load_file(repo / "tests" / "cassettes" / "both.json").entries
    assert [e["response"] for e in entries] == [{"result": {"ok": True}}]
