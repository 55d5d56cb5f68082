"""Interception: httpx transports (sync and async) and the scoped installer.

The active session lives in a :class:`contextvars.ContextVar`, so concurrent ``use()``
blocks in threads or asyncio tasks each see only their own calls. The installer patches
``HTTPTransport.handle_request`` / ``AsyncHTTPTransport.handle_async_request`` of
``httpx`` and of ``httpx2`` (the fork the OpenAI and Anthropic SDKs ship with), and
``requests.adapters.HTTPAdapter.send`` (and ``Session.merge_environment_settings``, which
skips the proxy-environment lookups for a call that cannot go live). It is reference counted: installed when the first
``use()`` block is entered, undone when the last one exits, never at import. A call
made outside any ``use()`` block goes straight to the original method.

Sync and async share the session core (``casstore.session``) and one decision core per
call (:func:`_decide`, a generator that yields the I/O it needs); the two drivers differ
only in how they perform that I/O.
"""

from __future__ import annotations

import functools
import io
import sys
import threading
from collections.abc import Awaitable, Callable, Generator
from contextvars import ContextVar
from types import ModuleType
from typing import Any, cast

import httpx

from ..errors import CasstoreError, LiveCallBlocked
from ..model.recording import decode_response, encode_response, is_event_stream, reason_phrase
from .session import Call, Session, import_optional

__all__ = ["CURRENT", "IN_TOOL", "ReplayTransport", "AsyncReplayTransport", "install", "uninstall", "installed"]

CURRENT: ContextVar[Session | None] = ContextVar("casstore_session", default=None)
# Set while a tool function runs live: its own HTTP calls are not recorded (replay
# returns the tool's result without running it), but CASSTORE_OFFLINE still applies.
IN_TOOL: ContextVar[Session | None] = ContextVar("casstore_in_tool", default=None)
# Set while a transport makes the real call, so a patched inner transport passes it on.
_BYPASS: ContextVar[bool] = ContextVar("casstore_bypass", default=False)

_PROVIDER_FAILURE_STATUS = frozenset({429, 500, 502, 503, 504, 529})


_SDK_ERRORS = (("openai", "OpenAIError"), ("anthropic", "AnthropicError"))
_TRANSPARENT: dict[tuple[type, tuple[type, ...]], type] = {}


def _transparent(exc: CasstoreError) -> CasstoreError:
    """The same error, also typed as the loaded SDKs' base error.

    The OpenAI and Anthropic SDKs re-raise their own errors untouched but wrap anything
    else in ``APIConnectionError`` (and retry it). A CassetteMiss must reach the test as
    itself, at once, so it is raised as a subclass of both ``CassetteMiss`` and the SDK
    base errors (``except casstore.CassetteMiss`` still catches it).
    """
    bases = tuple(
        getattr(mod, attr)
        for name, attr in _SDK_ERRORS
        if (mod := sys.modules.get(name)) is not None and isinstance(getattr(mod, attr, None), type)
    )
    if not bases:
        return exc
    key = (type(exc), bases)
    cls = _TRANSPARENT.get(key)
    if cls is None:
        cls = type(type(exc).__name__, (type(exc), *bases), {"__module__": type(exc).__module__})
        cls.__qualname__ = type(exc).__qualname__
        _TRANSPARENT[key] = cls
    new = cast(CasstoreError, BaseException.__new__(cls))
    new.__dict__.update(exc.__dict__)
    new.args = exc.args
    return new


def _begin(session: Session, request: Any) -> tuple[str, Any]:
    headers = request.headers
    encoding = headers.encoding  # what multi_items() decodes with, looked up once
    items = [(k.decode(encoding).lower(), v.decode(encoding)) for k, v in headers.raw]
    try:
        return session.begin_http_lowered(request.method, str(request.url), items, request.content)
    except CasstoreError as exc:
        raise _transparent(exc) from None


def _route() -> Session | None:
    """The session that should see this call, or ``None`` to pass it through."""
    if _BYPASS.get():
        return None
    tool_session = IN_TOOL.get()
    if tool_session is not None:
        if tool_session.offline:
            raise _transparent(LiveCallBlocked(
                f"CASSTORE_OFFLINE=1: live call from tool code blocked (cassette {tool_session.name!r})"
            ))
        return None
    return CURRENT.get()


