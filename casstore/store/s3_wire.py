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

Nothing a server sends beyond an answer becomes the next answer. Bytes that came with the
body (a ``Content-Length`` too short, a second answer unasked) are a framing error: the
body is in doubt, the connection is closed. A kept-alive connection is reused only if it
has nothing to read (stray bytes that came later, or the server's close: a keep-alive
timeout), as urllib3 checks a pooled connection (``is_connection_dropped``): else it is
closed and the request goes on a new one. The answer is read over a buffer of this
module's own (``io.BufferedReader`` does not say what it holds beyond what was read).
"""

from __future__ import annotations

import io
import select
import socket
from typing import Any

from ..model.numerals import ascii_int

__all__ = ["Answer", "Connection", "WireError", "split_netloc"]

_MAX_LINE = 65536  # what http.client allows a status or header line
_MAX_HEADERS = 100  # ... and how many header lines
_DEFAULT_PORTS = {"http": 80, "https": 443}
_RECV = 65536  # what one read into the buffer asks for (a body's rest goes straight to its bytes)


class WireError(Exception):
    """An answer this module does not read (or a request it does not send): ask the client."""


def split_netloc(netloc: str, scheme: str) -> tuple[str, int]:
    """(host, port) as ``http.client`` splits a netloc (``[v6]:port``, a default port)."""
    host, port = netloc, _DEFAULT_PORTS[scheme]
    i, j = host.rfind(":"), host.rfind("]")
    if i > j:
        digits = host[i + 1 :]
        if digits:
            n = ascii_int(digits)
            if n is None:
                raise WireError("a port that is not a number")
            port = n
        host = host[:i]
    if host[:1] == "[" and host[-1:] == "]":
        host = host[1:-1]
    return host, port


class Answer:
    """A status, the headers as sent (name, value), the body, and whether the server closes."""

    __slots__ = ("status", "headers", "body", "will_close")

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes, will_close: bool) -> None:
        self.status, self.headers, self.body, self.will_close = status, headers, body, will_close


class _Rest(io.RawIOBase):
    """A body's rest as a raw stream: the bytes the buffer held, then the socket's."""

    def __init__(self, held: bytes, sock: Any) -> None:
        super().__init__()
        self._held, self._sock = held, sock

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._held:
            k = min(len(b), len(self._held))
            b[:k], self._held = self._held[:k], self._held[k:]
            return k
        n: int = self._sock.recv_into(b)
        return n


class Connection:
    """One kept-alive connection to ``host:port`` (TLS with ``context``): GETs, one at a time."""

    def __init__(self, scheme: str, netloc: str, *, timeouts: tuple[float, float], context: Any = None) -> None:
        self._host, self._port = split_netloc(netloc, scheme)
        self._timeouts = timeouts
        self._context = context if scheme == "https" else None
        self._sock: Any = None
        self._buf = b""  # read from the socket, not yet used: [_pos:]
        self._pos = 0
        self._answered = False  # whether this socket carried an answer (a new one is not checked)

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
        self._sock, self._buf, self._pos, self._answered = sock, b"", 0, False

    def close(self) -> None:
        sock, self._sock, self._buf, self._pos = self._sock, None, b"", 0
        if sock is not None:
            sock.close()

    def _idle(self) -> bool:
        """True when the kept connection has nothing to read: stray bytes, or the server's close
        (its keep-alive timeout), make it readable (urllib3's ``is_connection_dropped`` asks the
        same). The buffer holds nothing between answers (bytes after one are a framing error)."""
        if self._context is not None and self._sock.pending():  # TLS: bytes already decrypted
            return False
        if not hasattr(select, "poll"):  # (Windows; select() refuses descriptors past FD_SETSIZE)
            return not select.select([self._sock], [], [], 0)[0]
        poll = select.poll()
        poll.register(self._sock, select.POLLIN)
        return not poll.poll(0)

    def get(self, target: str, headers: dict[str, str]) -> Answer:
        """Send ``GET target`` with ``headers`` (``Host`` among them) and read the answer whole.
        Any failure closes the connection (the next GET opens a new one)."""
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
        if self._sock is not None and self._answered and not self._idle():
            self.close()  # never read what came unasked as this request's answer
        if self._sock is None:
            self.connect()
        try:
            self._sock.sendall(request)
            answer = self._answer()
            if self._pos < len(self._buf):
                raise WireError("bytes after the answer's body")  # the body is in doubt too
        except BaseException:
            self.close()
            raise
        self._buf, self._pos, self._answered = b"", 0, True
        return answer

    def _fill(self) -> bool:
        """Read what the socket has (up to _RECV bytes) into the buffer; False at its end."""
        data: bytes = self._sock.recv(_RECV)
        if not data:
            return False
        self._buf, self._pos = self._buf[self._pos :] + data, 0  # (most answers: one read, no copy)
        return True

    def _line(self) -> bytes:
        """The next line with its end (what ``readline`` returns: short at the end of the connection)."""
        while True:
            buf, pos = self._buf, self._pos
            end = buf.find(b"\n", pos, pos + _MAX_LINE + 1)
            if end >= 0 or len(buf) - pos > _MAX_LINE or not self._fill():
                stop = len(buf) if end < 0 else end + 1
                if stop - pos > _MAX_LINE:
                    raise WireError("a line longer than http.client reads")
                self._pos = stop
                return buf[pos:stop]

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
            parts = [self._buf[self._pos :]]
            while data := self._sock.recv(_RECV):
                parts.append(data)
            body, self._buf, self._pos = b"".join(parts), b"", 0
            will_close = True
        return Answer(status, headers, body, will_close)

    def _exactly(self, n: int) -> bytes:
        buf, pos = self._buf, self._pos
        if len(buf) - pos >= n:
            self._pos = pos + n
            return buf[pos : pos + n]
        rest = _Rest(buf[pos:], self._sock)
        self._buf, self._pos = b"", 0
        # a BufferedReader of block size 1 reads straight into the bytes it returns (no copy of
        # the body, as http.client's read(n)) and never past them: nothing is left in it
        data: bytes = io.BufferedReader(rest, 1).read(n)
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
