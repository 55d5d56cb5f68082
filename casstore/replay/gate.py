"""The record gate (under ``CI`` a block that would call live is refused, unless
``CASSTORE_ALLOW_RECORD=1``) and the spend line a recording block prints.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import RecordingRefused
from ..model.usage import total_usage
from .guard import env_flag

__all__ = ["ALWAYS_LIVE", "gate_closed", "refuse", "check_entry", "spend_line", "report_spend"]

# Modes whose every call goes live (auto is decided by the cassette: see check_entry).
ALWAYS_LIVE = frozenset({"record", "refresh", "drift", "live"})


def gate_closed() -> bool:
    return env_flag("CI") and not env_flag("CASSTORE_ALLOW_RECORD")


def refuse(name: str, mode: str, source: str, what: str) -> RecordingRefused:
    return RecordingRefused(
        f"casstore: recording refused: CI is set and cassette {name!r} {what} "
        f"(mode {mode}, from {source}); CI replays only. "
        "Set CASSTORE_ALLOW_RECORD=1 to allow live calls in CI.",
        cassette=name,
        mode=mode,
    )


def check_entry(name: str, mode: str, effective_mode: str, source: str) -> None:
    """Refuse, at block entry, a block whose every call would go live."""
    if effective_mode in ALWAYS_LIVE and gate_closed():
        what = "does not exist, so auto would record it" if mode == "auto" else "would call live"
        raise refuse(name, mode, source, what)


def spend_line(name: str, responses: Iterable[Mapping[str, Any]], calls: int) -> str:
    """``casstore: cassette 'x': 3 live calls, 1,234 tokens (1,000 in, 234 out)``."""
    usage, reported = total_usage(responses)
    line = f"casstore: cassette {name!r}: {calls} live call{'s' if calls != 1 else ''}"
    if reported:
        line += f", {usage.total:,} tokens ({usage.input:,} in, {usage.output:,} out)"
    else:
        line += ", no token usage reported"
    return line


def report_spend(name: str, responses: list[Mapping[str, Any]], calls: int) -> None:
    if calls > 0:
        with contextlib.suppress(Exception):  # a report must never fail a test
            print(spend_line(name, responses, calls), file=sys.stderr)