# -- httpx flavour: stream classes per module (httpx and httpx2 have distinct bases) -------


class _Sink:
    """Collects a live event stream as it is read; records it once, when it ends."""

    def __init__(self, session: Session, call: Call, status: int, headers: list[tuple[str, str]]) -> None:
        self.session, self.call, self.status, self.headers = session, call, status, headers
        self.chunks: list[bytes] = []
        call.partial = self.record

    def record(self) -> dict[str, Any]:
        return encode_response(self.status, self.headers, b"".join(self.chunks))

    def done(self) -> None:
        self.session.finish(self.call, self.record())


_CLASSES: dict[str, tuple[type, type, type]] = {}


def _classes(hx: ModuleType) -> tuple[type, type, type]:
    cached = _CLASSES.get(hx.__name__)
    if cached is not None:
        return cached

    class ChunkStream(hx.SyncByteStream, hx.AsyncByteStream):  # type: ignore[name-defined,misc]
        """A recorded event stream, served chunk by chunk (sync and async)."""

        def __init__(self, chunks: list[bytes]) -> None:
            self._chunks = chunks

        def __iter__(self):  # type: ignore[no-untyped-def]
            yield from self._chunks

        async def __aiter__(self):  # type: ignore[no-untyped-def]
            for chunk in self._chunks:
                yield chunk

    class SyncTee(hx.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, inner: Any, sink: _Sink) -> None:
            self._inner, self._sink = inner, sink

        def __iter__(self):  # type: ignore[no-untyped-def]
            for chunk in self._inner:
                self._sink.chunks.append(chunk)
                yield chunk
            self._sink.done()

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                self._sink.done()

    class AsyncTee(hx.AsyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, inner: Any, sink: _Sink) -> None:
            self._inner, self._sink = inner, sink

        async def __aiter__(self):  # type: ignore[no-untyped-def]
            async for chunk in self._inner:
                self._sink.chunks.append(chunk)
                yield chunk
            self._sink.done()

        async def aclose(self) -> None:
            try:
                await self._inner.aclose()
            finally:
                self._sink.done()

    _CLASSES[hx.__name__] = (ChunkStream, SyncTee, AsyncTee)
    return _CLASSES[hx.__name__]


_REASONS: dict[int, bytes] = {}


def _reason(status: int) -> bytes:
    reason = _REASONS.get(status)
    if reason is None:
        reason = reason_phrase(status).encode("ascii")
        if 100 <= status < 600:
            _REASONS[status] = reason
    return reason


def _build_response(hx: ModuleType, entry: dict[str, Any]) -> Any:
    status, headers, body, chunks = decode_response(entry.get("response") or {})
    extensions = {"http_version": b"HTTP/1.1", "reason_phrase": _reason(status)}
    stream = _classes(hx)[0](chunks) if chunks is not None else hx.ByteStream(body or b"")
    return hx.Response(status_code=status, headers=headers, stream=stream, extensions=extensions)


# The I/O steps the shared core asks its driver to perform: the only part that differs
# between sync and async.
_SEND, _CLOSE, _READ = "send", "close", "read"
Steps = Generator[tuple[str, Any], Any, Any]


def _decide(hx: ModuleType, session: Session, request: Any, tee: type, begun: tuple[str, Any]) -> Steps:
    """One intercepted call's decisions, as a generator that yields the I/O it needs.

    ``begun`` is the session's decision (:func:`_begin`). Yields ``(_SEND, None)`` (the
    live call; the response is sent back), ``(_CLOSE, response)`` and ``(_READ,
    response)`` (the whole body is sent back); returns the response to hand to the
    client. :func:`handle_sync` and :func:`handle_async` drive it.
    """
    action, payload = begun
    if action == "serve":
        return _build_response(hx, payload)
    call: Call = payload
    try:
        response = yield _SEND, None
    except hx.TransportError:
        entry = session.fallback_entry(call)
        if entry is None:
            raise
        return _build_response(hx, entry)
    if response.status_code in _PROVIDER_FAILURE_STATUS:
        entry = session.fallback_entry(call)
        if entry is not None:
            yield _CLOSE, response
            return _build_response(hx, entry)
    if not call.capture:
        return response
    headers = response.headers.multi_items()
    if is_event_stream(headers):
        response.stream = tee(response.stream, _Sink(session, call, response.status_code, headers))
        return response
    raw = yield _READ, response
    session.finish(call, encode_response(response.status_code, headers, raw))
    response.stream = hx.ByteStream(raw)
    return response


