"""The per-call policy every client adapter shares: which session sees a call (:func:`route`),
and what follows a live call (:func:`live_call`), run by :func:`drive` / :func:`adrive`.
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Awaitable, Callable, Generator
from types import ModuleType
from typing import Any

from ..errors import CasstoreError
from ..model.recording import reason_phrase
from ..model.urls import mask_url
from .context import BYPASS, CURRENT, IN_TOOL
from .guard import allowed, blocked_error, check_live, host_port, offline, transparent
from .hook import genuine
from .session import Call, Session

__all__ = [
    "route", "begin_http", "transparent", "live_call", "drive", "adrive", "reason", "refuse_unrecorded",
    "PROVIDER_FAILURE_STATUS", "SEND", "CLOSE", "SERVE", "CAPTURE", "Steps", "Patch",
]


# Statuses on which ``use(fallback="replay")`` answers from the recording instead.
PROVIDER_FAILURE_STATUS = frozenset({429, 500, 502, 503, 504, 529})
# The I/O steps :func:`live_call` asks its adapter to perform, the only part that differs
# between clients and between sync and async: SEND the live call (-> the response), CLOSE
# a response, SERVE a recorded entry (-> the client's response built from it), CAPTURE a
# response (record its body or tee its stream; -> the response to hand to the client).
SEND, CLOSE, SERVE, CAPTURE = "send", "close", "serve", "capture"
Steps = Generator[tuple[str, Any], Any, Any]
# What an adapter asks the installer (:mod:`.install`) to patch while a use() block is
# active: ``(class or module, attribute, make)``, where ``make(original) -> replacement``.
Patch = tuple[type | ModuleType, str, Callable[[Callable[..., Any]], Callable[..., Any]]]

_REASONS: dict[int, bytes] = {}


def route(url: Any = None) -> Session | None:
    """The session that should see a call to ``url`` (or a function giving it, called only for
    an offline refusal), or ``None`` to pass it through."""
    if BYPASS.get():
        return None
    tool_session = IN_TOOL.get()
    if tool_session is not None and not tool_session.closed:
        if tool_session.offline:
            try:
                tool_session.refuse_live(_url_text(url), "live call from tool code")
            except CasstoreError as exc:
                raise transparent(exc) from None
        return None
    session = CURRENT.get()
    if session is None or session.closed:
        try:
            if offline() and not _answered_below():
                check_live(_url_text(url), "live call outside any casstore.use() block")
        except CasstoreError as exc:
            raise transparent(exc) from None
        return None
    return session


def begin_http(session: Session, method: str, url: str, headers: Any, body: bytes | str | None,
               lowered: bool = False) -> tuple[str, Any]:
    """The session's decision on an HTTP call (``lowered``: header names are lower-cased already)."""
    try:
        if lowered:
            return session.begin_http_lowered(method, url, headers, body)
        return session.begin_http(method, url, headers, body)
    except CasstoreError as exc:
        raise transparent(exc) from None


def _answered_below() -> bool:
    """vcrpy's stand-in replaces ``http.client.HTTPConnection`` (one of its cassettes is
    active): offline leaves the call to it and refuses only the connections it opens."""
    return http.client.HTTPConnection is not genuine(http.client, "HTTPConnection")


def refuse_unrecorded(session: Session, url: str, what: str) -> None:
    """A call casstore cannot record (a websocket, ``ftp://``): refused in strict ``replay`` and
    offline unless its host is allowed."""
    if session.mode != "replay" and not session.offline:
        return
    host, port = host_port(url)
    if allowed(host, port, session.allowed_hosts):
        return
    why = "CASSTORE_OFFLINE=1" if session.offline else "strict replay makes no live call in this process"
    raise transparent(blocked_error(host, port, (
        f"{why}: {what} {mask_url(url)} is not recorded by casstore (cassette {session.name!r}, "
        f"mode {session.mode} from {session.mode_source}); live connection")))


def _url_text(url: Any) -> str:
    if callable(url):
        url = url()
    return str(url) if url is not None else ""


def reason(status: int) -> bytes:  # cached
    phrase = _REASONS.get(status)
    if phrase is None:
        phrase = reason_phrase(status).encode("ascii")
        if 100 <= status < 600:
            _REASONS[status] = phrase
    return phrase


def live_call(session: Session, call: Call, failures: tuple[type[BaseException], ...],
              status: str = "status_code") -> Steps:
    """One live call as a generator of the I/O steps it needs; returns the client's response.
    ``failures``: the client's connection errors; ``status``: its responses' status attribute."""
    try:
        response = yield SEND, None
        call.responded = time.monotonic()  # the recorded time to first byte (timed replay)
    except failures:
        entry = session.fallback_entry(call)
        if entry is None:
            raise
        return (yield SERVE, entry)
    if getattr(response, status) in PROVIDER_FAILURE_STATUS:
        entry = session.fallback_entry(call)
        if entry is not None:
            yield CLOSE, response
            return (yield SERVE, entry)
    if not call.capture:
        return response
    return (yield CAPTURE, response)


def drive(steps: Steps, perform: Callable[[str, Any], Any]) -> Any:
    """Run :func:`live_call` with ``perform(op, arg)``; SEND under ``BYPASS``, which the layers below pass on."""
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            op, arg = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as done:
            return done.value
        value, error = None, None
        token = BYPASS.set(True) if op == SEND else None
        try:
            value = perform(op, arg)
        except Exception as exc:  # handed to the policy, which decides (fallback or raise)
            error = exc
        finally:
            if token is not None:
                BYPASS.reset(token)


async def adrive(steps: Steps, perform: Callable[[str, Any], Awaitable[Any]]) -> Any:
    """The async twin of :func:`drive`: the same policy, awaited I/O."""
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            op, arg = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as done:
            return done.value
        value, error = None, None
        token = BYPASS.set(True) if op == SEND else None
        try:
            value = await perform(op, arg)
        except Exception as exc:  # handed to the policy, which decides (fallback or raise)
            error = exc
        finally:
            if token is not None:
                BYPASS.reset(token)
