"""Threads and executor tasks started inside a ``use()`` block carry its casstore context
variables (``Thread.start`` and ``ThreadPoolExecutor.submit`` wrapped while installed).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from .context import BYPASS, CURRENT, IN_TOOL
from .hook import ready

if TYPE_CHECKING:
    from .policy import Patch

__all__ = ["patches", "wrap_thread_start", "wrap_executor_submit"]

# What a thread or executor task started inside a block carries into it (BYPASS: a thread
# started inside a vcrpy cassette leaves its calls to vcrpy too).
CARRIED: tuple[ContextVar[Any], ...] = (CURRENT, IN_TOOL, BYPASS)


def _snapshot() -> list[tuple[ContextVar[Any], Any]] | None:
    """The casstore state to carry, or ``None`` when no block is active here."""
    values = [(var, var.get()) for var in CARRIED]
    return values if any(value is not None for _, value in values) else None


def _bind(state: list[tuple[ContextVar[Any], Any]], fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        tokens = [(var, var.set(value)) for var, value in state]
        try:
            return fn(*args, **kwargs)
        finally:
            for var, token in reversed(tokens):
                var.reset(token)

    return run


def wrap_thread_start(original: Callable[..., Any]) -> Callable[..., Any]:
    def start(self: Any) -> Any:
        state = _snapshot()
        # executor workers are reused across tasks: submit() carries the state per task
        target = getattr(self, "_target", None)
        if state is not None and getattr(target, "__module__", "") != "concurrent.futures.thread":
            self.run = _bind(state, self.run)  # an instance attribute: run() as the thread calls it
        return original(self)

    return start


def wrap_executor_submit(original: Callable[..., Any]) -> Callable[..., Any]:
    def submit(self: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        state = _snapshot()
        if state is None:
            return original(self, fn, *args, **kwargs)
        return original(self, _bind(state, fn), *args, **kwargs)

    return submit


def patches() -> list[Patch]:
    """What the installer wraps (the executor once ``concurrent.futures.thread`` is loaded)."""
    out: list[Patch] = [(threading.Thread, "start", wrap_thread_start)]
    executor = ready("concurrent.futures.thread")
    if executor is not None:
        out.append((executor.ThreadPoolExecutor, "submit", wrap_executor_submit))
    return out
