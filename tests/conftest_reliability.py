"""Reliability figures: tests record what they survived; the run prints a summary.

``record("store faults", requests=120, failed=31)`` adds to a section; at the end of the
session a "casstore reliability figures" block goes to the terminal (shown without ``-s``,
so CI logs carry it). Under pytest-xdist each worker sends its figures to the controller.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest

__all__ = ["FIGURES", "record", "pytest_sessionfinish", "pytest_testnodedown", "pytest_terminal_summary"]

FIGURES: dict[str, Counter] = defaultdict(Counter)


def record(section: str, **counts: int) -> None:
    for k, v in counts.items():
        FIGURES[section][k] += int(v)


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: hand the figures to the controller
        workeroutput["casstore_figures"] = json.dumps({k: dict(v) for k, v in FIGURES.items()})


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # type: ignore[no-untyped-def]
    raw = getattr(node, "workeroutput", {}).get("casstore_figures")
    if raw:
        for section, counts in json.loads(raw).items():
            record(section, **counts)


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if not FIGURES or getattr(terminalreporter.config, "workerinput", None) is not None:
        return
    terminalreporter.section("casstore reliability figures")
    for section in sorted(FIGURES):
        counts = FIGURES[section]
        body = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items())
        terminalreporter.write_line(f"{section}: {body}")
