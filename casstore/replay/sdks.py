"""The OpenAI and Anthropic SDKs retry and wrap every error of their HTTP client: a casstore
error travels through their ``request`` as :class:`.guard.Escape` and is re-raised here.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

from .guard import IN_SDK, Escape
from .hook import ready
from .policy import Patch

__all__ = ["patches"]

_CLIENT_MODULES = ("openai._base_client", "anthropic._base_client")


@contextlib.contextmanager
def _sdk_call() -> Iterator[None]:
    token = IN_SDK.set(threading.get_ident())
    try:
        yield
    except Escape as escape:
        raise escape.error.with_traceback(escape.__traceback__) from None
    finally:
        IN_SDK.reset(token)


def _wrap_sync(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _sdk_call():
            return original(self, *args, **kwargs)

    return request


def _wrap_async(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _sdk_call():
            return await original(self, *args, **kwargs)

    return request


def patches() -> list[Patch]:
    """``request`` of the SDKs' sync and async base clients, for each SDK loaded."""
    out: list[Patch] = []
    for name in _CLIENT_MODULES:
        module = ready(name)
        if module is None:
            continue
        for cls_name, make in (("SyncAPIClient", _wrap_sync), ("AsyncAPIClient", _wrap_async)):
            cls = getattr(module, cls_name, None)
            if isinstance(cls, type) and callable(getattr(cls, "request", None)):
                out.append((cls, "request", make))
    return out
