"""The httpx adapter: explicit transports (sync and async) and the installer's patches of
``httpx`` and ``httpx2`` (the fork the OpenAI and Anthropic SDKs may ship with).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

import httpx

from ..model.recording import decode_response, encode_response, is_event_stream
from .hook import ready
from .policy import (
    CLOSE,
    SEND,
    SERVE,
    Patch,
    adrive,
    begin_http,
    drive,
    live_call,
    reason,
    route,
)
from .session import Call, Session
from .timing import Pacer
from .wire import Sink, check_fault

__all__ = ["ReplayTransport", "AsyncReplayTransport", "handle_sync", "handle_async", "patches"]


def _begin(session: Session, request: Any) -> tuple[str, Any]:
    headers = request.headers
    encoding = headers.encoding  # what multi_items() decodes with, looked up once
    items = [(k.decode(encoding).lower(), v.decode(encoding)) for k, v in headers.raw]
    return begin_http(session, request.method, str(request.url), items, request.content, lowered=True)


_CLASSES: dict[str, tuple[type, type, type]] = {}  # the stream classes per module (httpx and httpx2 have distinct bases)


def _classes(hx: ModuleType) -> tuple[type, type, type]:
    cached = _CLASSES.get(hx.__name__)
    if cached is not None:
        return cached

    class ChunkStream(hx.SyncByteStream, hx.AsyncByteStream):  # type: ignore[name-defined]
        """A recorded event stream, served chunk by chunk (sync and async)."""

        def __init__(self, chunks: list[bytes], pacer: Pacer | None = None) -> None:
            self._chunks, self._pacer = chunks, pacer

        def __iter__(self):  # type: ignore[no-untyped-def]
            if self._pacer is None:
                yield from self._chunks
                return
            for i, chunk in enumerate(self._chunks):
                self._pacer.wait(i)
                yield chunk

        async def __aiter__(self):  # type: ignore[no-untyped-def]
            for i, chunk in enumerate(self._chunks):
                if self._pacer is not None:
                    await self._pacer.await_due(i)
                yield chunk

    class SyncTee(hx.SyncByteStream):  # type: ignore[name-defined]
        def __init__(self, inner: Any, sink: Sink) -> None:
            self._inner, self._sink = inner, sink

        def __iter__(self):  # type: ignore[no-untyped-def]
            for chunk in self._inner:
                self._sink.add(chunk)
                yield chunk
            self._sink.done()

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                self._sink.done()

    class AsyncTee(hx.AsyncByteStream):  # type: ignore[name-defined]
        def __init__(self, inner: Any, sink: Sink) -> None:
            self._inner, self._sink = inner, sink

        async def __aiter__(self):  # type: ignore[no-untyped-def]
            async for chunk in self._inner:
                self._sink.add(chunk)
                yield chunk
            self._sink.done()

        async def aclose(self) -> None:
            try:
                await self._inner.aclose()
            finally:
                self._sink.done()

    _CLASSES[hx.__name__] = (ChunkStream, SyncTee, AsyncTee)
    return _CLASSES[hx.__name__]


def _build_response(hx: ModuleType, entry: dict[str, Any], pacer: Pacer | None = None) -> Any:
    status, headers, body, chunks = decode_response(entry.get("response") or {})
    extensions = {"http_version": b"HTTP/1.1", "reason_phrase": reason(status)}
    stream = _classes(hx)[0](chunks, pacer) if chunks is not None else hx.ByteStream(body or b"")
    return hx.Response(status_code=status, headers=headers, stream=stream, extensions=extensions)


def _fault(hx: ModuleType, request: Any, entry: dict[str, Any]) -> None:
    check_fault(entry, lambda m: hx.ReadTimeout(m, request=request), lambda m: hx.ConnectError(m, request=request))


def _tee(session: Session, call: Call, response: Any, tee: type) -> list[tuple[str, str]] | None:
    """Tee an event stream into the recording (``None``), else the headers to record with."""
    headers: list[tuple[str, str]] = response.headers.multi_items()
    if is_event_stream(headers):
        response.stream = tee(response.stream, Sink(session, call, response.status_code, headers, decoded=False))
        return None
    return headers


def _captured(hx: ModuleType, session: Session, call: Call, response: Any, headers: list[tuple[str, str]], raw: bytes) -> Any:
    session.finish(call, encode_response(response.status_code, headers, raw))
    response.stream = hx.ByteStream(raw)
    return response


def handle_sync(hx: ModuleType, request: Any, send: Callable[[], Any]) -> Any:
    session = route(request.url)
    if session is None:
        return send()
    request.read()
    begun = _begin(session, request)
    if begun[0] == "serve":  # a replay hit needs no I/O: no policy to drive
        entry, pacer = begun[1], session.pacer(begun[1])
        _fault(hx, request, entry)
        if pacer is not None:
            pacer.wait()
        return _build_response(hx, entry, pacer)
    call: Call = begun[1]

    def perform(op: str, arg: Any) -> Any:
        if op == SEND:
            return send()
        if op == SERVE:
            return _build_response(hx, arg)
        if op == CLOSE:
            return arg.close()
        headers = _tee(session, call, arg, _classes(hx)[1])  # CAPTURE
        if headers is None:
            return arg
        try:
            raw = b"".join(arg.stream)
        finally:
            arg.stream.close()
        return _captured(hx, session, call, arg, headers, raw)

    return drive(live_call(session, call, (hx.TransportError,)), perform)


async def handle_async(hx: ModuleType, request: Any, send: Callable[[], Awaitable[Any]]) -> Any:
    session = route(request.url)
    if session is None:
        return await send()
    await request.aread()
    begun = _begin(session, request)
    if begun[0] == "serve":
        entry, pacer = begun[1], session.pacer(begun[1])
        _fault(hx, request, entry)
        if pacer is not None:
            await pacer.await_due()
        return _build_response(hx, entry, pacer)
    call: Call = begun[1]

    async def perform(op: str, arg: Any) -> Any:
        if op == SEND:
            return await send()
        if op == SERVE:
            return _build_response(hx, arg)
        if op == CLOSE:
            return await arg.aclose()
        headers = _tee(session, call, arg, _classes(hx)[2])  # CAPTURE
        if headers is None:
            return arg
        try:
            raw = b"".join([chunk async for chunk in arg.stream])
        finally:
            await arg.stream.aclose()
        return _captured(hx, session, call, arg, headers, raw)

    return await adrive(live_call(session, call, (hx.TransportError,)), perform)


class ReplayTransport(httpx.BaseTransport):
    """An httpx transport answering from the active ``use()`` session without the installer's
    patching; outside a block it forwards to ``transport``."""

    def __init__(self, transport: httpx.BaseTransport | None = None) -> None:
        self._inner = transport if transport is not None else httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response: httpx.Response = handle_sync(httpx, request, lambda: self._inner.handle_request(request))
        return response

    def close(self) -> None:
        self._inner.close()


class AsyncReplayTransport(httpx.AsyncBaseTransport):
    """The async twin of :class:`ReplayTransport`."""

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._inner = transport if transport is not None else httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response: httpx.Response = await handle_async(httpx, request, lambda: self._inner.handle_async_request(request))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _patch_sync(hx: ModuleType, original: Callable[..., Any]) -> Callable[..., Any]:
    def handle_request(self: Any, request: Any) -> Any:
        return handle_sync(hx, request, lambda: original(self, request))

    return handle_request


def _patch_async(hx: ModuleType, original: Callable[..., Any]) -> Callable[..., Any]:
    async def handle_async_request(self: Any, request: Any) -> Any:
        return await handle_async(hx, request, lambda: original(self, request))

    return handle_async_request


def patches() -> list[Patch]:
    """The transport methods of ``httpx`` and, when installed, ``httpx2``."""
    modules: list[ModuleType] = [httpx]
    httpx2 = ready("httpx2")  # the fork the OpenAI and Anthropic SDKs may ship with
    if httpx2 is not None:  # (once loaded: the installer patches it when it is imported)
        modules.append(httpx2)
    out: list[Patch] = []
    for hx in modules:
        if not hasattr(hx, "HTTPTransport"):
            continue
        out.append((hx.HTTPTransport, "handle_request", functools.partial(_patch_sync, hx)))
        out.append((hx.AsyncHTTPTransport, "handle_async_request", functools.partial(_patch_async, hx)))
    return out
