"""``drift`` mode's findings: how a live response differs from the recording."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..model.identity import diff_documents
from ..model.recording import response_json_values

__all__ = ["DriftItem", "DriftWarning", "compare_responses"]

# Response fields that change on every call and so never count as drift.
_VOLATILE_RESPONSE_KEYS = frozenset({"id", "created", "created_at", "system_fingerprint", "request_id"})


class DriftWarning(UserWarning):
    """Emitted when a ``drift`` run found live responses that differ from the recording."""


@dataclass(frozen=True)
class DriftItem:
    """One difference found by ``drift`` mode.

    ``status`` is ``"changed"`` (live response differs), ``"new"`` (a call nobody
    recorded) or ``"missing"`` (a recorded call this run did not make).
    """

    status: str
    kind: str
    target: str
    identity: str
    differences: tuple[str, ...] = ()

    def __str__(self) -> str:
        head = f"{self.status}: {self.kind} {self.target} ({self.identity[:12]})"
        return "\n".join([head, *(f"    {d}" for d in self.differences)])


def compare_responses(recorded: Mapping[str, Any], live: Mapping[str, Any]) -> list[str]:
    """Field-level differences between a recorded and a live response (volatile ids ignored)."""
    diffs: list[str] = []
    if "status" in recorded or "status" in live:
        if recorded.get("status") != live.get("status"):
            diffs.append(f"status: {recorded.get('status')} → {live.get('status')}")
    for key in ("result", "error"):
        if key in recorded or key in live:
            diffs += diff_documents({key: _strip(recorded.get(key))}, {key: _strip(live.get(key))})
    if "status" in recorded or "status" in live:
        diffs += diff_documents({"body": _strip(response_json_values(recorded))}, {"body": _strip(response_json_values(live))})
    return diffs


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _VOLATILE_RESPONSE_KEYS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value
