"""casstore.model.scrub: one redaction pass over a finished entry (pure)."""

from __future__ import annotations

import json
import secrets
import string

from casstore.model.redaction import RuleSet
from casstore.model.scrub import redact_entry, redact_text


def _key() -> str:
    body = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(44)) + "aZ9"
    return "sk-" + "proj-" + body


def _anthropic_stream(text: str, width: int) -> list[str]:
    pieces = [text[i:i + width] for i in range(0, len(text), width)]
    chunks = ['event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1"}}\n\n']
    for p in pieces:
        delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}
        chunks.append(f"event: content_block_delta\ndata: {json.dumps(delta)}\n\n")
    chunks.append('event: message_stop\ndata: {"type":"message_stop"}\n\n')
    return chunks


def _joined_text(chunks: list[str]) -> str:
    out = []
    for c in chunks:
        data = json.loads(c.split("data: ", 1)[1])
        if data["type"] == "content_block_delta":
            out.append(data["delta"]["text"])
    return "".join(out)


def test_every_field_is_redacted_but_identity_and_the_recording_numbers() -> None:
    rules = RuleSet.from_config({"patterns": ["[0-9a-f]{64}", "2026-[0-9-]+T"]})
    key = _key()
    entry = {"identity": "a" * 64, "seq": 3, "recorded_at": "2026-11-20T10:00:00Z", "duration_ms": 12,
             "kind": "tool", "target": f"lookup {key}",
             "request": {"args": [key], "kwargs": {}},
             "response": {"error": {"type": "ValueError", "message": f"bad {key}", "args": [f"bad {key}"]}},
             "meta": {"note": key}}
    out, hits = redact_entry(entry, rules)
    assert {k: out[k] for k in ("identity", "seq", "recorded_at", "duration_ms")} == {
        k: entry[k] for k in ("identity", "seq", "recorded_at", "duration_ms")}
    assert key not in json.dumps(out)
    assert hits["openai-key"] == 5
    assert entry["target"] == f"lookup {key}"  # the input is never modified


def test_a_secret_spread_over_stream_events_is_masked_in_every_piece() -> None:
    key = _key()
    text = f"Sure, here it is: {key} (keep it safe)"
    chunks = _anthropic_stream(text, 5)
    assert all(key not in c for c in chunks)  # no single chunk shows it: a per-field scan cannot
    out, hits = redact_entry({"identity": "x", "response": {"status": 200, "stream": True, "chunks": chunks}},
                             RuleSet())
    new = out["response"]["chunks"]
    assert _joined_text(new) == "Sure, here it is: [REDACTED:openai-key] (keep it safe)"
    assert hits == {"openai-key": 1}
    assert new[0] == chunks[0] and new[-1] == chunks[-1]  # events without a piece stay byte for byte
    assert len(new) == len(chunks)


def test_a_secret_inside_one_event_is_counted_once() -> None:
    key = _key()
    chunks = _anthropic_stream(f"a {key} b", 500)
    out, hits = redact_entry({"identity": "x", "response": {"stream": True, "chunks": chunks}}, RuleSet())
    assert hits == {"openai-key": 1}
    assert _joined_text(out["response"]["chunks"]) == "a [REDACTED:openai-key] b"


def test_redact_text_masks_a_printed_line() -> None:
    key = _key()
    assert redact_text(f"GET http://h/x?q={key}&page=2") == "GET http://h/x?q=[REDACTED:openai-key]&page=2"
    assert redact_text("") == ""
