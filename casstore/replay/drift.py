"""``drift`` mode's findings: how a live response differs from the recording (an LLM text
scoring at or above the threshold is "similar", not a difference).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..model.identity import diff_documents
from ..model.recording import response_json_values
from ..model.similarity import llm_text, text_similarity

__all__ = ["DriftItem", "DriftWarning", "compare_responses", "semantic_score", "judge", "drift_table"]

# Response fields that change on every call and so never count as drift.
_VOLATILE_RESPONSE_KEYS = frozenset({"id", "created", "created_at", "system_fingerprint", "request_id"})


class DriftWarning(UserWarning):
    """Emitted when a ``drift`` run found live responses that differ from the recording."""


@dataclass(frozen=True)
class DriftItem:
    """One difference found by ``drift`` mode: ``status`` is ``"changed"``, ``"similar"``,
    ``"new"`` (not recorded) or ``"missing"`` (recorded, not made by this run)."""

    status: str
    kind: str
    target: str
    identity: str
    differences: tuple[str, ...] = ()
    score: float | None = None  # LLM text similarity of recorded and live (1.0 = same words)
    seq: int | None = None  # the recorded entry's seq

    def __str__(self) -> str:
        score = f" score {self.score:.2f}" if self.score is not None else ""
        head = f"{self.status}: {self.kind} {self.target} ({self.identity[:12]}){score}"
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


def semantic_score(kind: str, recorded: Mapping[str, Any], live: Mapping[str, Any],
                   scorer: Callable[[str, str], float] | None) -> float | None:
    """The similarity of the recorded and live assistant texts, or ``None`` (not an LLM text)."""
    if kind != "llm":
        return None
    a, b = llm_text(recorded), llm_text(live)
    if a is None or b is None:
        return None
    score = (scorer or text_similarity)(a, b)
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
        raise UsageError(f"use(scorer=...) must return a number from 0 to 1, got {score!r}")
    return float(score)


def judge(kind: str, target: str, identity: str, recorded_entry: Mapping[str, Any], live: Mapping[str, Any],
          scorer: Callable[[str, str], float] | None, threshold: float | None) -> DriftItem | None:
    """The finding of one live response against its recording: ``None`` (the same), ``"changed"`` or ``"similar"``."""
    recorded = recorded_entry.get("response") or {}
    diffs = compare_responses(recorded, live)
    if not diffs:
        return None
    score = semantic_score(kind, recorded, live, scorer)
    similar = (score is not None and threshold is not None and score >= threshold
               and recorded.get("status") == live.get("status"))
    return DriftItem("similar" if similar else "changed", kind, target, identity, tuple(diffs), score,
                     recorded_entry.get("seq"))


def drift_table(name: str, items: list[DriftItem], similar: list[DriftItem]) -> str:
    """The report of a drift run: a table of every finding, then each difference's details."""
    if not items and not similar:
        return f"casstore drift: cassette {name!r}: live responses match the recording"
    head = f"casstore drift: cassette {name!r}: {len(items)} difference(s)"
    if similar:
        head += f", {len(similar)} similar (at or above the threshold)"
    rows = [("seq", "status", "score", "call")]
    for item in [*items, *similar]:
        rows.append((
            "-" if item.seq is None else str(item.seq),
            item.status,
            "-" if item.score is None else f"{item.score:.2f}",
            f"{item.kind} {item.target} ({item.identity[:12]})",
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [head] + ["  " + "  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3] for r in rows]
    lines += [str(item) for item in items]
    return "\n".join(lines)
