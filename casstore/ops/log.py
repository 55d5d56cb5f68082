"""``casstore log``: the commits that changed a cassette's pin, newest first."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..errors import UsageError
from ..git.history import lock_changes
from ..model.lock import Pin
from ..model.names import not_pinned
from ..project import Project

__all__ = ["log"]


def _pin_key(pin: Pin | None) -> tuple[str, frozenset[str]] | None:
    return None if pin is None else (pin.digest, frozenset(s.keyid for s in pin.signatures))


def log(project: Project, name: str, rev: str = "HEAD") -> list[dict[str, Any]]:
    """One row per commit reachable from ``rev`` that changed the pin of ``name`` (pinned,
    re-pinned, re-signed, removed); UsageError when no such commit pins it."""
    rows: list[dict[str, Any]] = []
    for commit, lock, parents in lock_changes(project, rev):
        if lock is None:
            continue  # a lock that does not parse says nothing of the pin
        pin = lock.pins.get(name)
        before = [p.pins.get(name) for p in parents if p is not None] if parents else [None]
        if any(_pin_key(x) == _pin_key(pin) for x in before) or (pin is None and not before):
            continue
        prev = before[0] if before else None
        if pin is None:
            action = "removed"
        elif prev is None:
            action = "pinned"
        elif prev.digest == pin.digest:
            action = "re-signed"
        else:
            action = "re-pinned"
        shown = pin if pin is not None else prev
        tz = dt.timezone(dt.timedelta(seconds=commit.offset))
        rows.append({
            "commit": commit.sha,
            "date": dt.datetime.fromtimestamp(commit.time, tz).isoformat(),
            "author": commit.author,
            "subject": commit.message.splitlines()[0] if commit.message else "",
            "action": action,
            "digest": shown.digest if shown else None,
            "size": shown.size if shown else None,
            "entries": shown.entries if shown else None,
            "signers": sorted({s.signer for s in shown.signatures}) if shown else [],
        })
    if not rows:
        raise UsageError(not_pinned([name], project.load_lock().pins, where=f"any casstore.lock in the history of {rev}"))
    return rows
