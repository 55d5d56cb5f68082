"""The aiohttp adapter (3.12 and later): casstore's client middleware, added innermost by the
patched ``ClientSession._request``; a hit is a ``ClientResponse`` fed the recorded chunks.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ..errors import ClientNotSupported
from ..model.recording import encode_response
from .guard import offline
from .policy import (
    CLOSE,
    SEND,
    SERVE,
    Patch,
    adrive,
    begin_http,
    live_call,
    refuse_unrecorded,
    route,
)
from .wire import Sink, check_fault, is_streamed, served, served_async

__all__ = ["check", "patches"]

_CLASSES: dict[Any, Any] = {}  # the classes built on aiohttp's, made once aiohttp is imported
_STREAM_WRITER = False  # ClientResponse(..., stream_writer=) (aiohttp 3.13 and later)
_CHECKED = False


class _Protocol:
    """What a ``StreamReader`` asks of its connection when nothing is on the wire."""

    connected = True
    _reading_paused = False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self, resume_parser: bool = True) -> None:
        pass


class _NoWriter:
    output_size = 0


_NO_WRITER = _NoWriter()


def _stream_class() -> Any:
    cls = _CLASSES.get("stream")
    if cls is not None:
        return cls
    from aiohttp.streams import StreamReader

    class ReplayStream(StreamReader):
        """A response body fed one chunk each time a reader waits (from ``source``, a live stream
        teed into ``sink``, or the recorded ``chunks``)."""

        def __init__(self, loop: Any, chunks: list[bytes] | None = None, source: Any = None, sink: Sink | None = None,
                     pacer: Any = None) -> None:
            super().__init__(_Protocol(), 2**16, loop=loop)  # type: ignore[arg-type]
            self._parts = iter(chunks or ())
            self._pacer, self._served = pacer, 0  # use(timing=...): each chunk at its recorded time
            self._source, self._sink = source, sink
            self.begin_http_chunk_receiving()

        async def _next(self) -> bytes | None:
            if self._source is None:
                if self._pacer is not None:
                    await self._pacer.await_due(self._served)
                    self._served += 1
                return next(self._parts, None)
            data: bytes = await self._source.readany()
            if not data:
                return None
            assert self._sink is not None
            return self._sink.add(data)

        async def _wait(self, func_name: str) -> None:
            chunk = await self._next()
            if chunk is None:
                if self._sink is not None:
                    self._sink.done()
                self.feed_eof()
                return
            self.feed_data(chunk)
            self.end_http_chunk_receiving()

        async def wait_eof(self) -> None:
            while not self.is_eof():
                await self._wait("wait_eof")

    _CLASSES["stream"] = ReplayStream
    return ReplayStream


def _whole(loop: Any, parts: list[bytes]) -> Any:
    """A body that is there at once, as when it arrives in one read."""
    stream = _stream_class()(loop)
    for part in parts:
        stream.feed_data(part)
    stream.feed_eof()
    return stream


def _response(req: Any, s: Any) -> Any:
    """A served answer as the ``ClientResponse`` the session returns."""
    timer_noop, http_11, ci_dict, ci_proxy = _CLASSES["parts"]
    loop = req.loop
    options = {"writer": None, "continue100": None, "timer": timer_noop(), "request_info": req.request_info,
               "traces": [], "loop": loop, "session": req._session}
    if _STREAM_WRITER:
        options["stream_writer"] = _NO_WRITER
    resp = req.response_class(req.method, req.original_url, **options)
    resp._closed = False
    resp.version = http_11
    resp.status = s.status
    resp.reason = s.reason
    resp._headers = ci_proxy(ci_dict(s.headers))
    resp._raw_headers = tuple((k.encode("latin-1"), v.encode("latin-1")) for k, v in s.headers)
    cookies = tuple(v for k, v in s.headers if k.lower() == "set-cookie")
    if cookies:
        resp._raw_cookie_headers = cookies
    head = req.method == "HEAD"
    if s.chunks is not None:  # chunk by chunk, each time the reader waits
        resp.content = _stream_class()(loop, chunks=[] if head else s.chunks, pacer=s.pacer)
    else:
        resp.content = _whole(loop, [s.body] if s.body and not head else [])
    resp.content.on_eof(resp._response_eof)
    return resp


async def _body(req: Any) -> bytes:
    body = req.body
    if isinstance(body, (bytes, bytearray)):
        return bytes(body)
    return await body.as_bytes()  # type: ignore[no-any-return]


async def _capture(session: Any, call: Any, req: Any, response: Any, decoded: bool) -> Any:
    headers = [(str(k), str(v)) for k, v in response.headers.items()]
    if is_streamed(headers):
        sink = Sink(session, call, response.status, headers, decoded)
        response.content = _stream_class()(req.loop, source=response.content, sink=sink)
        return response
    raw = await response.read()
    session.finish(call, encode_response(response.status, headers, raw, decoded=decoded))
    response.content = _whole(req.loop, [raw])  # read whole to record it: the caller reads it again
    return response


def _middleware(decoded: bool) -> Callable[..., Any]:
    """casstore's middleware, one per ``decoded`` (aiohttp undoes content-encoding itself)."""
    made = _CLASSES.get(("middleware", decoded))
    if made is not None:
        return made  # type: ignore[no-any-return]
    import asyncio

    import aiohttp

    failures = (aiohttp.ClientConnectionError, asyncio.TimeoutError)

    async def casstore_middleware(req: Any, handler: Callable[..., Any]) -> Any:
        session = route(req.url)
        if session is None:
            return await handler(req)
        if "Upgrade" in req.headers:  # a websocket: not recorded, refused where a block never goes live
            refuse_unrecorded(session, str(req.url), "websocket")
            return await handler(req)
        action, payload = begin_http(session, req.method, str(req.url), req.headers.items(), await _body(req))
        if action == "serve":
            reset = getattr(aiohttp, "ClientConnectionResetError", aiohttp.ServerDisconnectedError)
            check_fault(payload, aiohttp.ServerTimeoutError, reset)
            return _response(req, await served_async(session, payload))

        async def perform(op: str, arg: Any) -> Any:
            if op == SEND:
                return await handler(req)
            if op == CLOSE:
                return arg.release()
            if op == SERVE:
                return _response(req, served(arg))
            return await _capture(session, payload, req, arg, decoded)

        return await adrive(live_call(session, payload, failures, "status"), perform)

    _CLASSES[("middleware", decoded)] = casstore_middleware
    return casstore_middleware


