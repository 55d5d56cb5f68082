"""AWS event-stream messages in cassettes: split, kept readable when exact, written back byte for byte."""

from __future__ import annotations

import json
import struct
import zlib

from hypothesis import given
from hypothesis import strategies as st

from casstore.model import eventstream
from tests.helpers.bedrock_server import frame


def _message(headers: bytes, payload: bytes, *, bad_crc: bool = False) -> bytes:
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + headers + payload
    return body + struct.pack(">I", (zlib.crc32(body) + bad_crc) & 0xFFFFFFFF)


def _string_header(name: str, value: str) -> bytes:
    n, v = name.encode(), value.encode()
    return bytes([len(n)]) + n + bytes([7]) + struct.pack(">H", len(v)) + v


def test_bedrock_messages_are_readable_and_exact() -> None:
    messages = [frame("messageStart", {"role": "assistant", "p": "ab"}),
                frame("contentBlockDelta", {"delta": {"text": "Hé ✓"}, "contentBlockIndex": 0})]
    chunks = eventstream.encode_chunks(b"".join(messages))
    assert [c["eventstream"]["headers"][0] for c in chunks] == [[":event-type", "messageStart"], [":event-type", "contentBlockDelta"]]
    assert chunks[1]["eventstream"]["payload"] == '{"delta":{"text":"H\\u00e9 \\u2713"},"contentBlockIndex":0}'
    assert [eventstream.decode_chunk(json.loads(json.dumps(c, sort_keys=True))) for c in chunks] == messages
    assert eventstream.chunk_payload(chunks[1]) == {"event": "contentBlockDelta", "payload": {"delta": {"text": "Hé ✓"}, "contentBlockIndex": 0}}


def test_a_redacted_payload_is_still_a_valid_message() -> None:
    chunk = eventstream.encode_chunk(frame("contentBlockDelta", {"delta": {"text": "key sk-abc"}}))
    chunk["eventstream"]["payload"] = chunk["eventstream"]["payload"].replace("sk-abc", "[REDACTED]")
    data = eventstream.decode_chunk(chunk)
    total, headers_len, prelude_crc = struct.unpack_from(">III", data)
    assert total == len(data) and prelude_crc == zlib.crc32(data[:8])
    assert struct.unpack(">I", data[-4:])[0] == zlib.crc32(data[:-4])
    assert b"[REDACTED]" in data and b"sk-abc" not in data


def test_what_is_not_exact_text_is_kept_as_base64() -> None:
    int_header = bytes([4]) + b"n" + bytes([4]) + struct.pack(">i", 7)  # an int32 header
    odd = [
        _message(_string_header(":event-type", "x"), b'{"a":1}', bad_crc=True),  # CRC not as we write it
        _message(int_header, b"{}"),
        _message(_string_header(":event-type", "x"), b"\xff\xfe binary"),
    ]
    data = b"".join(odd) + odd[0][:7]  # and a stream cut short
    chunks = eventstream.encode_chunks(data)
    assert [set(c) for c in chunks] == [{"base64"}] * 4
    assert b"".join(eventstream.decode_chunk(c) for c in chunks) == data


@given(st.lists(st.tuples(st.lists(st.tuples(st.text(min_size=1, max_size=20), st.text(max_size=40)), max_size=4),
                          st.text(max_size=200)), max_size=6))
def test_any_string_message_round_trips(messages: list[tuple[list[tuple[str, str]], str]]) -> None:
    raw = [_message(b"".join(_string_header(n, v) for n, v in headers), payload.encode()) for headers, payload in messages]
    chunks = eventstream.encode_chunks(b"".join(raw))
    assert len(chunks) == len(raw)
    assert all("eventstream" in c for c in chunks)
    assert [eventstream.decode_chunk(c) for c in chunks] == raw
