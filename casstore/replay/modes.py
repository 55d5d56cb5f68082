"""The replay modes (no imports: the pytest plugin reads them in every test process)."""

from __future__ import annotations

__all__ = ["MODES", "RECORDING_MODES"]

MODES = ("live", "record", "replay", "auto", "record-new", "refresh", "drift")
RECORDING_MODES = frozenset({"record", "record-new", "refresh"})