def _url_of(client: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The URL of ``ClientSession._request(method, str_or_url, ...)`` (the base URL applied)."""
    url = args[1] if len(args) > 1 else kwargs.get("str_or_url")
    build = getattr(client, "_build_url", None)
    if url is not None and callable(build):
        try:
            return build(url)
        except Exception:  # noqa: BLE001 - only for the offline message; aiohttp reports a bad URL itself
            return url
    return url


def _request(original: Callable[..., Any]) -> Callable[..., Any]:
    async def _request(self: Any, *args: Any, **kwargs: Any) -> Any:
        # offline, the middleware goes in even so: it refuses a redirect hop to a host not allowed
        if route(lambda: _url_of(self, args, kwargs)) is None and not offline():
            return await original(self, *args, **kwargs)
        given = kwargs.get("middlewares")
        effective = tuple(self._middlewares if given is None else given)
        auto = kwargs.get("auto_decompress")
        auto = self._auto_decompress if auto is None else auto
        kwargs["middlewares"] = (*effective, _middleware(bool(auto)))
        return await original(self, *args, **kwargs)

    return _request


def check() -> None:
    """Raise :class:`ClientNotSupported` when the installed aiohttp lacks what the adapter uses."""
    global _STREAM_WRITER, _CHECKED
    if _CHECKED:
        return
    try:
        import aiohttp
        from aiohttp import payload, streams
    except ImportError:
        _CHECKED = True
        return

    version = getattr(aiohttp, "__version__", "?")
    missing: list[str] = []
    try:
        request_params = inspect.signature(aiohttp.ClientSession._request).parameters
        response_params = inspect.signature(aiohttp.ClientResponse.__init__).parameters
    except (TypeError, ValueError, AttributeError):
        request_params = response_params = {}  # type: ignore[assignment]
    if "middlewares" not in request_params or "auto_decompress" not in request_params:
        missing.append("client middlewares")
    known = {"self", "method", "url", "writer", "continue100", "timer", "request_info", "traces", "loop", "session", "stream_writer"}
    unknown = [p for p, v in response_params.items() if p not in known and v.default is inspect.Parameter.empty]
    passed = known - {"self", "method", "url", "stream_writer"}
    if not response_params or unknown or not passed <= set(response_params):
        missing.append("ClientResponse(...) as casstore builds it")
    for obj, attr in ((streams.StreamReader, "_wait"), (streams.StreamReader, "begin_http_chunk_receiving"), (payload.Payload, "as_bytes")):
        if not hasattr(obj, attr):
            missing.append(f"{obj.__name__}.{attr}")
    if missing:
        raise ClientNotSupported(
            f"casstore cannot intercept aiohttp {version} (no {', '.join(missing)}); "
            "casstore supports aiohttp 3.12 and later: upgrade aiohttp, or uninstall it"
        )
    from aiohttp.helpers import TimerNoop
    from aiohttp.http import HttpVersion11
    from multidict import CIMultiDict, CIMultiDictProxy

    _CLASSES["parts"] = (TimerNoop, HttpVersion11, CIMultiDict, CIMultiDictProxy)
    _STREAM_WRITER = "stream_writer" in response_params
    _CHECKED = True


def patches() -> list[Patch]:
    """What the installer patches for aiohttp (nothing when it is not installed)."""
    try:
        import aiohttp
    except ImportError:
        return []
    check()
    return [(aiohttp.ClientSession, "_request", _request)]
