"""An import proves itself: each request, as its client sends it, must be served its own entry
by a replay Session over the cassette read back; a call that would miss is named with why."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import CassetteMiss, CasstoreError
from ..model.cassette import Cassette, load_bytes
from ..model.identity import diff_documents, normalize_http
from ..replay.session import Session

__all__ = ["ReplayProbe", "Proof", "prove_replay"]


@dataclass(frozen=True)
class ReplayProbe:
    """One source interaction, as its client sends it, and where it came from."""

    where: str  # "file.yaml:12"
    index: int  # 1-based interaction number in its file
    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes | None
    seq: int  # the entry the import made of it


@dataclass
class Proof:
    total: int = 0
    replayed: int = 0
    misses: list[str] = field(default_factory=list)

    @property
    def line(self) -> str:
        return f"{self.replayed} of {self.total} interactions replay"


def _as_sent(probe: ReplayProbe) -> tuple[str, str, list[tuple[str, str]], bytes | None]:
    """``(method, url, header pairs, body)`` as httpx puts them on the wire (URL normalized)."""
    import httpx

    request = httpx.Request(probe.method, probe.url, headers=list(probe.headers), content=probe.body or b"")
    return request.method, str(request.url), [(k, v) for k, v in request.headers.multi_items()], request.content


def _why(probe: ReplayProbe, method: str, url: str, headers: list[tuple[str, str]], body: bytes | None) -> str:
    recorded = normalize_http(probe.method, probe.url, list(probe.headers), probe.body, for_identity=False)
    sent = normalize_http(method, url, headers, body, for_identity=False)
    diffs = diff_documents(recorded, sent, limit=3)
    return "; ".join(diffs) if diffs else "its identity is not in the cassette read back"


def prove_replay(cassette: Cassette, probes: Sequence[ReplayProbe]) -> Proof:
    """Replay every probe against ``cassette`` read back from its canonical bytes."""
    readback = load_bytes(cassette.canonical_bytes(), source=f"imported cassette {cassette.name!r}")
    session = Session(cassette.name, "replay", cassette=readback, write_path=None, offline=True, mode_source="import check")
    proof = Proof(total=len(probes))
    for probe in probes:
        what = f"{probe.where}: interaction {probe.index} ({probe.method.upper()} {probe.url[:100]})"
        try:
            method, url, headers, body = _as_sent(probe)
            action, entry = session.begin_http(method, url, headers, body)
        except CassetteMiss:
            proof.misses.append(f"{what} would not replay: {_why(probe, method, url, headers, body)}")
            continue
        except (CasstoreError, ValueError, TypeError, UnicodeError) as exc:
            proof.misses.append(f"{what} cannot be sent as recorded: {exc}")
            continue
        if action != "serve" or entry.get("seq") != probe.seq:
            proof.misses.append(f"{what} would be answered by entry {entry.get('seq')!r}, not its own ({probe.seq})")
            continue
        proof.replayed += 1
    return proof
