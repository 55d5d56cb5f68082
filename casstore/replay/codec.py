"""Tool results on tape: a raised exception encoded for the cassette and rebuilt on replay."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Mapping
from typing import Any

from ..model.identity import jsonable

__all__ = ["ReplayedError", "encode_exception", "rebuild_exception", "tool_outcome"]


class ReplayedError(Exception):
    """A recorded tool exception whose class cannot be rebuilt on replay."""


def encode_exception(exc: BaseException) -> dict[str, Any]:
    cls = type(exc)
    return {
        "type": f"{cls.__module__}.{cls.__qualname__}",
        "message": str(exc),
        "args": jsonable(list(exc.args)),
    }


def rebuild_exception(error: Mapping[str, Any]) -> BaseException:
    """The recorded exception, rebuilt only from classes already imported (never imports)."""
    type_name = str(error.get("type", ""))
    message = str(error.get("message", ""))
    parts = type_name.split(".")
    for i in range(len(parts) - 1, 0, -1):  # longest module prefix that is imported
        obj: Any = sys.modules.get(".".join(parts[:i]))
        if obj is None:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr, None)
        if isinstance(obj, type) and issubclass(obj, Exception):
            with contextlib.suppress(Exception):
                return obj(*(error.get("args") or [message]))
        break
    return ReplayedError(f"{type_name}: {message}")


def tool_outcome(entry: Mapping[str, Any]) -> Any:
    """The recorded result of a tool entry, or its exception raised."""
    response = entry.get("response") or {}
    fault = response.get("fault")
    if fault == "timeout":
        raise TimeoutError(f"[casstore-fault:timeout] injected timeout of tool call {entry.get('seq')}")
    if fault == "reset":
        raise ConnectionResetError(f"[casstore-fault:reset] injected connection reset of tool call {entry.get('seq')}")
    if "error" in response:
        raise rebuild_exception(response["error"])
    return response.get("result")
