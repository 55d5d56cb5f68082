"""Numbers and text, one way everywhere: read as ASCII digits and few of them; written
with the noun in the right number."""

from __future__ import annotations

__all__ = ["ascii_int", "counted"]


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
