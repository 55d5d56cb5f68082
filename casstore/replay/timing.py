"""Timed replay: an entry's ``timing`` (``{"headers_ms": 212, "chunks_ms": [214, 415]}``) is
replayed at a scale of those offsets (1 realtime, 0 collapsed: the default).
"""

from __future__ import annotations

import bisect
import io
import time
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["Pacer", "PacedReader", "pacer_for", "entry_timing"]


class Pacer:
    """When each part of one served response is due (monotonic seconds)."""

    def __init__(self, start: float, headers_s: float, chunks_s: Sequence[float]) -> None:
        self.start = start
        self.headers_s = headers_s
        self.chunks_s = list(chunks_s)

    def _left(self, chunk: int | None) -> float:
        """Seconds until the headers (``chunk`` None) or that chunk are due."""
        chunks, offset = self.chunks_s, self.headers_s
        if chunk is not None and chunks:
            offset = chunks[chunk] if chunk < len(chunks) else chunks[-1]
        return self.start + offset - time.monotonic()

    def wait(self, chunk: int | None = None) -> None:
        left = self._left(chunk)
        if left > 0:
            time.sleep(left)

    async def await_due(self, chunk: int | None = None) -> None:
        await _sleep(self._left(chunk))


class PacedReader(io.RawIOBase):
    """A stream's recorded chunks as a file whose reads wait for each chunk's time."""

    def __init__(self, chunks: Sequence[bytes], pacer: Pacer, first_chunk: int = 0) -> None:
        super().__init__()
        self._chunks, self._pacer = list(chunks), pacer
        self._first = first_chunk  # parts before it (an HTTP head) are there at once
        self._i = 0
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:  # (an empty part is skipped, after its wait)
            if self._i >= len(self._chunks):
                if not self.closed:
                    self.close()  # at its end, as a socket's response: readers stop asking
                return 0
            if self._i >= self._first:
                self._pacer.wait(self._i - self._first)
            self._buf = self._chunks[self._i]
            self._i += 1
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


async def _sleep(seconds: float) -> None:
    if seconds <= 0:
        return
    import asyncio  # loaded already: this is awaited on an event loop

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # not asyncio (trio): anyio knows the running loop
        import anyio

        await anyio.sleep(seconds)
        return
    await asyncio.sleep(seconds)


def pacer_for(entry: Mapping[str, Any], scale: float) -> Pacer:
    """The pacer of a served entry replayed at ``scale`` (> 0)."""
    timing = entry.get("timing")
    headers_ms: Any = None
    chunks_ms: Any = ()
    if isinstance(timing, Mapping):
        headers_ms = timing.get("headers_ms")
        chunks_ms = timing.get("chunks_ms") or ()
    if not isinstance(headers_ms, (int, float)):
        headers_ms = entry.get("duration_ms") if isinstance(entry.get("duration_ms"), (int, float)) else 0
    chunks = [float(c) * scale / 1000 for c in chunks_ms if isinstance(c, (int, float))]
    return Pacer(time.monotonic(), float(headers_ms) * scale / 1000, chunks)


def entry_timing(started: float, responded: float | None, marks: Sequence[tuple[float, int]],
                 response: Mapping[str, Any]) -> dict[str, Any] | None:
    """``timing`` of a recorded entry: headers and each chunk of a stream, in ms from ``started``
    (a chunk arrived with the first of the ``marks``, (time, bytes so far), reaching its end)."""
    if responded is None:
        return None
    out: dict[str, Any] = {"headers_ms": max(0, round((responded - started) * 1000))}
    chunks = response.get("chunks")
    if response.get("stream") and isinstance(chunks, list) and marks:
        totals = [n for _, n in marks]
        end = 0
        offsets = []
        for chunk in chunks:
            end += len(chunk.encode("utf-8")) if isinstance(chunk, str) else len(str(chunk))
            i = min(bisect.bisect_left(totals, end), len(marks) - 1)
            offsets.append(max(0, round((marks[i][0] - started) * 1000)))
        out["chunks_ms"] = offsets
    return out
