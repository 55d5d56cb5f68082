"""Field-level differences between two JSON documents (pure): the engine behind the
explanation of a near miss and the cassette diff."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from .jsonvalues import canonical_value

__all__ = ["ABSENT", "EXCERPT", "changed_leaves", "diff_documents", "field_changes", "flatten", "short"]

EXCERPT = 40  # characters of a value shown in a cassette diff
ABSENT: Any = object()  # the side of a change where the path does not exist


def short(value: Any, width: int = EXCERPT) -> str:
    """A value in one short line: JSON, long strings cut with an ellipsis inside the quotes."""
    if value is ABSENT:
        return "(absent)"
    if isinstance(value, str):
        text = value.replace("\n", "⏎")
        if len(text) > width:
            text = text[: width - 1] + "…"
        return json.dumps(text, ensure_ascii=False)
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def flatten(value: Any, prefix: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{path: leaf}`` in document order; an empty ``{}`` or ``[]`` is a leaf."""
    out = {} if out is None else out
    if isinstance(value, Mapping) and value:
        for k in value:
            flatten(value[k], f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            flatten(v, f"{prefix}[{i}]", out)
    else:
        out[prefix] = value
    return out


def _strictly_equal(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _canonically_equal(a: Any, b: Any) -> bool:
    ca, cb = canonical_value(a), canonical_value(b)
    return ca == cb and type(ca) is type(cb)


def changed_leaves(old: Any, new: Any, *, prefix: str = "", prune_empty: bool = False,
                   equal: Callable[[Any, Any], bool] = _strictly_equal) -> list[tuple[str, Any, Any]]:
    """``(path, old leaf, new leaf)`` for every leaf that differs, :data:`ABSENT` for a missing
    side; old's paths in order, then new's. ``prune_empty`` drops an empty ``{}``/``[]``
    whose other side is filled (not news)."""
    a, b = flatten(old, prefix), flatten(new, prefix)
    if prune_empty:
        for mine, other in ((a, b), (b, a)):
            for path in [p for p, v in mine.items() if v in ({}, []) and p not in other]:
                if any(q.startswith((path + ".", path + "[")) for q in other):
                    del mine[path]
    out = []
    for path in list(a) + [k for k in b if k not in a]:
        va, vb = a.get(path, ABSENT), b.get(path, ABSENT)
        if va is ABSENT or vb is ABSENT or not equal(va, vb):
            out.append((path, va, vb))
    return out


def field_changes(old: Any, new: Any, prefix: str = "") -> list[str]:
    """``path: old → new`` for every leaf that differs (``(absent)`` for a missing side)."""
    return [f"{path or '(value)'}: {short(va)} → {short(vb)}" for path, va, vb in changed_leaves(old, new, prefix=prefix)]


def diff_documents(recorded: Mapping[str, Any], current: Mapping[str, Any], *, limit: int = 12) -> list[str]:
    """``"path: old → new"`` between two display documents (``input.`` dropped from paths: a
    setting reads ``temperature: 0.0 → 0.7``); values equal once canonical do not count."""
    changes = changed_leaves(dict(recorded), dict(current), prune_empty=True, equal=_canonically_equal)
    lines = [
        f"{path[6:] if path.startswith('input.') else path}: {short(old, 60)} → {short(new, 60)}"
        for path, old, new in sorted(changes, key=lambda c: _path_order(c[0]))
    ]
    if len(lines) > limit:
        more = len(lines) - limit
        lines = lines[:limit] + [f"… and {more} more difference{'s' if more > 1 else ''}"]
    return lines


def _path_order(path: str) -> tuple[int, str]:
    # kind/target first, then the model and settings, message contents last.
    rank = 0 if path in ("kind", "target", "api") else 2 if "messages" in path or "input.input" in path else 1
    return rank, path
