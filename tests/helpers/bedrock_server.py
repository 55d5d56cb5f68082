"""A fake Amazon Bedrock runtime on 127.0.0.1 that speaks the real wire format.

* ``POST /model/<model id>/converse`` — the Converse API's JSON answer;
* ``POST /model/<model id>/converse-stream`` — ``application/vnd.amazon.eventstream``:
  binary event-stream messages (prelude, string headers, JSON payload, CRC32s), sent
  with ``Transfer-Encoding: chunked``, one HTTP chunk per message, flushed one by one
  (messageStart, contentBlockDelta…, contentBlockStop, messageStop, metadata).

The messages are framed here, independently of casstore's codec, so botocore's own
parser (which checks both CRCs) judges what casstore replays. Every request is counted
(``count``) and kept (``seen``: method, path, headers, body). The reply text is
``"bedrock#<n> <model id>: <last user text>"``.
"""

from __future__ import annotations

import json
import struct
import zlib
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote

from tests.helpers.llm_server import LLMServer

__all__ = ["BedrockServer", "frame"]


def frame(event_type: str, payload: dict[str, Any]) -> bytes:
    """One event-stream message as Bedrock sends it."""
    headers = b""
    for name, value in ((":event-type", event_type), (":content-type", "application/json"), (":message-type", "event")):
        n, v = name.encode(), value.encode()
        headers += bytes([len(n)]) + n + bytes([7]) + struct.pack(">H", len(v)) + v
    body = json.dumps(payload, separators=(",", ":")).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + headers + body
    return message + struct.pack(">I", zlib.crc32(message))


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for msg in reversed(messages):
        if msg.get("role") == "user":
            return " ".join(str(part.get("text", "")) for part in msg.get("content") or [])
    return ""


class _Handler(BaseHTTPRequestHandler):
    server: Any
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet server
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        with self.server.lock:
            self.server.count += 1
            n = self.server.count
            self.server.seen.append(("POST", self.path, dict(self.headers.items()), raw))
        parts = unquote(self.path).strip("/").split("/")
        if len(parts) != 3 or parts[0] != "model":
            return self._json(404, {"message": f"no route {self.path}"})
        model, operation = parts[1], parts[2]
        body = json.loads(raw or b"{}")
        text = f"bedrock#{n} {model}: {_last_user_text(body.get('messages') or [])}"
        usage = {"inputTokens": 5, "outputTokens": len(text.split()), "totalTokens": 5 + len(text.split())}
        if operation == "converse":
            return self._json(200, {
                "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
                "stopReason": "end_turn",
                "usage": usage,
                "metrics": {"latencyMs": 7},
            })
        if operation == "converse-stream":
            pieces = [text[i : i + 8] for i in range(0, len(text), 8)]
            messages = [frame("messageStart", {"p": "abcd", "role": "assistant"})]
            messages += [frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": p}, "p": "abcdefgh"[: 1 + i % 8]})
                         for i, p in enumerate(pieces)]
            messages += [
                frame("contentBlockStop", {"contentBlockIndex": 0, "p": "ab"}),
                frame("messageStop", {"p": "abc", "stopReason": "end_turn"}),
                frame("metadata", {"metrics": {"latencyMs": 9}, "p": "a", "usage": usage}),
            ]
            self.send_response(200)
            self.send_header("content-type", "application/vnd.amazon.eventstream")
            self.send_header("transfer-encoding", "chunked")
            self.send_header("x-amzn-requestid", f"req-{n}")
            self.end_headers()
            for message in messages:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(message), message))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return None
        return self._json(404, {"message": f"no operation {operation}"})

    def _json(self, status: int, value: Any) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("x-amzn-requestid", f"req-{self.server.count}")
        self.end_headers()
        self.wfile.write(data)


class BedrockServer(LLMServer):
    """Start with :meth:`start` (or ``with``); ``url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self) -> None:
        super().__init__(_Handler)
