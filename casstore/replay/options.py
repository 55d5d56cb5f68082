"""``use()``'s per-block options beyond the mode, and the timing scale."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError

__all__ = ["Options", "parse_timing", "resolve_timing"]

Scorer = Callable[[str, str], float]


def parse_timing(value: Any, source: str) -> float:
    """The delay scale of a timing value: 0.0 collapsed, 1.0 realtime, else the float."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("collapsed", ""):
            return 0.0
        if text == "realtime":
            return 1.0
        try:
            value = float(text)
        except ValueError:
            raise UsageError(
                f"{source}: timing must be 'collapsed', 'realtime' or a number (the scale of "
                f"the recorded delays), got {value!r}"
            ) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1000:
        raise UsageError(f"{source}: timing scale must be a number from 0 to 1000, got {value!r}")
    return float(value)


def resolve_timing(explicit: Any, config_timing: Any) -> float:
    """``CASSTORE_TIMING`` → ``use(timing=...)`` → config → collapsed."""
    env = os.environ.get("CASSTORE_TIMING", "").strip()
    if env:
        return parse_timing(env, "CASSTORE_TIMING")
    if explicit is not None:
        return parse_timing(explicit, "use(timing=...)")
    if config_timing is not None:
        return parse_timing(config_timing, "[replay] timing")
    return 0.0


@dataclass(frozen=True)
class Options:
    timing: float = 0.0  # 0 collapsed; 1 realtime; else a scale
    all_played: bool = False
    deterministic: bool = False
    faults: Mapping[int, Any] = field(default_factory=dict)
    scorer: Scorer | None = None
    threshold: float | None = None  # drift: LLM answers scoring at or above it are similar
