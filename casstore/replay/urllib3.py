"""The urllib3 adapter (and so botocore/boto3): ``HTTPConnectionPool.urlopen``; a hit is a
real ``urllib3.HTTPResponse`` over an ``http.client.HTTPResponse`` of the recorded bytes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ..errors import CasstoreError, ClientNotSupported
from ..model.recording import encode_response
from .guard import origin
from .hook import ready
from .httpclient import TeeFile, http_response
from .policy import CLOSE, SEND, SERVE, Patch, begin_http, drive, live_call, route
from .wire import (
    Sink,
    check_fault,
    is_streamed,
    served,
    served_live,
    served_sync,
)

__all__ = ["check", "patches"]

_RESPONSE_KW: frozenset[str] = frozenset()  # the HTTPResponse keyword arguments this urllib3 takes
_URLOPEN_SIG: inspect.Signature | None = None


def _body(body: Any) -> tuple[Any, bytes | str | None]:
    """``(what to send, what counts for identity)``; a file or iterator is read once."""
    if body is None or isinstance(body, (bytes, str)):
        return body, body
    if hasattr(body, "read"):
        data = body.read()
        data = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        return data, data
    try:
        data = bytes(memoryview(body))
    except TypeError:
        data = b"".join(p.encode("utf-8") if isinstance(p, str) else bytes(p) for p in body)
    return data, data


def _response(s: Any, method: str, url: str, kw: dict[str, Any]) -> Any:
    """A served answer as the ``urllib3.HTTPResponse`` urlopen returns."""
    import urllib3
    from urllib3._collections import HTTPHeaderDict

    raw = http_response(s, method, url)
    headers = HTTPHeaderDict()
    for k, v in s.headers:
        headers.add(k, v)
    options: dict[str, Any] = {
        "body": raw,
        "headers": headers,
        "status": s.status,
        "version": 11,
        "version_string": "HTTP/1.1",
        "reason": s.reason,
        "preload_content": kw.get("preload_content", True),
        "decode_content": kw.get("decode_content", True),
        "original_response": raw,
        "enforce_content_length": kw.get("enforce_content_length", True),
        "request_method": method,
        "request_url": url,
        "retries": kw.get("retries"),  # as urlopen gives it: PoolManager's redirect history
    }
    return urllib3.HTTPResponse(**{k: v for k, v in options.items() if k in _RESPONSE_KW})


def _capture(session: Any, call: Any, response: Any, method: str, full: str, kw: dict[str, Any]) -> Any:
    """Record a live response; returns what the caller gets (a stream teed, else the body again)."""
    headers = [(str(k), str(v)) for k, v in response.headers.items()]
    if kw.get("preload_content", True):  # read whole already, decoded as the caller asked
        session.finish(call, encode_response(response.status, headers, response.data, decoded=bool(kw.get("decode_content", True))))
        return response
    fp = response._fp  # the http.client response urllib3 reads through
    if is_streamed(headers) and fp is not None and hasattr(fp, "fp"):
        sink = Sink(session, call, response.status, headers, decoded=False)
        fp.fp = TeeFile(fp.fp, sink, bool(getattr(fp, "chunked", False)))
        return response
    try:
        raw = response.read(decode_content=False)
    finally:
        response.release_conn()
    session.finish(call, encode_response(response.status, headers, raw))
    return _response(served_live(response.status, response.reason, headers, raw), method, full, kw)


def _urlopen(original: Callable[..., Any]) -> Callable[..., Any]:
    import urllib3
    from urllib3.util import Retry

    failures = (urllib3.exceptions.HTTPError, OSError)

    def urlopen(self: Any, method: str, url: str, body: Any = None, headers: Any = None, *rest: Any, **kw: Any) -> Any:
        full = url if url.startswith(("http://", "https://")) else (
            origin(self.scheme, self.host, self.port) + (url if url.startswith("/") else "/" + url))
        session = route(full)
        if session is None:
            return original(self, method, url, body, headers, *rest, **kw)
        if rest:  # options given by position: name them once, so kw holds them all
            assert _URLOPEN_SIG is not None
            bound = _URLOPEN_SIG.bind(self, method, url, body, headers, *rest, **kw).arguments
            kw = {k: v for k, v in bound.items() if k not in ("self", "method", "url", "body", "headers")}
            kw.update(kw.pop("response_kw", {}))
        if not isinstance(kw.get("retries"), Retry):  # what urlopen makes of it, for response.retries
            kw = {**kw, "retries": Retry.from_int(kw.get("retries"), redirect=kw.get("redirect", True), default=self.retries)}
        sent, ident_body = _body(body)
        header_items = [
            (k.decode("latin-1") if isinstance(k, bytes) else k, v.decode("latin-1") if isinstance(v, bytes) else v)
            for k, v in (headers if headers is not None else self.headers).items()
        ]  # botocore sends its header values as bytes
        action, payload = begin_http(session, method, full, header_items, ident_body)
        if action == "serve":
            import urllib3.exceptions as u3e

            check_fault(payload, lambda m: u3e.ReadTimeoutError(self, full, m),
                        lambda m: u3e.ProtocolError(m, ConnectionResetError(m)))
            return _response(served_sync(session, payload), method, full, kw)

        def perform(op: str, arg: Any) -> Any:
            if op == SEND:
                return original(self, method, url, sent, headers, **kw)
            if op == CLOSE:
                arg.drain_conn()
                return arg.release_conn()
            if op == SERVE:
                return _response(served(arg), method, full, kw)
            return _capture(session, payload, arg, method, full, kw)

        return drive(live_call(session, payload, failures, "status"), perform)

    return urlopen


def _botocore_send(original: Callable[..., Any]) -> Callable[..., Any]:
    from botocore.exceptions import HTTPClientError

    def send(self: Any, request: Any) -> Any:
        try:
            return original(self, request)
        except HTTPClientError as exc:
            inner = exc.kwargs.get("error")
            if isinstance(inner, CasstoreError):
                raise inner from None
            raise

    return send


def _release(version: str) -> tuple[int, int]:
    """``"1.26.20"`` -> ``(1, 26)``; an unreadable version counts as new (the feature check decides)."""
    try:
        major, minor = version.split(".")[:2]
        return int(major), int("".join(c for c in minor if c.isdigit()) or 0)
    except ValueError:
        return (99, 0)


def check() -> None:
    """Raise :class:`ClientNotSupported` when the installed urllib3 lacks what the patch uses."""
    global _RESPONSE_KW, _URLOPEN_SIG
    if _URLOPEN_SIG is not None:  # checked already
        return
    try:
        import urllib3
    except ImportError:
        return
    version = getattr(urllib3, "__version__", "?")
    if _release(version) < (1, 26):
        raise ClientNotSupported(
            f"casstore cannot intercept urllib3 {version}: casstore supports urllib3 1.26 and 2.x; "
            "upgrade urllib3 (pip install 'urllib3>=1.26')"
        )
    try:
        params = inspect.signature(urllib3.HTTPResponse.__init__).parameters
        sig = inspect.signature(urllib3.HTTPConnectionPool.urlopen)
    except (TypeError, ValueError, AttributeError) as exc:
        raise ClientNotSupported(f"casstore cannot intercept urllib3 {version}: {exc}") from None
    needed = {"body", "headers", "status", "reason", "preload_content", "decode_content", "original_response"}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())  # 1.26: **response_kw
    missing = sorted(needed - set(params)) + [
        p for p in ("preload_content", "decode_content") if p not in sig.parameters and not takes_any
    ]
    if missing:
        raise ClientNotSupported(
            f"casstore cannot intercept urllib3 {version} (no {', '.join(missing)}); "
            "casstore supports urllib3 1.26 and 2.x"
        )
    _RESPONSE_KW, _URLOPEN_SIG = frozenset(params), sig


def patches() -> list[Patch]:
    """What the installer patches for urllib3 (nothing when it is not installed)."""
    try:
        import urllib3
    except ImportError:
        return []
    check()
    out: list[Patch] = [(urllib3.HTTPConnectionPool, "urlopen", _urlopen)]
    httpsession = ready("botocore.httpsession")  # only when botocore is in use
    if httpsession is not None and hasattr(httpsession, "URLLib3Session"):
        out.append((httpsession.URLLib3Session, "send", _botocore_send))
    return out
