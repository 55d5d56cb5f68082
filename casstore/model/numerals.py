"""Numbers, times and text, one way everywhere: read as ASCII digits and few of them;
timestamps as ISO 8601 or HTTP dates; written with the noun in the right number."""

from __future__ import annotations

import datetime as _dt
from typing import Any

__all__ = ["ascii_int", "counted", "parse_time"]


def ascii_int(text: str, max_digits: int = 18) -> int | None:
    """``text`` as a number where it is 1 to ``max_digits`` ASCII digits, else None (not "²",
    "٥٠٠" or 5000 digits): every count, index, port and status read from text goes through it."""
    if 0 < len(text) <= max_digits and text.isascii() and text.isdigit():
        return int(text)
    return None


def counted(n: int | None, noun: str, plural: str | None = None) -> str:
    """``"1 entry"``, ``"2 entries"``: ``n`` with ``noun`` (or ``plural``, default noun + "s");
    ``"? entries"`` when the count is not known."""
    return f"{'?' if n is None else n} {noun if n == 1 else (plural or noun + 's')}"


def parse_time(value: Any) -> _dt.datetime | None:
    """An ISO 8601 timestamp (``Z`` or offset; naive = UTC) or an HTTP date; None if unreadable."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        t = _dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        from email.utils import parsedate_to_datetime  # HTTP dates (vcrpy): imported only when met

        try:
            t = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t