def handle_sync(hx: ModuleType, request: Any, send: Callable[[], Any]) -> Any:
    """The sync driver: serve from the cassette, or send live and capture."""
    session = _route()
    if session is None:
        return send()
    request.read()
    begun = _begin(session, request)
    if begun[0] == "serve":  # a replay hit needs no I/O: no generator to drive
        return _build_response(hx, begun[1])
    steps = _decide(hx, session, request, _classes(hx)[1], begun)
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            op, response = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as done:
            return done.value
        value, error = None, None
        try:
            if op == _SEND:
                token = _BYPASS.set(True)
                try:
                    value = send()
                finally:
                    _BYPASS.reset(token)
            elif op == _CLOSE:
                response.close()
            else:
                try:
                    value = b"".join(response.stream)
                finally:
                    response.stream.close()
        except Exception as exc:  # handed to the core, which decides (fallback or raise)
            error = exc


async def handle_async(hx: ModuleType, request: Any, send: Callable[[], Awaitable[Any]]) -> Any:
    """The async driver: the same core, awaited I/O."""
    session = _route()
    if session is None:
        return await send()
    await request.aread()
    begun = _begin(session, request)
    if begun[0] == "serve":
        return _build_response(hx, begun[1])
    steps = _decide(hx, session, request, _classes(hx)[2], begun)
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            op, response = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as done:
            return done.value
        value, error = None, None
        try:
            if op == _SEND:
                token = _BYPASS.set(True)
                try:
                    value = await send()
                finally:
                    _BYPASS.reset(token)
            elif op == _CLOSE:
                await response.aclose()
            else:
                try:
                    value = b"".join([chunk async for chunk in response.stream])
                finally:
                    await response.stream.aclose()
        except Exception as exc:  # handed to the core, which decides (fallback or raise)
            error = exc


class ReplayTransport(httpx.BaseTransport):
    """An explicit httpx transport that answers from the active ``use()`` session.

    ``httpx.Client(transport=casstore.transport.ReplayTransport())`` works without the
    installer's patching; outside a ``use()`` block it simply forwards to ``transport``.
    """

    def __init__(self, transport: httpx.BaseTransport | None = None) -> None:
        self._inner = transport if transport is not None else httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return handle_sync(httpx, request, lambda: self._inner.handle_request(request))

    def close(self) -> None:
        self._inner.close()


class AsyncReplayTransport(httpx.AsyncBaseTransport):
    """The async twin of :class:`ReplayTransport`."""

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._inner = transport if transport is not None else httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await handle_async(httpx, request, lambda: self._inner.handle_async_request(request))

    async def aclose(self) -> None:
        await self._inner.aclose()


# -- requests ---------------------------------------------------------------------------------


_URLLIB3: tuple[Any, Any] | None = None  # (HTTPResponse, HTTPHeaderDict), imported on first use


def _requests_response(adapter: Any, request: Any, entry: dict[str, Any]) -> Any:
    global _URLLIB3
    if _URLLIB3 is None:
        import urllib3
        from urllib3._collections import HTTPHeaderDict

        _URLLIB3 = (urllib3.HTTPResponse, HTTPHeaderDict)
    http_response, header_dict_cls = _URLLIB3

    status, headers, body, chunks = decode_response(entry.get("response") or {})
    data = body if body is not None else b"".join(chunks or [])
    header_dict = header_dict_cls()
    for k, v in headers:
        header_dict.add(k, v)
    raw = http_response(
        body=io.BytesIO(data),
        headers=header_dict,
        status=status,
        reason=_reason(status).decode("ascii"),
        preload_content=False,
        decode_content=False,
    )
    return adapter.build_response(request, raw)


