"""The per-call policy every client adapter shares, on top of the session's decisions.

* :func:`route` -- which session sees this call (``None``: pass it through untouched);
* :func:`live_call` -- one live call: send it; with ``use(fallback="replay")`` answer a
  connection failure or a provider failure status from the recording; capture it for
  recording (or drift). A generator that yields the I/O it needs, run by :func:`drive`
  (sync) or :func:`adrive` (async) with the adapter's ``perform(op, arg)``;
* :func:`transparent` -- casstore errors also typed as the loaded SDKs' base error;
* :func:`reason` -- reason phrases for served responses.

A replay hit never enters :func:`live_call`: an adapter serves ``Session.begin``'s
``("serve", entry)`` directly, so the hot path has no generator to drive.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Generator
from typing import Any, cast

from ..errors import CasstoreError, LiveCallBlocked
from ..model.recording import reason_phrase
from .context import BYPASS, CURRENT, IN_TOOL
from .session import Call, Session

__all__ = [
    "route", "transparent", "live_call", "drive", "adrive", "reason",
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
# active: ``(class, attribute, make)``, where ``make(original) -> replacement``.
Patch = tuple[type, str, Callable[[Callable[..., Any]], Callable[..., Any]]]

_SDK_ERRORS = (("openai", "OpenAIError"), ("anthropic", "AnthropicError"))
_TRANSPARENT: dict[tuple[type, tuple[type, ...]], type] = {}
_REASONS: dict[int, bytes] = {}


def transparent(exc: CasstoreError) -> CasstoreError:
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


def route() -> Session | None:
    """The session that should see this call, or ``None`` to pass it through."""
    if BYPASS.get():
        return None
    tool_session = IN_TOOL.get()
    if tool_session is not None:
        if tool_session.offline:
            raise transparent(LiveCallBlocked(
                f"CASSTORE_OFFLINE=1: live call from tool code blocked (cassette {tool_session.name!r})"
            ))
        return None
    return CURRENT.get()


def reason(status: int) -> bytes:
    """The reason phrase of a served response's status (cached)."""
    phrase = _REASONS.get(status)
    if phrase is None:
        phrase = reason_phrase(status).encode("ascii")
        if 100 <= status < 600:
            _REASONS[status] = phrase
    return phrase


def live_call(session: Session, call: Call, failures: tuple[type[BaseException], ...],
              status: str = "status_code") -> Steps:
    """The policy of one live call, as a generator that yields the I/O it needs.

    ``call`` is the session's ``("live", call)`` decision; ``failures`` the client's
    connection errors and ``status`` its responses' status attribute. With
    ``use(fallback="replay")`` a failure or a provider failure status is answered from
    the recording; a captured call is recorded (or compared, in drift mode). Returns the
    response to hand to the client. :func:`drive` / :func:`adrive` run it.
    """
    try:
        response = yield SEND, None
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
    """Run :func:`live_call`, performing each step with ``perform(op, arg)``."""
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            op, arg = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as done:
            return done.value
        value, error = None, None
        try:
            value = perform(op, arg)
        except Exception as exc:  # handed to the policy, which decides (fallback or raise)
            error = exc


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
        try:
            value = await perform(op, arg)
        except Exception as exc:  # handed to the policy, which decides (fallback or raise)
            error = exc
