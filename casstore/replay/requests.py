"""The requests adapter: ``HTTPAdapter.send``, and requests' per-call environment and mapping
helpers answered at once where they cannot matter."""

from __future__ import annotations

import functools
import io
import time
from collections.abc import Callable
from typing import Any

from ..model.recording import decode_response, encode_response
from .context import BYPASS, CURRENT, IN_TOOL
from .policy import CLOSE, SEND, SERVE, Patch, begin_http, drive, live_call, reason, route
from .session import Call
from .timing import PacedReader, Pacer
from .wire import check_fault, is_streamed, served_live

__all__ = ["patches"]

_URLLIB3: tuple[Any, Any] | None = None  # (HTTPResponse, HTTPHeaderDict), imported on first use
# (HTTPAdapter.build_response, Response, CaseInsensitiveDict, get_encoding_from_headers), set by patches()
_REQUESTS: tuple[Any, Any, Any, Any] | None = None
_ENCODINGS: dict[Any, Any] = {}  # content-type -> get_encoding_from_headers of it (bounded)


class _Body(io.BytesIO):
    """A served body that closes itself at its end, as a socket's response does (urllib3's
    ``stream(None)`` reads until its file is closed)."""

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        if not data and size != 0:
            self.close()
        return data


def _raw_response(status: int, headers: Any, fp: Any, reason_text: str) -> Any:
    """A ``urllib3.HTTPResponse`` over ``fp``, as ``HTTPAdapter.send`` hands to requests."""
    global _URLLIB3
    if _URLLIB3 is None:
        import urllib3
        from urllib3._collections import HTTPHeaderDict

        _URLLIB3 = (urllib3.HTTPResponse, HTTPHeaderDict)
    http_response, header_dict_cls = _URLLIB3
    header_dict = header_dict_cls()
    for k, v in headers:
        header_dict.add(k, v)
    return http_response(body=fp, headers=header_dict, status=status, reason=reason_text,
                         preload_content=False, decode_content=False)


def _plain(headers: list[tuple[str, str]]) -> bool:
    """No content-encoding to undo: the served bytes are the body requests would read."""
    for k, v in headers:
        if k.lower() == "content-encoding" and v.strip().lower() not in ("", "identity"):
            return False
    return True


def _build(adapter: Any, request: Any, raw: Any, headers: list[tuple[str, str]]) -> Any:
    """``adapter.build_response(request, raw)``; requests' own without reading the headers back."""
    if _REQUESTS is None or type(adapter).build_response is not _REQUESTS[0]:
        return adapter.build_response(request, raw)
    _, response_cls, header_cls, encoding_of = _REQUESTS
    response = response_cls()
    response.status_code = raw.status
    merged = header_cls()
    first: dict[str, str] = {}  # lower-cased name -> the name as first given
    for k, v in headers:
        lower = k.lower()
        name = first.get(lower)
        if name is None:
            first[lower] = k
            merged[k] = v
        else:  # as urllib3's HTTPHeaderDict joins them, under the name as first given
            merged[name] = f"{merged[name]}, {v}"
    response.headers = merged
    name = first.get("content-type")
    content_type = None if name is None else merged[name]
    encoding = _ENCODINGS.get(content_type, _ENCODINGS)
    if encoding is _ENCODINGS:  # requests' encoding depends on the content-type alone
        encoding = encoding_of(merged)
        if len(_ENCODINGS) < 256:
            _ENCODINGS[content_type] = encoding
    response.encoding = encoding
    response.raw = raw
    response.reason = raw.reason
    response.url = request.url.decode("utf-8") if isinstance(request.url, bytes) else request.url
    response.request = request
    response.connection = adapter
    return response


def _requests_response(adapter: Any, request: Any, entry: dict[str, Any], pacer: Pacer | None = None,
                       stream: bool = True) -> Any:
    status, headers, body, chunks = decode_response(entry.get("response") or {})
    data = body if body is not None else b"".join(chunks or [])
    if pacer is not None:
        pacer.wait()
    elif not stream and _plain(headers):
        # without stream=True requests reads the whole body next: hand it over read, raw at its end
        raw = _raw_response(status, headers, _Body(b""), reason(status).decode("ascii"))
        response = _build(adapter, request, raw, headers)
        response._content = data
        response._content_consumed = True
        return response
    fp = PacedReader(chunks, pacer) if (pacer is not None and chunks is not None) else _Body(data)
    return adapter.build_response(request, _raw_response(status, headers, fp, reason(status).decode("ascii")))


def _capture_raw(session: Any, call: Call, response: Any) -> Any:
    """Record a ``stream=True`` response from the bytes received; the caller gets them again."""
    raw = response.raw
    data = raw.read(decode_content=False)
    raw.release_conn()
    items = [(str(k), str(v)) for k, v in raw.headers.items()]
    session.finish(call, encode_response(response.status_code, items, data))
    response.raw = _raw_response(response.status_code, served_live(response.status_code, "", items, data).headers,
                                 _Body(data), str(getattr(raw, "reason", "") or ""))
    return response


def _read_stream(response: Any, call: Call) -> None:
    """Read a live event stream's body read by read, noting when each part arrived."""
    parts: list[bytes] = []
    total = 0
    read1 = getattr(response.raw, "read1", None)
    if read1 is None:  # urllib3 1.26 has none: its http.client response's (no content-encoding)
        read1 = response.raw._fp.read1
    else:
        read1 = functools.partial(read1, decode_content=True)
    while True:
        piece = read1(65536)
        if not piece:
            break
        parts.append(piece)
        total += len(piece)
        call.marks.append((time.monotonic(), total))
    response._content = b"".join(parts)
    response._content_consumed = True


