"""What a block played: its run fingerprint (``sha256:`` of one line ``<identity> <response
digest>\n`` per call served or recorded, in call order) and the ``all_played`` error.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import NotAllPlayed
from ..model.canonical import canonical_json, sha256_digest

__all__ = ["run_fingerprint", "not_all_played"]


def run_fingerprint(played: Iterable[tuple[str, Any]], redact: Callable[[Any], Any]) -> str:
    """The fingerprint of a session's played items: served entries (as stored) or live calls
    (their entry, once finished, redacted as the cassette will keep it)."""
    h = hashlib.sha256()
    for identity, item in played:
        if isinstance(item, dict):
            response = item.get("response")
        elif getattr(item, "entry", None) is not None:
            response = redact(item.entry["response"])
        else:
            continue  # a live call still open, or not captured
        h.update(f"{identity} {sha256_digest(canonical_json(response))}\n".encode("ascii"))
    return "sha256:" + h.hexdigest()


def not_all_played(name: str, entries: list[dict[str, Any]], draws: Mapping[str, int]) -> NotAllPlayed:
    """The error ``use(all_played=True)`` raises, naming every unplayed entry and draw kind."""
    parts = []
    if entries:
        parts.append(f"{len(entries)} recorded entr{'y' if len(entries) == 1 else 'ies'} not played")
    if draws:
        parts.append(f"{sum(draws.values())} recorded draw(s) not consumed")
    lines = [f"casstore: cassette {name!r} (all_played=True): " + " and ".join(parts)]
    for e in entries:
        lines.append(f"  seq {e.get('seq')}: {e.get('kind')} {e.get('target')} (identity {str(e.get('identity'))[:12]})")
    for kind, n in sorted(draws.items()):
        lines.append(f"  {n} x {kind}")
    unplayed = [{k: e.get(k) for k in ("seq", "kind", "target", "identity")} for e in entries]
    return NotAllPlayed("\n".join(lines), cassette=name, unplayed=unplayed, draws=dict(draws))
