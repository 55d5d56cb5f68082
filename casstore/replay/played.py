"""What a block played: its run fingerprint and the ``all_played`` check (pure).

The run fingerprint is ``sha256:`` + the SHA-256 of one line ``<identity> <response digest>\n``
per call served or recorded, in call order (the digest of the response as the cassette
keeps it); a replay of the same calls reproduces the recording's ``meta.fingerprint``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import NotAllPlayed
from ..model.canonical import canonical_json, sha256_digest

__all__ = ["response_digest", "fingerprint", "run_fingerprint", "not_all_played"]


def response_digest(response: Any) -> str:
    return sha256_digest(canonical_json(response))


def fingerprint(pairs: Iterable[tuple[str, str]]) -> str:
    """The run fingerprint of ``(identity, response digest)`` pairs, in call order."""
    h = hashlib.sha256()
    for identity, digest in pairs:
        h.update(f"{identity} {digest}\n".encode("ascii"))
    return "sha256:" + h.hexdigest()


def run_fingerprint(played: Iterable[tuple[str, Any]], redact: Callable[[Any], Any]) -> str:
    """The fingerprint of a session's played items: served entries (as stored) or live calls
    (their entry, once finished, redacted as the cassette will keep it)."""
    pairs = []
    for identity, item in played:
        if isinstance(item, dict):
            response = item.get("response")
        elif getattr(item, "entry", None) is not None:
            response = redact(item.entry["response"])
        else:
            continue  # a live call still open, or not captured
        pairs.append((identity, response_digest(response)))
    return fingerprint(pairs)


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
