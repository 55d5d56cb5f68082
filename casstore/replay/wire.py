"""What the aiohttp, urllib3 and http.client adapters share (no third-party imports).

The session (:mod:`.session`) decides, per call, to serve it or let it go live, and the
policy (:mod:`.policy`) what follows a live call (fallback, capture); an adapter only
does its client's I/O. This module holds the parts of that I/O they have in common:

* :func:`served` -- **the one place a recorded response becomes what is served**: status,
  reason, headers and either a body or the list of stream chunks. Each adapter turns a
  :class:`Served` into its client's response object in one function of its own
  (``_response``), so timed replay and fault injection can change what is served here,
  or wrap the chunks, without knowing the clients;
* :func:`wire_bytes` -- a :class:`Served` as HTTP/1.1 bytes (chunked framing for streams,
  one HTTP chunk per recorded chunk), which ``http.client`` and ``urllib3`` parse with
  their own parsers, so a replayed response behaves like a live one down to
  ``read1()`` and ``read_chunked()``;
* :class:`Sink` -- collects a live stream as the caller reads it and records it once, at
  its end (or with what arrived when the ``use()`` block ends).
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import ClientNotSupported
from ..model.recording import decode_response, encode_response
from .faults import raised_fault
from .policy import reason
from .session import Call, Session
from .timing import PacedReader, Pacer

__all__ = [
    "STREAM_TYPES",
    "ClientNotSupported",
    "Served",
    "served",
    "served_live",
    "served_sync",
    "served_async",
    "wire_bytes",
    "wire_parts",
    "wire_file",
    "check_fault",
    "is_streamed",
    "Sink",
]

# Content types answered as streams: recorded without buffering, replayed chunk by chunk.
STREAM_TYPES = ("text/event-stream", "application/vnd.amazon.eventstream")
_FRAMING = frozenset({"content-length", "transfer-encoding"})


def is_streamed(headers: Iterable[tuple[Any, Any]]) -> bool:
    """True when the response's content type is one of :data:`STREAM_TYPES`."""
    for k, v in headers:
        name = k.decode("latin-1") if isinstance(k, bytes) else str(k)
        if name.lower() == "content-type":
            value = (v.decode("latin-1") if isinstance(v, bytes) else str(v)).lower()
            return value.startswith(STREAM_TYPES)
    return False


@dataclass
class Served:
    """A response as it is handed to a client: exactly one of ``body``/``chunks`` is set.

    ``headers`` already carry the framing that matches: ``content-length`` for a body,
    ``transfer-encoding: chunked`` for chunks.
    """

    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes | None = None
    chunks: list[bytes] | None = None
    pacer: Pacer | None = None  # use(timing=...): when the headers and each chunk are due

    @property
    def stream(self) -> bool:
        return self.chunks is not None

    @property
    def parts(self) -> list[bytes]:
        """The body as the pieces it arrives in (one piece when it is not a stream)."""
        if self.chunks is not None:
            return self.chunks
        return [self.body] if self.body else []


def served(entry: dict[str, Any]) -> Served:
    """What replay serves for a recorded entry (status, reason, headers, body or chunks)."""
    status, headers, body, chunks = decode_response(entry.get("response") or {})
    if chunks is not None:
        headers.append(("transfer-encoding", "chunked"))
    return Served(status, reason(status).decode("ascii"), headers, body, chunks)


def served_sync(session: Session, entry: dict[str, Any]) -> Served:
    """:func:`served` for a sync client, after the recorded delay when the block is timed."""
    s = served(entry)
    s.pacer = session.pacer(entry)
    if s.pacer is not None:
        s.pacer.wait_headers()
    return s


async def served_async(session: Session, entry: dict[str, Any]) -> Served:
    """:func:`served` for an async client: the delay is awaited, the event loop runs on."""
    s = served(entry)
    s.pacer = session.pacer(entry)
    if s.pacer is not None:
        await s.pacer.await_headers()
    return s


def served_live(status: int, reason: str, headers: Iterable[tuple[str, str]], body: bytes) -> Served:
    """A live response whose body was read to record it, to hand to the caller again.

    The headers are the live ones (``content-encoding`` included: ``body`` is the bytes as
    received), with the framing rewritten for the body as it is now whole.
    """
    items = [(k, v) for k, v in headers if k.lower() not in _FRAMING]
    items.append(("content-length", str(len(body))))
    return Served(status, reason, items, body, None)


def wire_parts(s: Served) -> list[bytes]:
    """``s`` as an HTTP/1.1 response on the wire: the head, then one part per chunk + the end."""
    head = [f"HTTP/1.1 {s.status} {s.reason}".rstrip()]
    head += [f"{k}: {v}" for k, v in s.headers]
    out = [("\r\n".join(head) + "\r\n\r\n").encode("latin-1")]
    if s.chunks is None:
        out[0] += s.body or b""
    else:
        for chunk in s.chunks:
            out.append(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunk else b"")
        out.append(b"0\r\n\r\n")
    return out


def wire_bytes(s: Served) -> bytes:
    """``s`` as an HTTP/1.1 response on the wire."""
    return b"".join(wire_parts(s))


def wire_file(s: Served) -> Any:
    """A file of ``s`` on the wire; with a pacer, each chunk is readable at its recorded time."""
    if s.pacer is None or s.chunks is None:
        return io.BytesIO(wire_bytes(s))
    return PacedReader(wire_parts(s), s.pacer, first_chunk=1)


def check_fault(entry: dict[str, Any], timeout: Callable[[str], BaseException],
                reset: Callable[[str], BaseException]) -> None:
    """Raise a served entry's injected ``"timeout"`` / ``"reset"`` as the client's own error."""
    fault = raised_fault(entry)
    if fault is not None:
        message = f"[casstore-fault:{fault}] injected by casstore.use(faults=...)"
        raise timeout(message) if fault == "timeout" else reset(message)


class Sink:
    """Collects a live stream as it is read; records it once, when it ends."""

    def __init__(self, session: Session, call: Call, status: int, headers: list[tuple[str, str]], decoded: bool) -> None:
        self.session, self.call, self.status, self.headers, self.decoded = session, call, status, headers, decoded
        self.chunks: list[bytes] = []
        self.total = 0  # bytes read so far
        self.decode: Callable[[bytes], bytes] | None = None  # e.g. undo chunked framing
        call.partial = self.record

    def add(self, chunk: bytes) -> bytes:
        if chunk:
            self.chunks.append(bytes(chunk))
            self.total += len(chunk)
            self.call.marks.append((time.monotonic(), self.total))  # when each part arrived (timing)
        return chunk

    def record(self) -> dict[str, Any]:
        data = b"".join(self.chunks)
        if self.decode is not None:
            data = self.decode(data)
        return encode_response(self.status, self.headers, data, decoded=self.decoded)

    def done(self) -> None:
        self.session.finish(self.call, self.record())