def _requests_send(original: Callable[..., Any]) -> Callable[..., Any]:
    import requests

    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        session = _route()
        if session is None:
            return original(self, request, *args, **kwargs)
        body = request.body if isinstance(request.body, (bytes, str, type(None))) else b""
        headers = request.headers
        lower_items = getattr(headers, "lower_items", None)  # requests' CaseInsensitiveDict
        if lower_items is not None:  # names lower-cased already: str(k).lower() == str(k.lower())
            items = [(str(k), str(v)) for k, v in lower_items()]
            action, payload = session.begin_http_lowered(request.method, request.url, items, body)
        else:
            action, payload = session.begin_http(request.method, request.url, headers.items(), body)
        if action == "serve":
            return _requests_response(self, request, payload)
        call: Call = payload
        token = _BYPASS.set(True)
        try:
            response = original(self, request, *args, **kwargs)
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout):
            entry = session.fallback_entry(call)
            if entry is None:
                raise
            return _requests_response(self, request, entry)
        finally:
            _BYPASS.reset(token)
        if response.status_code in _PROVIDER_FAILURE_STATUS:
            entry = session.fallback_entry(call)
            if entry is not None:
                response.close()
                return _requests_response(self, request, entry)
        if call.capture:
            content = response.content  # reads and decodes the whole body once
            session.finish(call, encode_response(response.status_code, response.headers.items(), content, decoded=True))
        return response

    send.__casstore__ = True  # type: ignore[attr-defined]
    return send


def _requests_merge_env(original: Callable[..., Any]) -> Callable[..., Any]:
    from requests.sessions import merge_setting

    def merge_environment_settings(self: Any, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any) -> Any:
        session = CURRENT.get()
        if (session is not None and (session.offline or session.effective_mode == "replay")
                and IN_TOOL.get() is None and not _BYPASS.get()):
            # this call cannot reach the network (replay, or offline), so the proxy and
            # CA-bundle environment that requests reads on every call (about half of a
            # bare requests call's cost) has nothing to configure: the session's own
            # settings are merged as requests does, without the environment lookups
            return {"proxies": merge_setting(proxies, self.proxies), "stream": merge_setting(stream, self.stream),
                    "verify": merge_setting(verify, self.verify), "cert": merge_setting(cert, self.cert)}
        return original(self, url, proxies, stream, verify, cert)

    merge_environment_settings.__casstore__ = True  # type: ignore[attr-defined]
    return merge_environment_settings


# -- the installer ------------------------------------------------------------------------------


def _patch_sync(hx: ModuleType, original: Callable[..., Any]) -> Callable[..., Any]:
    def handle_request(self: Any, request: Any) -> Any:
        return handle_sync(hx, request, lambda: original(self, request))

    handle_request.__casstore__ = True  # type: ignore[attr-defined]
    return handle_request


def _patch_async(hx: ModuleType, original: Callable[..., Any]) -> Callable[..., Any]:
    async def handle_async_request(self: Any, request: Any) -> Any:
        return await handle_async(hx, request, lambda: original(self, request))

    handle_async_request.__casstore__ = True  # type: ignore[attr-defined]
    return handle_async_request


_lock = threading.Lock()
_count = 0
_patches: list[tuple[type, str, Any, Any]] = []


def _set(cls: type, attr: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    original = cls.__dict__.get(attr, None) or getattr(cls, attr)
    new = make(original)
    _patches.append((cls, attr, cls.__dict__.get(attr, None), new))
    setattr(cls, attr, new)


def install() -> None:
    """Count one more active ``use()`` block; patch the HTTP libraries on the first."""
    global _count
    with _lock:
        if _count == 0:
            for name in ("httpx", "httpx2"):
                hx = import_optional(name)
                if hx is None or not hasattr(hx, "HTTPTransport"):
                    continue
                _set(hx.HTTPTransport, "handle_request", functools.partial(_patch_sync, hx))
                _set(hx.AsyncHTTPTransport, "handle_async_request", functools.partial(_patch_async, hx))
            adapters = import_optional("requests.adapters")
            if adapters is not None:
                _set(adapters.HTTPAdapter, "send", _requests_send)
                sessions = import_optional("requests.sessions")
                if sessions is not None:
                    _set(sessions.Session, "merge_environment_settings", _requests_merge_env)
        _count += 1


def uninstall() -> None:
    """Count one ``use()`` block less; restore the original methods after the last."""
    global _count
    with _lock:
        if _count == 0:
            return
        _count -= 1
        if _count:
            return
        while _patches:
            cls, attr, original, new = _patches.pop()
            if cls.__dict__.get(attr) is not new:
                continue  # someone patched over us; leave their patch alone
            if original is None:
                delattr(cls, attr)
            else:
                setattr(cls, attr, original)


def installed() -> bool:
    """True while at least one ``use()`` block is active (the patches are in place)."""
    with _lock:
        return _count > 0
