"""One HTTP/1.1 GET and its answer over a socket: what :mod:`casstore.store.s3_signed` sends.

``http.client`` costs a fresh process more to import than a 1k pull's requests take: it
imports ``email.parser`` (and the email package's policy machinery, ~30 M instructions)
and ``ssl`` even for a plain ``http://`` endpoint (~35 M more), together ~15 ms of a pull's
start-up on the benchmark machine. This module sends the same request ``http.client`` sends
for a GET (the request line, ``Accept-Encoding: identity`` and the caller's headers, which
carry ``Host``; ``TCP_NODELAY`` on the socket; TLS through the caller's ``ssl`` context with
the host as server name) and reads only answers whose framing is plain: a ``HTTP/1.0`` or
``HTTP/1.1`` status line, at most 100 header lines without folding, and a body framed by one
``Content-Length``, by ``Transfer-Encoding: chunked``, or by the end of the connection.
Anything else — a 1xx, a folded or malformed header, another transfer coding, a body cut
short, a timeout — raises :class:`WireError`, and the caller hands the request to the
full client (see :class:`casstore.store.s3_signed.NotPlain`): a misreading could cost a
second request, never wrong bytes served.
"""

from __future__ import annotations

import socket
from typing import Any

__all__ = ["Answer", "Connection", "WireError", "split_netloc"]

_MAX_LINE = 65536  # what http.client allows a status or header line
_MAX_HEADERS = 100  # ... and how many header lines
_DEFAULT_PORTS = {"http": 80, "https": 443}


class WireError(Exception):
    """An answer this module does not read (or a request it does not send): ask the client."""


def split_netloc(netloc: str, scheme: str) -> tuple[str, int]:
    """(host, port) as ``http.client`` splits a netloc (``[v6]:port``, a default port)."""
    host, port = netloc, _DEFAULT_PORTS[scheme]
    i, j = host.rfind(":"), host.rfind("]")
    if i > j:
        digits = host[i + 1 :]
        if digits:
            if not (digits.isascii() and digits.isdigit()):
                raise WireError("a port that is not a number")
            port = int(digits)
        host = host[:i]
    if host[:1] == "[" and host[-1:] == "]":
        host = host[1:-1]
    return host, port


class Answer:
    """A status, the headers as sent (name, value), the body, and whether the server closes."""

    __slots__ = ("status", "headers", "body", "will_close")

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes, will_close: bool) -> None:
        self.status, self.headers, self.body, self.will_close = status, headers, body, will_close


class Connection:
    """One kept-alive connection to ``host:port`` (TLS with ``context``): GETs, one at a time."""

    def __init__(self, scheme: str, netloc: str, *, timeouts: tuple[float, float], context: Any = None) -> None:
        self._host, self._port = split_netloc(netloc, scheme)
        self._timeouts = timeouts
        self._context = context if scheme == "https" else None
        self._sock: Any = None
        self._file: Any = None

    def connect(self) -> None:
        sock = socket.create_connection((self._host, self._port), self._timeouts[0])
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as http.client
            if self._context is not None:
                sock = self._context.wrap_socket(sock, server_hostname=self._host)
            sock.settimeout(self._timeouts[1])  # connect_timeout, then read_timeout, as botocore
        except BaseException:
            sock.close()
            raise
        self._sock, self._file = sock, sock.makefile("rb")

    def close(self) -> None:
        file, sock, self._file, self._sock = self._file, self._sock, None, None
        if file is not None:
            file.close()
        if sock is not None:
            sock.close()

    def get(self, target: str, headers: dict[str, str]) -> Answer:
        """Send ``GET target`` with ``headers`` (``Host`` among them) and read the answer whole."""
        if self._sock is None:
            self.connect()
        if any(c <= " " or c == "\x7f" for c in target):
            raise WireError("a request target with control characters or spaces")
        lines = [f"GET {target} HTTP/1.1", "Accept-Encoding: identity"]
        for name, value in headers.items():
            if not name or any(c in name for c in ":\r\n\0 \t") or any(c in value for c in "\r\n\0"):
                raise WireError("a header http.client would refuse")
            lines.append(f"{name}: {value}")
        try:
            request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        except UnicodeEncodeError:
            raise WireError("a header that is not latin-1") from None
        self._sock.sendall(request)
        return self._answer()

    def _line(self) -> bytes:
        line: bytes = self._file.readline(_MAX_LINE + 1)
        if len(line) > _MAX_LINE:
            raise WireError("a line longer than http.client reads")
        return line

    def _answer(self) -> Answer:
        version, _, rest = self._line().partition(b" ")
        code = rest[:3]
        if version not in (b"HTTP/1.0", b"HTTP/1.1") or not (code.isdigit() and rest[3:4] in (b" ", b"\r", b"\n", b"")):
            raise WireError("not an HTTP/1.x status line")
        status = int(code)
        if status < 200 or status in (204, 304):
            raise WireError(f"a {status} answer")  # (no body to frame; never a plain success here)
        headers: list[tuple[str, str]] = []
        while True:
            line = self._line()
            if line in (b"\r\n", b"\n"):
                break
            if not line.endswith(b"\n") or line[:1] in (b" ", b"\t") or len(headers) >= _MAX_HEADERS:
                raise WireError("a header block http.client would not read alike")  # cut short, folded, too long
            name, colon, value = line.decode("iso-8859-1").partition(":")
            if not colon or not name or name != name.strip():
                raise WireError("a malformed header line")
            headers.append((name, value.strip(" \t\r\n")))
        named: dict[str, list[str]] = {}
        for name, value in headers:
            named.setdefault(name.lower(), []).append(value)
        connection = ",".join(named.get("connection", [])).lower()
        will_close = version == b"HTTP/1.0" or "close" in connection
        coding = named.get("transfer-encoding")
        if coding is not None:
            if len(coding) != 1 or coding[0].lower() != "chunked":
                raise WireError("a transfer coding other than chunked")
            body = self._chunked()
        elif "content-length" in named:
            lengths = {v.strip() for v in ",".join(named["content-length"]).split(",")}
            if len(lengths) != 1 or not (length := lengths.pop()).isdigit() or not length.isascii():
                raise WireError("a Content-Length that is not one number")
            body = self._exactly(int(length))
        else:  # the body ends with the connection
            body = self._file.read()
            will_close = True
        return Answer(status, headers, body, will_close)

    def _exactly(self, n: int) -> bytes:
        data: bytes = self._file.read(n)
        if len(data) != n:
            raise WireError(f"a body cut short ({len(data)} of {n} bytes)")
        return data

    def _chunked(self) -> bytes:
        parts = []
        while True:
            size_text = self._line().split(b";", 1)[0].strip()
            if not size_text or any(c not in b"0123456789abcdefABCDEF" for c in size_text):
                raise WireError("a malformed chunk size")
            size = int(size_text, 16)
            if size == 0:
                break
            parts.append(self._exactly(size))
            if self._line() not in (b"\r\n", b"\n"):
                raise WireError("a chunk without its line end")
        while (line := self._line()) not in (b"\r\n", b"\n"):  # trailers: read and left, as http.client
            if not line:
                raise WireError("a chunked body cut short")
        return b"".join(parts)
