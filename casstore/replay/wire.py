"""What the aiohttp, urllib3 and http.client adapters share: a recorded response as served
(:func:`served`), as HTTP/1.1 bytes (:func:`wire_file`), and a live stream's recorder (:class:`Sink`).
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..model.recording import decode_response, encode_response
from .faults import raised_fault
from .policy import reason
from .session import Call, Session
from .timing import PacedReader, Pacer

__all__ = ["served", "served_live", "served_sync", "served_async", "wire_file", "check_fault", "is_streamed", "Sink"]

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
    """A response as it is handed to a client: exactly one of ``body``/``chunks`` is set,
    and ``headers`` carry the framing that matches."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes | None = None
    chunks: list[bytes] | None = None
    pacer: Pacer | None = None  # use(timing=...): when the headers and each chunk are due


def served(entry: dict[str, Any]) -> Served:
    """What replay serves for a recorded entry (status, reason, headers, body or chunks)."""
    status, headers, body, chunks = decode_response(entry.get("response") or {})
    if chunks is not None:
        headers.append(("transfer-encoding", "chunked"))
    return Served(status, reason(status).decode("ascii"), headers, body, chunks)


def served_sync(session: Session, entry: dict[str, Any]) -> Served:
    """:func:`served` after the recorded delay when the block is timed."""
    s = served(entry)
    s.pacer = session.pacer(entry)
    if s.pacer is not None:
        s.pacer.wait()
    return s


async def served_async(session: Session, entry: dict[str, Any]) -> Served:
    """:func:`served` after the awaited delay when the block is timed."""
    s = served(entry)
    s.pacer = session.pacer(entry)
    if s.pacer is not None:
        await s.pacer.await_due()
    return s


def served_live(status: int, reason: str, headers: Iterable[tuple[str, str]], body: bytes) -> Served:
    """A live response read whole to record it, handed to the caller again (framed for the whole body)."""
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


def wire_file(s: Served) -> Any:
    """A file of ``s`` on the wire; with a pacer, each chunk is readable at its recorded time."""
    if s.pacer is None or s.chunks is None:
        return io.BytesIO(b"".join(wire_parts(s)))
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
