"""``use(deterministic=True)``: time, datetime, uuid and random draw from the block's tape
(:mod:`.draws`) while a deterministic block is active; ``datetime`` and ``date`` are C
types, so the module attributes are swapped for subclasses.
"""

from __future__ import annotations

import datetime as _dt
import functools
import random as _random
import threading
import time as _time
import uuid as _uuid
from collections.abc import Callable
from typing import Any

from .context import BYPASS, CURRENT, IN_TOOL
from .draws import Draws

__all__ = ["activate", "deactivate", "active_draws"]

_REAL_DATETIME = _dt.datetime
_REAL_DATE = _dt.date


def active_draws() -> Draws | None:
    """The draws of the deterministic block that owns this call."""
    session = CURRENT.get()
    draws = getattr(session, "draws", None) if session is not None else None
    if draws is None or not draws.active or BYPASS.get() or IN_TOOL.get() is not None:
        return None
    return draws  # type: ignore[no-any-return]


def _drawn(kind: str, real: Callable[..., Any], encode: Callable[[Any], Any],
           decode: Callable[[Any], Any]) -> Callable[..., Any]:
    @functools.wraps(real)
    def function(*args: Any, **kwargs: Any) -> Any:
        d = active_draws()
        if d is None:
            return real(*args, **kwargs)
        return d.draw(kind, lambda: real(*args, **kwargs), encode, decode)

    return function


_time_time = _drawn("time.time", _time.time, float, float)
_time_time_ns = _drawn("time.time_ns", _time.time_ns, int, int)
_uuid_uuid1 = _drawn("uuid.uuid1", _uuid.uuid1, str, _uuid.UUID)
_uuid_uuid4 = _drawn("uuid.uuid4", _uuid.uuid4, str, _uuid.UUID)


def _utcnow() -> _dt.datetime:
    return _REAL_DATETIME.now(_dt.timezone.utc).replace(tzinfo=None)  # (utcnow() is deprecated)


_datetime_now = _drawn("datetime.now", _REAL_DATETIME.now, _REAL_DATETIME.isoformat, _REAL_DATETIME.fromisoformat)
_datetime_utcnow = _drawn("datetime.utcnow", _utcnow, _REAL_DATETIME.isoformat, _REAL_DATETIME.fromisoformat)
_date_today = _drawn("date.today", _REAL_DATE.today, _REAL_DATE.isoformat, _REAL_DATE.fromisoformat)


def _as(cls: type, value: Any) -> Any:
    return cls(value.year, value.month, value.day, value.hour, value.minute, value.second,
               value.microsecond, value.tzinfo, fold=value.fold)


class _StandIn(type):
    """A stand-in class: every instance and subclass of the real class is its own."""

    _real: type

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls._real)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, cls._real)


class TapeDatetime(_REAL_DATETIME, metaclass=_StandIn):
    """``datetime.datetime`` while a deterministic block is active."""

    _real = _REAL_DATETIME

    @classmethod
    def now(cls, tz: _dt.tzinfo | None = None) -> Any:
        value = _datetime_now(tz)
        if tz is not None and value.tzinfo is not None:
            value = value.astimezone(tz)
        return _as(cls, value)

    @classmethod
    def today(cls) -> Any:
        return cls.now()

    @classmethod
    def utcnow(cls) -> Any:
        return _as(cls, _datetime_utcnow())


class TapeDate(_REAL_DATE, metaclass=_StandIn):
    """``datetime.date`` while a deterministic block is active."""

    _real = _REAL_DATE

    @classmethod
    def today(cls) -> Any:
        value = _date_today()
        return cls(value.year, value.month, value.day)


def _random_function(name: str) -> Callable[..., Any]:
    real = getattr(_random, name)

    @functools.wraps(real)
    def function(*args: Any, **kwargs: Any) -> Any:
        d = active_draws()
        if d is None:
            return real(*args, **kwargs)
        return getattr(d.random, name)(*args, **kwargs)

    return function


_lock = threading.Lock()
_count = 0
_saved: list[tuple[Any, str, Any, Any]] = []  # (module, name, original, ours)


def _targets() -> list[tuple[Any, str, Any]]:
    out: list[tuple[Any, str, Any]] = [
        (_time, "time", _time_time),
        (_time, "time_ns", _time_time_ns),
        (_uuid, "uuid1", _uuid_uuid1),
        (_uuid, "uuid4", _uuid_uuid4),
        (_dt, "datetime", TapeDatetime),
        (_dt, "date", TapeDate),
    ]
    inst = getattr(_random, "_inst", None)
    for name in sorted(vars(_random)):
        if getattr(getattr(_random, name), "__self__", None) is inst and not name.startswith("_"):
            out.append((_random, name, _random_function(name)))
    return out


def activate() -> None:
    """Patch on the first deterministic block."""
    global _count
    with _lock:
        if _count == 0:
            _saved.extend((module, attr, getattr(module, attr), new) for module, attr, new in _targets())
            for module, attr, _original, new in _saved:
                setattr(module, attr, new)
        _count += 1


def deactivate() -> None:
    """Restore after the last deterministic block (a name re-bound meanwhile stays)."""
    global _count
    with _lock:
        _count = max(0, _count - 1)
        while _saved and not _count:
            module, attr, original, ours = _saved.pop()
            if getattr(module, attr) is ours:  # else someone re-bound it over us: theirs stays
                setattr(module, attr, original)
