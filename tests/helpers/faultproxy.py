"""A fault-injecting HTTP proxy on 127.0.0.1, put in front of the moto S3 server by tests.

Each request is read in full, then a seeded RNG decides, with a configured share, to fail
it in one of four ways instead of (or after) forwarding it:

- ``500``: an S3 ``InternalError`` XML body with status 500;
- ``503``: an S3 ``SlowDown`` XML body with status 503;
- ``reset``: the TCP connection is reset (SO_LINGER 0, then close) without an answer;
- ``stall``: nothing is answered until ``stall_seconds`` pass (the client must time out).

With ``after_share`` a failure may also hit *after* the request reached the server (the
PUT happened, its answer is lost), which is what makes retries of writes interesting.
A fixed ``latency`` can be added to every request (benchmarks use 20 ms: real object stores
are latency-bound, moto alone is CPU-bound). Counters (``seen``, ``failed``, per kind) say what happened; the proxy is deterministic for
a seed and a request order.
"""

from __future__ import annotations

import http.client
import random
import socket
import socketserver
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from tests.helpers.loopback import LoopbackServer

__all__ = ["FaultProxy", "FaultPlan", "KINDS"]

KINDS = ("500", "503", "reset", "stall")
_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade", "expect",
        "transfer-encoding"}


def _s3_error(code: str, message: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message>"
        "<RequestId>fault-proxy</RequestId><HostId>fault-proxy</HostId></Error>"
    ).encode()


@dataclass
class FaultPlan:
    """What to inject: ``share`` of requests fail, by ``kinds`` (uniformly), seeded."""

    share: float = 0.0
    kinds: tuple[str, ...] = ("500", "503", "reset")
    seed: int = 0
    after_share: float = 0.0  # of the failures, this share hit after forwarding
    stall_seconds: float = 5.0
    latency: float = 0.0  # seconds added to every request (object stores are latency-bound)
    methods: tuple[str, ...] = ()  # only these methods fail (empty: all)
    path_contains: str = ""  # only requests whose path contains this fail

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}")


@dataclass
class _Counters:
    seen: int = 0
    failed: int = 0
    forwarded: int = 0
    by_kind: Counter = field(default_factory=Counter)
    by_method: Counter = field(default_factory=Counter)


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    proxy: FaultProxy


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
        pass

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = bytearray()
            while True:
                line = self.rfile.readline(65537)
                n = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if n == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(n)
                self.rfile.readline(65537)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _handle(self) -> None:
        proxy = self.server.proxy
        body = self._body()
        if proxy.plan.latency:
            time.sleep(proxy.plan.latency)
        fault, after = proxy._decide(self.command, self.path)
        if fault and not after:
            self._fail(fault)
            return
        status, reason, headers, payload = proxy._forward(self.command, self.path, self.headers, body)
        if fault:
            self._fail(fault)
            return
        self.send_response(status, reason)
        for k, v in headers:
            if k.lower() not in _HOP and k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _fail(self, kind: str) -> None:
        proxy = self.server.proxy
        if kind in ("500", "503"):
            code, msg = (("InternalError", "We encountered an internal error. Please try again.")
                         if kind == "500" else ("SlowDown", "Please reduce your request rate."))
            payload = _s3_error(code, msg)
            self.send_response(int(kind))
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)
            return
        if kind == "stall":
            proxy._stop.wait(proxy.plan.stall_seconds)
        # reset (and the end of a stall): RST, no answer
        self.close_connection = True
        self.wfile = _Discard()  # the handler must not write after the reset
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.rfile.close()
            self.connection.close()  # linger 0: the peer gets an RST, not a FIN
        except OSError:
            pass

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle  # noqa: N815


class _Discard:
    closed = False

    def write(self, data: bytes) -> int:
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class FaultProxy(LoopbackServer):
    """``with FaultProxy(upstream, FaultPlan(share=0.3, seed=1)) as p: p.url``."""

    def __init__(self, upstream: str, plan: FaultPlan | None = None) -> None:
        host_port = upstream.split("://", 1)[-1].rstrip("/")
        host, _, port = host_port.partition(":")
        if host not in ("127.0.0.1", "localhost"):
            raise ValueError("the fault proxy only forwards to the loopback interface")
        self.upstream = (host, int(port or 80))
        self.plan = plan or FaultPlan()
        self.counters = _Counters()
        self._rng = random.Random(self.plan.seed)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._local = threading.local()
        self._server = _Server(("127.0.0.1", 0), _Handler, bind_and_activate=True)
        self._server.proxy = self

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def set_plan(self, plan: FaultPlan) -> None:
        with self._lock:
            self.plan = plan
            self._rng = random.Random(plan.seed)

    def _decide(self, method: str, path: str) -> tuple[str | None, bool]:
        with self._lock:
            c = self.counters
            c.seen += 1
            c.by_method[method] += 1
            plan = self.plan
            eligible = (not plan.methods or method in plan.methods) and plan.path_contains in path
            # draw every time, so a request's fate does not depend on eligibility of others
            r, k, a = self._rng.random(), self._rng.randrange(len(plan.kinds)), self._rng.random()
            if not eligible or r >= plan.share:
                return None, False
            kind = plan.kinds[k]
            c.failed += 1
            c.by_kind[kind] += 1
            return kind, a < plan.after_share and kind != "stall"

    def _forward(self, method: str, path: str, headers, body: bytes):  # type: ignore[no-untyped-def]
        conn = http.client.HTTPConnection(*self.upstream, timeout=30)
        try:
            out = {k: v for k, v in headers.items() if k.lower() not in _HOP}
            out["Content-Length"] = str(len(body))
            conn.request(method, path, body=body if body or method in ("PUT", "POST") else None,
                         headers=out)
            resp = conn.getresponse()
            payload = resp.read()
            with self._lock:
                self.counters.forwarded += 1
            return resp.status, resp.reason, resp.getheaders(), payload
        finally:
            conn.close()

    thread_name = "fault-proxy"

    def stop(self) -> None:
        self._stop.set()
        super().stop()
