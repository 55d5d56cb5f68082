"""Moved to ``tests/helpers/replay.py``; this re-export keeps old imports working."""

from tests.helpers.replay import Counted, record_then_replay

__all__ = ["Counted", "record_then_replay"]
