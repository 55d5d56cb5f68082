"""The ``http.client`` adapter (and so ``urllib.request``): inside a block ``endheaders``
keeps the request and ``getresponse`` asks the session (urllib3's connections are left to its adapter).
"""

from __future__ import annotations

import http.client
import io
import sys
from collections.abc import Callable
from typing import Any

from ..errors import ClientNotSupported
from ..model.recording import encode_response
from .guard import origin
from .hook import genuine
from .policy import CLOSE, SEND, SERVE, Patch, begin_http, drive, live_call, route
from .wire import (
    Sink,
    check_fault,
    is_streamed,
    served,
    served_live,
    served_sync,
    wire_file,
)

__all__ = ["http_response", "TeeFile", "dechunk", "check", "patches"]

_FAILURES = (OSError, http.client.HTTPException)
_STATE = "_HTTPConnection__state"
_CHECKED = False


def _is_https(conn: Any) -> bool:
    cls = genuine(http.client, "HTTPSConnection")  # absent without ssl
    return cls is not None and isinstance(conn, cls)


class _Sock:
    """Just enough of a socket for ``http.client.HTTPResponse`` to read from bytes."""

    def __init__(self, data: Any) -> None:
        self._data = data  # a file of the response bytes (paced when the block is timed)

    def makefile(self, *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(self._data)


def http_response(s: Any, method: str, url: str | None = None) -> http.client.HTTPResponse:
    """A served response as a real ``http.client.HTTPResponse`` (headers read)."""
    response = http.client.HTTPResponse(_Sock(wire_file(s)), method=method, url=url)  # type: ignore[arg-type]
    response.begin()
    return response


def dechunk(raw: bytes) -> bytes:
    """The payload of ``Transfer-Encoding: chunked`` bytes (as much as is complete)."""
    out: list[bytes] = []
    pos = 0
    while True:
        end = raw.find(b"\r\n", pos)
        if end < 0:
            break
        try:
            size = int(raw[pos:end].split(b";", 1)[0].strip() or b"0", 16)
        except ValueError:
            break
        if size == 0:
            break
        start = end + 2
        out.append(raw[start : start + size])
        if start + size > len(raw):
            break
        pos = start + size + 2
    return b"".join(out)


class TeeFile:
    """A response's socket file whose every byte read is also given to ``sink``."""

    def __init__(self, fp: Any, sink: Sink, chunked: bool) -> None:
        self._fp, self._sink = fp, sink
        if chunked:
            sink.decode = dechunk
        self._done = False

    def _keep(self, data: Any) -> Any:
        if data:
            self._sink.add(bytes(data))
        return data

    def read(self, *args: Any) -> bytes:
        return self._keep(self._fp.read(*args))  # type: ignore[no-any-return]

    def read1(self, *args: Any) -> bytes:
        return self._keep(self._fp.read1(*args))  # type: ignore[no-any-return]

    def readline(self, *args: Any) -> bytes:
        return self._keep(self._fp.readline(*args))  # type: ignore[no-any-return]

    def readinto(self, buffer: Any) -> int:
        n = self._fp.readinto(buffer)
        if n:
            self._sink.add(bytes(memoryview(buffer)[:n]))
        return n  # type: ignore[no-any-return]

    def close(self) -> None:
        try:
            self._fp.close()
        finally:
            if not self._done:
                self._done = True
                self._sink.done()

    def __getattr__(self, name: str) -> Any:  # peek, closed, fileno, flush, ...
        return getattr(self._fp, name)


class _Pending:
    """A request kept by ``endheaders`` until ``getresponse`` decides where it goes."""

    __slots__ = ("session", "method", "url", "headers", "first", "extra", "encode_chunked", "sent")

    def __init__(self, session: Any, method: str, url: str, headers: list[tuple[str, str]], first: Any, encode_chunked: bool) -> None:
        self.session, self.method, self.url, self.headers = session, method, url, headers
        self.extra: list[Any] = []
        self.first, self.encode_chunked, self.sent = first, encode_chunked, False

    def body(self) -> bytes:
        pieces = self.first if isinstance(self.first, list) else [self.first]
        return b"".join(p for p in [*pieces, *self.extra] if p)


def _bytes(data: Any) -> Any:
    """Body data as bytes (a list of bytes for an iterable), read once so it can be sent later."""
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode("iso-8859-1")
    if hasattr(data, "read"):
        chunks = []
        while block := data.read(8192):
            chunks.append(block.encode("iso-8859-1") if isinstance(block, str) else bytes(block))
        return b"".join(chunks)
    try:
        return bytes(memoryview(data))
    except TypeError:
        return [p.encode("iso-8859-1") if isinstance(p, str) else bytes(p) for p in data]


def _target(conn: Any, line: str) -> tuple[str, str]:
    method, _, rest = line.partition(" ")
    path = rest.rsplit(" ", 1)[0] if rest.count(" ") else rest
    if path.startswith(("http://", "https://")):
        return method, path
    scheme = "https" if _is_https(conn) else "http"
    host = getattr(conn, "_tunnel_host", None) or conn.host
    port = (getattr(conn, "_tunnel_port", None) if getattr(conn, "_tunnel_host", None) else conn.port) or conn.default_port
    return method, origin(scheme, host, port) + (path or "/")


def _parse_buffer(conn: Any) -> tuple[str, str, list[tuple[str, str]]]:
    lines = [b.decode("latin-1") for b in conn._buffer]
    method, url = _target(conn, lines[0] if lines else "GET /")
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.append((name.strip(), " ".join(value.split("\r\n\t")).strip()))
    return method, url, headers


def _mine(conn: Any) -> bool:
    """False for urllib3's connections (botocore's included): the urllib3 adapter has them."""
    connection = sys.modules.get("urllib3.connection")
    return connection is None or not isinstance(conn, connection.HTTPConnection)


def _endheaders(original: Callable[..., Any]) -> Callable[..., Any]:
    def endheaders(self: Any, message_body: Any = None, *, encode_chunked: bool = False) -> Any:
        scheme = "https" if _is_https(self) else "http"
        session = route(origin(scheme, self.host, self.port)) if _mine(self) else None
        if session is None or getattr(self, _STATE, None) != http.client._CS_REQ_STARTED:  # type: ignore[attr-defined]
            return original(self, message_body, encode_chunked=encode_chunked)
        method, url, headers = _parse_buffer(self)
        self._casstore = _Pending(session, method, url, headers, _bytes(message_body), encode_chunked)
        setattr(self, _STATE, http.client._CS_REQ_SENT)  # type: ignore[attr-defined]
        return None

    return endheaders


def _send(original: Callable[..., Any]) -> Callable[..., Any]:
    def send(self: Any, data: Any) -> Any:
        pending = self.__dict__.get("_casstore")
        if pending is None or pending.sent:
            return original(self, data)
        body = _bytes(data)
        pending.extra.extend(body if isinstance(body, list) else [body])
        return None

    return send


def _capture(session: Any, call: Any, response: http.client.HTTPResponse, method: str, url: str) -> Any:
    headers = response.getheaders()
    if is_streamed(headers):
        response.fp = TeeFile(  # type: ignore[assignment]  # a file-like tee in place of the socket file
            response.fp, Sink(session, call, response.status, headers, decoded=False), bool(response.chunked))
        return response
    raw = response.read()
    session.finish(call, encode_response(response.status, headers, raw))
    return http_response(served_live(response.status, response.reason, headers, raw), method, url)


def _idle(conn: Any) -> None:
    """The connection ready for its next request, the kept one answered without sending it."""
    setattr(conn, _STATE, http.client._CS_IDLE)  # type: ignore[attr-defined]
    del conn._buffer[:]


def _getresponse(original: Callable[..., Any], endheaders: Callable[..., Any], send: Callable[..., Any]) -> Callable[..., Any]:
    def getresponse(self: Any) -> Any:
        pending: _Pending | None = self.__dict__.pop("_casstore", None)
        if pending is None:
            return original(self)
        session = pending.session
        try:
            action, payload = begin_http(session, pending.method, pending.url, pending.headers, pending.body())
        except BaseException:
            _idle(self)
            raise
        if action == "serve":
            _idle(self)
            check_fault(payload, TimeoutError, ConnectionResetError)
            return http_response(served_sync(session, payload), pending.method, pending.url)

        def perform(op: str, arg: Any) -> Any:
            if op == SEND:  # the request as the caller built it, sent now
                pending.sent = True
                setattr(self, _STATE, http.client._CS_REQ_STARTED)  # type: ignore[attr-defined]
                endheaders(self, pending.first, encode_chunked=pending.encode_chunked)
                for piece in pending.extra:
                    send(self, piece)
                return original(self)
            if op == CLOSE:
                return arg.close()
            if op == SERVE:
                return http_response(served(arg), pending.method, pending.url)
            return _capture(session, payload, arg, pending.method, pending.url)

        return drive(live_call(session, payload, _FAILURES, "status"), perform)

    return getresponse


def check(cls: type) -> None:
    """Raise :class:`ClientNotSupported` when ``http.client`` lacks what the patches use."""
    global _CHECKED
    if _CHECKED:
        return
    probe = cls("localhost")
    missing = [n for n in ("_CS_IDLE", "_CS_REQ_STARTED", "_CS_REQ_SENT") if not hasattr(http.client, n)]
    if not hasattr(probe, _STATE) or not isinstance(getattr(probe, "_buffer", None), list):
        missing.append("HTTPConnection state")
    if missing:
        raise ClientNotSupported(
            f"casstore cannot intercept http.client of this Python ({', '.join(missing)} missing); "
            "run with the socket guard (CASSTORE_BLOCK_NETWORK=1) or report it"
        )
    _CHECKED = True


def patches() -> list[Patch]:
    """What the installer patches for http.client (the standard library's class, never a stand-in)."""
    cls = genuine(http.client, "HTTPConnection")
    if cls is None:
        return []
    check(cls)
    original_endheaders, original_send = cls.__dict__["endheaders"], cls.__dict__["send"]
    return [
        (cls, "endheaders", _endheaders),
        (cls, "send", _send),
        (cls, "getresponse", lambda original: _getresponse(original, original_endheaders, original_send)),
    ]
