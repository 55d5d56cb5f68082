"""Explaining a miss: the closest recorded request, what differs, and what to run."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from ..errors import CassetteMiss
from ..model.cassette import Cassette
from ..model.identity import (
    CallIdentity,
    Normalizer,
    diff_documents,
    normalize_http,
    normalize_tool,
)
from ..model.numerals import counted
from ..model.recording import request_body_bytes
from .guard import env_flag
from .recorded import Recorded

__all__ = ["Missed", "explain_miss"]


class Missed(Protocol):
    """The session that missed, as this module reads it."""

    name: str
    mode: str
    mode_source: str
    path: Path | None
    cassette: Cassette | None
    normalizer: Normalizer | None
    base_entries: list[dict[str, Any]]
    _index: Recorded
    _by_target: dict[tuple[str, str], list[dict[str, Any]]] | None
    _git_root: Path | None
    _changed_working_copy: Callable[[], Cassette | None] | None

    def _shown(self, target: str) -> str: ...

    def _redacted(self, obj: Any) -> Any: ...


def _display(self: Missed, kind: str, target: str, request: Mapping[str, Any]) -> dict[str, Any]:
    if kind == "tool":
        return normalize_tool(
            target, request.get("args") or [], request.get("kwargs") or {}, normalizer=self.normalizer, for_identity=False
        )
    return normalize_http(
        str(request.get("method", "GET")),
        str(request.get("url", "")),
        [(k, v) for k, v in (request.get("headers") or {}).items() if not isinstance(v, list)],
        request_body_bytes(request),
        normalizer=self.normalizer,
        for_identity=False,
    )


def _closest(self: Missed, ident: CallIdentity, current: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    if self._by_target is None:
        self._by_target = {}
        for e in self.base_entries:
            self._by_target.setdefault((str(e.get("kind")), str(e.get("target"))), []).append(e)
    candidates = self._by_target.get((ident.kind, self._shown(ident.target))) or [
        e for e in self.base_entries if e.get("kind") == ident.kind
    ]
    best: tuple[int, dict[str, Any] | None, list[str]] = (sys.maxsize, None, [])
    for entry in candidates[:500]:
        req = entry.get("request") or {}
        try:
            other = _display(self, str(entry.get("kind")), str(entry.get("target")), req)
        except Exception:  # noqa: BLE001 - a malformed entry is just not a candidate
            continue
        diffs = diff_documents(other, current, limit=10_000)
        if len(diffs) < best[0]:
            best = (len(diffs), entry, diffs)
    diffs = best[2]
    if len(diffs) > 12:
        diffs = diffs[:12] + [f"… and {len(diffs) - 12} more differences"]
    return best[1], diffs


def _pending_recording(self: Missed, ident: CallIdentity, lines: list[str]) -> bool:
    """Say so when a re-recorded working copy differs from the served pin; True when it has
    this very call (then `casstore add` is the fix)."""
    if self._changed_working_copy is None:
        return False
    try:
        newer = self._changed_working_copy()
    except Exception:  # noqa: BLE001 - explaining must never hide the miss itself
        return False
    if newer is None:
        return False
    where = _display_path(self)
    lines.append(f"  served the pin in casstore.lock; the working copy {where} differs from the pin "
                 "(re-recorded, not added yet)")
    if any(e.get("identity") == ident.identity for e in newer.entries):
        lines.append(f"  the working copy has this call: to pin the new recording, run `casstore add {where}`")
        lines.append("  (then `casstore push`, and commit casstore.lock)")
        return True
    lines.append(f"  if the re-recording is what you want, `casstore add {where}` pins it")
    return False


def _display_path(self: Missed) -> str:
    if self.path is None:
        return "the working copy"
    for base in (self._git_root, Path.cwd()):
        if base is not None:
            with contextlib.suppress(ValueError):
                return self.path.resolve().relative_to(Path(base).resolve()).as_posix()
    return str(self.path)


def _advice(self: Missed, changed: bool) -> list[str]:
    """What to run, by situation (``changed``: the test changed its request)."""
    test_id = (os.environ.get("PYTEST_CURRENT_TEST") or "").rsplit(" (", 1)[0]

    def run(mode: str) -> str:
        if test_id:
            return f"`CASSTORE_MODE={mode} pytest '{test_id}'`"
        return f'`casstore.use("{self.name}", mode="{mode}")` (or CASSTORE_MODE={mode})'

    if env_flag("CI"):  # CI replays only: what to do where the recording was made
        if self.cassette is None:
            return [f"  recorded locally but never pinned: run `casstore add {_display_path(self)}` and commit "
                    "`casstore.lock` (a local pytest run that records pins it itself; CI never records)"]
        return [f"  re-record it on your machine (CI replays only): {run('record')}, then commit `casstore.lock`"]
    if self.cassette is None:
        return [f"  to record it: {run('record')}"]
    if changed:
        return [f"  the request changed: re-record just this test: {run('record')}; or {run('record-new')} "
                "to keep the rest (record-new also keeps the old entry, which nothing calls now)"]
    return [f"  to add this call to the cassette: {run('record-new')} (or {run('record')} to re-record it whole)"]


def explain_miss(self: Missed, ident: CallIdentity, request: dict[str, Any]) -> CassetteMiss:
    try:
        current = _display(self, ident.kind, ident.target, self._redacted(request))
    except Exception:  # noqa: BLE001 - explaining must never hide the miss itself
        current = ident.document
    closest, diffs = _closest(self, ident, current)
    lines = [
        f"casstore: no recording for this call in cassette {self.name!r} (mode {self.mode}, from {self.mode_source})",
        f"  identity: {ident.identity}",
        f"  kind:     {ident.kind}",
        f"  target:   {self._shown(ident.target)}",
    ]
    recorded_times = self._index.count(ident.identity)
    if self.cassette is None:
        where = f" at {self.path}" if self.path is not None else ""
        lines.append(f"  the cassette does not exist yet (not in casstore.lock, no working copy{where})")
    elif recorded_times:
        lines.append(
            f"  this exact call was recorded {recorded_times} time(s); this run made it once more"
        )
    elif closest is None:
        lines.append(f"  no recorded {ident.kind} call to compare with ({counted(len(self.base_entries), 'entry', 'entries')})")
    else:
        lines.append(
            f"  closest recorded request: entry seq {closest.get('seq')} ({closest.get('kind')} {closest.get('target')})"
        )
        lines += [f"    {d}" for d in diffs] or ["    (same fields; differs only after your normalizer)"]
    pending = _pending_recording(self, ident, lines)
    if not pending:
        lines += _advice(self, closest is not None and not recorded_times)
    return CassetteMiss(
        "\n".join(lines),
        cassette=self.name,
        identity=ident.identity,
        kind=ident.kind,
        target=ident.target if pending else self._shown(ident.target),
        closest=closest,
        differences=diffs,
    )
