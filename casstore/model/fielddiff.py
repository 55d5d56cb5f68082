"""Field-level differences between two JSON documents (pure, no I/O): the explanation of a
near miss (which request fields changed since the recording).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .jsonvalues import canonical_value

__all__ = ["diff_documents"]


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for k in sorted(value):
            _flatten(value[k], f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            _flatten(v, f"{prefix}[{i}]", out)
    else:
        out[prefix] = value


def _show(value: Any, width: int = 60) -> str:
    if value is _ABSENT:
        return "(absent)"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True) if not isinstance(value, float) else repr(value)
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text


_ABSENT = object()


def diff_documents(recorded: Mapping[str, Any], current: Mapping[str, Any], *, limit: int = 12) -> list[str]:
    """Field-level differences ``"path: old → new"`` between two display documents.

    Paths drop the ``input.`` prefix of LLM documents, so a changed setting reads
    ``temperature: 0.0 → 0.7``. Values equal after number canonicalization do not count.
    """
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    _flatten(dict(recorded), "", a)
    _flatten(dict(current), "", b)
    for mine, other in ((a, b), (b, a)):  # an empty {} / [] against filled ones is not news
        for path in [p for p, v in mine.items() if v in ({}, []) and p not in other]:
            if any(q.startswith((path + ".", path + "[")) for q in other):
                del mine[path]
    lines: list[str] = []
    for path in sorted(set(a) | set(b), key=_path_order):
        old = a.get(path, _ABSENT)
        new = b.get(path, _ABSENT)
        if old is not _ABSENT and new is not _ABSENT and canonical_value(old) == canonical_value(new):
            if type(canonical_value(old)) is type(canonical_value(new)):
                continue
        shown = path[6:] if path.startswith("input.") else path
        lines.append(f"{shown}: {_show(old)} → {_show(new)}")
    if len(lines) > limit:
        more = len(lines) - limit
        lines = lines[:limit] + [f"… and {more} more difference{'s' if more > 1 else ''}"]
    return lines


def _path_order(path: str) -> tuple[int, str]:
    # kind/target first, then the model and settings, message contents last.
    rank = 0 if path in ("kind", "target", "api") else 2 if "messages" in path or "input.input" in path else 1
    return rank, path
