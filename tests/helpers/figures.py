"""Reliability figures: tests record what they survived; the run prints a summary.

``record("store faults", requests=120, failed=31)`` adds to a section; at the end of the
session a "casstore reliability figures" block goes to the terminal (shown without ``-s``,
so CI logs carry it). The hooks that print them, and that carry them from pytest-xdist
workers to the controller, are in ``tests/conftest.py``.
"""

from __future__ import annotations

from collections import Counter, defaultdict

__all__ = ["FIGURES", "record"]

FIGURES: dict[str, Counter] = defaultdict(Counter)


def record(section: str, **counts: int) -> None:
    for k, v in counts.items():
        FIGURES[section][k] += int(v)
