"""Whether a test's call phase failed (a failing test writes no cassette)."""

from __future__ import annotations

import pytest

__all__ = ["FAILED", "call_failed"]

FAILED = pytest.StashKey[bool]()


def call_failed(item: pytest.Item) -> bool:
    return bool(item.stash.get(FAILED, False))