def _reads_parts(raw: Any) -> bool:
    """A stream can be read as its parts arrive (urllib3 2.x; 1.26 when not compressed)."""
    if hasattr(raw, "read1"):
        return True
    return hasattr(getattr(raw, "_fp", None), "read1") and not raw.headers.get("content-encoding")


def _requests_send(original: Callable[..., Any]) -> Callable[..., Any]:
    import requests

    failures = (requests.exceptions.ConnectionError, requests.exceptions.Timeout)

    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        session = route(request.url)
        if session is None:
            return original(self, request, *args, **kwargs)
        body = request.body if isinstance(request.body, (bytes, str, type(None))) else b""
        headers = request.headers
        lower_items = getattr(headers, "lower_items", None)  # requests' CaseInsensitiveDict
        if lower_items is not None:  # names lower-cased already: str(k).lower() == str(k.lower())
            items = [(str(k), str(v)) for k, v in lower_items()]
            action, payload = begin_http(session, request.method, request.url, items, body, lowered=True)
        else:
            action, payload = begin_http(session, request.method, request.url, headers.items(), body)
        if action == "serve":
            check_fault(payload, lambda m: requests.exceptions.ReadTimeout(m, request=request),
                        lambda m: requests.exceptions.ConnectionError(m, request=request))
            stream = kwargs.get("stream", args[0] if args else False)
            return _requests_response(self, request, payload, session.pacer(payload), stream)
        call: Call = payload

        def perform(op: str, arg: Any) -> Any:
            if op == SEND:
                return original(self, request, *args, **kwargs)
            if op == SERVE:
                return _requests_response(self, request, arg)
            if op == CLOSE:
                return arg.close()
            if is_streamed(arg.headers.items()) and _reads_parts(arg.raw):
                _read_stream(arg, call)  # as it arrives: when each part came is recorded (timing)
            elif kwargs.get("stream", args[0] if args else False) and hasattr(arg.raw, "read"):
                return _capture_raw(session, call, arg)
            content = arg.content  # CAPTURE: reads and decodes the whole body once
            session.finish(call, encode_response(arg.status_code, arg.headers.items(), content, decoded=True))
            return arg

        return drive(live_call(session, call, failures), perform)

    return send


def _requests_merge_env(original: Callable[..., Any]) -> Callable[..., Any]:
    from collections import OrderedDict

    from requests.sessions import merge_setting

    def merge_proxies(request_setting: Any, session_setting: Any) -> Any:
        if type(request_setting) is dict and type(session_setting) is dict:
            # merge_setting of two dicts without its runtime protocol checks
            merged = OrderedDict(session_setting)
            merged.update(request_setting)
            for key in [k for k, v in merged.items() if v is None]:
                del merged[key]
            return merged
        return merge_setting(request_setting, session_setting)

    def merge_environment_settings(self: Any, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any) -> Any:
        session = CURRENT.get()
        if (session is not None and (session.offline or session.effective_mode == "replay")
                and not session.closed and IN_TOOL.get() is None and not BYPASS.get()):
            # a call that cannot go live: the session's settings merged as requests does,
            # without its proxy and CA-bundle environment lookups
            return {"proxies": merge_proxies(proxies, self.proxies), "stream": merge_setting(stream, self.stream),
                    "verify": merge_setting(verify, self.verify), "cert": merge_setting(cert, self.cert)}
        return original(self, url, proxies, stream, verify, cert)

    return merge_environment_settings


def _mapping_types() -> tuple[type, ...]:
    """The exact mapping types requests hands its own helpers."""
    from collections import OrderedDict

    from requests.structures import CaseInsensitiveDict

    return (dict, OrderedDict, CaseInsensitiveDict)


def _requests_key_val_list(original: Callable[..., Any]) -> Callable[..., Any]:
    """requests' ``to_key_val_list`` without its runtime ``Protocol`` check for an exact mapping."""
    exact = _mapping_types()

    def to_key_val_list(value: Any) -> Any:
        if type(value) in exact:
            return list(value.items())
        return original(value)

    return to_key_val_list


def _requests_encode_params(original: Any) -> Any:
    """``RequestEncodingMixin._encode_params`` answering ``""`` at once for an empty exact mapping."""
    function = original.__func__ if isinstance(original, staticmethod) else original
    exact = _mapping_types()

    def _encode_params(data: Any) -> Any:
        if type(data) in exact and not data:
            return ""
        return function(data)

    return staticmethod(_encode_params)


def patches() -> list[Patch]:
    """What the installer patches for requests (nothing when it is not installed)."""
    global _REQUESTS
    try:
        import requests.adapters
        import requests.models
        import requests.sessions
    except ImportError:
        return []
    _REQUESTS = (requests.adapters.HTTPAdapter.build_response, requests.models.Response,
                 requests.structures.CaseInsensitiveDict, requests.utils.get_encoding_from_headers)
    return [
        (requests.adapters.HTTPAdapter, "send", _requests_send),
        (requests.sessions.Session, "merge_environment_settings", _requests_merge_env),
        (requests.sessions, "to_key_val_list", _requests_key_val_list),
        (requests.models, "to_key_val_list", _requests_key_val_list),
        (requests.models.RequestEncodingMixin, "_encode_params", _requests_encode_params),
    ]
