"""A fake LLM provider on 127.0.0.1 for tests: OpenAI and Anthropic wire formats.

Endpoints (all answers depend on the request, so a wrong replay is caught):

* ``POST /v1/chat/completions`` — OpenAI chat; ``stream: true`` answers Server-Sent
  Events ending in ``data: [DONE]``;
* ``POST /v1/responses`` — OpenAI Responses API;
* ``POST /v1/embeddings`` — OpenAI embeddings (floats or base64, as the SDK asks);
* ``POST /v1/messages`` — Anthropic messages; ``stream: true`` answers the event stream
  ``client.messages.stream()`` parses (message_start … message_stop);
* ``/echo`` (any method) — JSON echo of method, path, query, headers, body;
* ``/gzip`` — a gzip-encoded JSON echo; ``/bytes`` — binary body; ``/text`` — plain text;
* ``/status/<code>`` — answers that status; ``/redirect?to=<path>`` — a 302 to ``<path>``;
* ``/slow/...`` — any of the above, its stream events 200 ms apart; ``/slow/sse`` — five
  events 200 ms apart.

Every request is counted (``server.count``) and kept (``server.seen``). The reply text is
``"<prefix>#<n> <model> t=<temperature>: <last user text>"`` with ``n`` the request number.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import secrets
import ssl
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.helpers.loopback import LoopbackServer

__all__ = ["LLMServer"]


def _last_user_text(messages: Any) -> str:
    if isinstance(messages, str):
        return messages
    for msg in reversed(messages or []):
        if isinstance(msg, dict) and msg.get("role") == "user":
            content = msg.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(
                    str(part.get("text", "")) for part in content if isinstance(part, dict)
                )
    return ""


class _Handler(BaseHTTPRequestHandler):
    server: _Server  # type: ignore[assignment]
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet server
        pass

    # -- plumbing --------------------------------------------------------------------
    def _read(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.send_header("x-request-id", f"req_{self.n}")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, value: Any, *, style: str = "openai") -> None:
        if style == "openai":  # OpenAI pretty-prints, in its own key order
            text = json.dumps(value, indent=2)
        elif style == "sorted":
            text = json.dumps(value, sort_keys=True, separators=(",", ":"))
        else:  # Anthropic: compact, unsorted
            text = json.dumps(value, separators=(",", ":"))
        self._send(status, text.encode(), "application/json")

    def _sse(self, events: list[tuple[str | None, str]]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("x-request-id", f"req_{self.n}")
        self.end_headers()
        for i, (event, data) in enumerate(events):
            if i and self.gap:  # /slow/...: events self.gap seconds apart
                time.sleep(self.gap)
            chunk = (f"event: {event}\n" if event else "") + f"data: {data}\n\n"
            self.wfile.write(chunk.encode())
            self.wfile.flush()

    def _handle(self) -> None:
        raw = self._read()
        with self.server.lock:
            self.server.count += 1
            self.n = self.server.count
            self.server.seen.append((self.command, self.path, dict(self.headers.items()), raw))
        parts = urlsplit(self.path)
        path = parts.path
        self.gap = 0.2 if path.startswith("/slow/") else 0.0
        body: Any = None
        if raw and "json" in (self.headers.get("content-type") or ""):
            body = json.loads(raw)
        if path.endswith("/chat/completions"):
            return self._chat(body)
        if path.endswith("/responses"):
            return self._responses(body)
        if path.endswith("/embeddings"):
            return self._embeddings(body)
        if path.endswith("/v1/messages"):
            return self._messages(body)
        if path == "/slow/sse":  # five events, 200 ms apart
            return self._sse([(None, json.dumps({"i": i})) for i in range(5)])
        if path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            return self._json(code, {"error": {"message": f"status {code}", "type": "server_error"}})
        if path == "/redirect":  # 302 to the path in ?to=
            target = dict(parse_qsl(parts.query)).get("to", "/echo")
            return self._send(302, b"", "text/plain", {"location": target})
        if path == "/cookies":  # a login page: two cookies with fresh values and their attributes
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", "2")
            self.send_header("set-cookie", f"csrftoken={secrets.token_urlsafe(24)}; "
                             "expires=Sat, 27 Nov 2027 02:00:00 GMT; Max-Age=31449600; Path=/; SameSite=Lax")
            self.send_header("set-cookie", f"sessionid={secrets.token_hex(16)}; HttpOnly; Path=/")
            self.end_headers()
            self.wfile.write(b"{}")
            return None
        if path == "/bytes":
            data = hashlib.sha256(raw or b"x").digest() + bytes(range(256))
            return self._send(200, data, "application/octet-stream")
        if path == "/text":
            text = f"plain #{self.n}: {raw.decode('utf-8', 'replace')}\n  (trailing spaces)  \n"
            return self._send(200, text.encode(), "text/plain; charset=utf-8")
        echo = {
            "n": self.n,
            "method": self.command,
            "path": path,
            "query": sorted(parse_qsl(parts.query, keep_blank_values=True)),
            "body": raw.decode("utf-8", "replace"),
            "content_type": self.headers.get("content-type"),
        }
        if path == "/binary":  # the request's bytes inside a binary (not UTF-8) answer
            return self._send(200, b"\x89PNG\r\n\x1a\n\x00\xff" + raw + b"\x00", "application/octet-stream")
        if path == "/escaped":  # JSON as PHP's json_encode writes it: "\/" for "/", "\u002d" for "-"
            text = json.dumps(echo, sort_keys=True).replace("/", "\\/").replace("-", "\\u002d")
            return self._send(200, text.encode(), "application/json")
        if path == "/odd-encoding":  # a content-encoding nobody can undo, over the request's bytes
            return self._send(200, b"\x00\x01" + raw, "application/octet-stream", {"content-encoding": "x-odd"})
        if path == "/gzip":
            data = gzip.compress(json.dumps(echo, sort_keys=True, separators=(",", ":")).encode())
            return self._send(200, data, "application/json", {"content-encoding": "gzip"})
        return self._json(200, echo, style="sorted")

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

    # -- providers --------------------------------------------------------------------------
    def _reply(self, body: dict[str, Any], messages: Any, prefix: str) -> str:
        return f"{prefix}#{self.n} {body.get('model')} t={body.get('temperature')}: {_last_user_text(messages)}"

    def _chat(self, body: dict[str, Any]) -> None:
        text = self._reply(body, body.get("messages"), "chat")
        model = body.get("model")
        if body.get("stream"):
            pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
            events: list[tuple[str | None, str]] = []
            for i, piece in enumerate(pieces):
                delta = {"role": "assistant", "content": piece} if i == 0 else {"content": piece}
                chunk = {
                    "id": f"chatcmpl-{self.n}",
                    "object": "chat.completion.chunk",
                    "created": 1700000000 + self.n,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                }
                events.append((None, json.dumps(chunk)))
            final = {
                "id": f"chatcmpl-{self.n}",
                "object": "chat.completion.chunk",
                "created": 1700000000 + self.n,
                "model": model,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            }
            events.append((None, json.dumps(final)))
            events.append((None, "[DONE]"))
            return self._sse(events)
        self._json(
            200,
            {
                "id": f"chatcmpl-{self.n}",
                "object": "chat.completion",
                "created": 1700000000 + self.n,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text, "refusal": None},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": len(text.split()), "total_tokens": 5 + len(text.split())},
                "system_fingerprint": f"fp_{self.n}",
            },
        )

    def _responses(self, body: dict[str, Any]) -> None:
        text = self._reply(body, body.get("input"), "resp")
        self._json(
            200,
            {
                "id": f"resp_{self.n}",
                "object": "response",
                "created_at": 1700000000 + self.n,
                "status": "completed",
                "model": body.get("model"),
                "output": [
                    {
                        "type": "message",
                        "id": f"msg_{self.n}",
                        "status": "completed",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": []}],
                    }
                ],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
            },
        )

    def _embeddings(self, body: dict[str, Any]) -> None:
        inputs = body.get("input")
        inputs = inputs if isinstance(inputs, list) else [inputs]
        data = []
        for i, item in enumerate(inputs):
            digest = hashlib.sha256(json.dumps(item).encode()).digest()
            vector = [b / 255.0 for b in digest[:8]]
            emb: Any = vector
            if body.get("encoding_format") == "base64":
                emb = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
            data.append({"object": "embedding", "index": i, "embedding": emb})
        self._json(200, {"object": "list", "data": data, "model": body.get("model"), "usage": {"prompt_tokens": 2, "total_tokens": 2}})

    def _messages(self, body: dict[str, Any]) -> None:
        text = self._reply(body, body.get("messages"), "claude")
        message = {
            "id": f"msg_{self.n}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 5, "output_tokens": len(text.split())},
        }
        if not body.get("stream"):
            return self._json(200, message, style="anthropic")
        start = dict(message, content=[], stop_reason=None, usage={"input_tokens": 5, "output_tokens": 1})
        pieces = [text[i : i + 9] for i in range(0, len(text), 9)]
        events: list[tuple[str | None, str]] = [
            ("message_start", json.dumps({"type": "message_start", "message": start})),
            ("content_block_start", json.dumps({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})),
            ("ping", json.dumps({"type": "ping"})),
        ]
        for piece in pieces:
            events.append(
                ("content_block_delta", json.dumps({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}))
            )
        events += [
            ("content_block_stop", json.dumps({"type": "content_block_stop", "index": 0})),
            (
                "message_delta",
                json.dumps({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": len(text.split())}}),
            ),
            ("message_stop", json.dumps({"type": "message_stop"})),
        ]
        self._sse(events)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.lock = threading.Lock()
        self.count = 0
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []


class LLMServer(LoopbackServer):
    """Start with :meth:`start` (or as a context manager); ``url`` is ``http://127.0.0.1:<port>``
    (``https://`` when given a server ``tls`` context: tests/replay/test_replay_https.py)."""

    thread_name = "llm-server"

    def __init__(self, handler: type[BaseHTTPRequestHandler] = _Handler, tls: ssl.SSLContext | None = None) -> None:
        self._handler = handler  # another provider's wire format (tests/helpers/bedrock_server.py)
        self._tls = tls
        self._server: _Server | None = None
        self.port = 0

    def _bind(self) -> _Server:
        server = _Server(self._handler)
        if self._tls is not None:  # the handshake happens in the handler's thread, not in accept()
            server.socket = self._tls.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        self.port = server.server_address[1]
        return server

    def start(self) -> LLMServer:
        self._server = None  # a fresh server (and port) each start, as before
        return super().start()

    @property
    def url(self) -> str:
        return f"{'https' if self._tls is not None else 'http'}://127.0.0.1:{self.port}"

    @property
    def count(self) -> int:
        return self._server.count if self._server is not None else 0

    @property
    def seen(self) -> list[tuple[str, str, dict[str, str], bytes]]:
        return list(self._server.seen) if self._server is not None else []
