"""The replay decision core: one active ``casstore.use()`` block serves each call from
the cassette or lets it go live, records or compares what went live, and writes the cassette.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import LiveCallBlocked, RedactionRefused
from ..model.cassette import Cassette, make_entry
from ..model.identity import (
    IDENTITY_RULE,
    CallIdentity,
    Normalizer,
    Sealing,
    http_identity,
    http_identity_lowered,
    jsonable,
    tool_identity,
)
from ..model.recording import decode_headers, encode_request, request_body_bytes
from .draws import Draws
from .drift import DriftItem, DriftWarning, drift_table, judge
from .faults import apply_fault
from .gate import gate_closed, refuse, report_spend
from .guard import allowed, blocked_error, host_port
from .miss import explain_miss
from .modes import MODES, RECORDING_MODES
from .options import Options
from .played import not_all_played, run_fingerprint
from .recorded import Recorded
from .timing import Pacer, entry_timing, pacer_for
from .writer import runtime_meta, utc_now, write_cassette

__all__ = ["Session", "Call", "MODES", "RECORDING_MODES", "request_identity"]


def request_identity(kind: str, target: str, request: Mapping[str, Any], normalizer: Normalizer | None) -> str:
    """The identity of a request as a cassette keeps it (``entry["request"]``) under ``normalizer``."""
    if kind == "tool":
        args, kwargs = request.get("args") or [], request.get("kwargs") or {}
        return tool_identity(target, args, kwargs, normalizer=normalizer).identity
    return http_identity(
        str(request.get("method", "GET")), str(request.get("url", "")), decode_headers(request.get("headers")),
        request_body_bytes(request), normalizer=normalizer,
    ).identity


@dataclass
class Call:
    """A call on its way to the live service, captured for recording or comparison."""

    ident: CallIdentity
    request: dict[str, Any]
    seq: int
    capture: bool
    recorded: dict[str, Any] | None = None
    started: float = field(default_factory=time.monotonic)
    recorded_at: str = ""
    done: bool = False
    # set by a stream being teed: returns the response record of what arrived so far
    partial: Callable[[], dict[str, Any]] | None = None
    # the call's identity under another rule or salt (for a fallback answer from an older cassette)
    older: Callable[[int, Sealing | None], CallIdentity] | None = None
    entry: dict[str, Any] | None = None  # the entry finish() built
    responded: float | None = None  # monotonic time the response headers arrived
    marks: list[tuple[float, int]] = field(default_factory=list)  # a live stream's reads: (time, bytes so far)


class Session:
    """State of one active ``use()`` block. Public attributes are read-only for users."""

    def __init__(
        self,
        name: str,
        mode: str,
        *,
        cassette: Cassette | None,
        write_path: Path | None,
        offline: bool = False,
        fallback: str | None = None,
        normalizer: Normalizer | None = None,
        redaction_config: Mapping[str, Any] | None = None,
        mode_source: str = "default",
        git_root: Path | None = None,
        path_stamp: Any = None,
        changed_working_copy: Callable[[], Cassette | None] | None = None,
        allowed_hosts: tuple[str, ...] = (),
        options: Options | None = None,
    ) -> None:
        self.name = name
        self.allowed_hosts = allowed_hosts  # the project's [replay] allowed_hosts
        self.options = options or Options()
        self.mode = mode
        self.mode_source = mode_source
        self.path = write_path
        self.offline = offline
        self.fallback = fallback
        self.normalizer = normalizer
        self.cassette = cassette
        # a pinned cassette's re-recorded working copy, for the miss message
        self._changed_working_copy = changed_working_copy
        self._redaction_config = redaction_config
        self._git_root = git_root
        self._path_stamp = path_stamp  # the working copy's stamp when read: a change means another writer
        self.effective_mode = ("replay" if cassette is not None else "record") if mode == "auto" else mode
        self.base_entries: list[dict[str, Any]] = sorted(
            cassette.entries if cassette is not None else (), key=lambda e: e.get("seq", 0)
        )
        # with a normalizer, recorded entries are looked up by their requests' identities under it
        self._key: Callable[[dict[str, Any]], str] | None = self._normalized if normalizer is not None else None
        self._index = Recorded(self.base_entries, self._key)
        # a miss is looked up under identity rule 1 too when HTTP entries were recorded under it
        # (a normalizer's index has every entry under the current rule already)
        self._rule1 = self._index.rule1 and normalizer is None
        self._sealing: Sealing | None = None  # rule 3's salt and redaction rules, made on first use
        # serve an identity's last recording again once all were served (vcrpy's allow_playback_repeats)
        self.allow_repeats = False
        self._lock = threading.RLock()
        self._next_seq = self._index.max_seq + 1
        self._new: list[dict[str, Any]] = []
        self._live_responses: list[Mapping[str, Any]] = []  # every live answer, recorded or compared (spend line)
        self._pending: dict[int, Call] = {}
        self._exercised: set[str] = set()
        self._by_target: dict[tuple[str, str], list[dict[str, Any]]] | None = None
        self.drift: list[DriftItem] = []
        self.similar: list[DriftItem] = []  # LLM answers scored at or above the drift threshold
        self._played: list[tuple[str, Any]] = []  # (identity, served entry | Call), in call order
        self.draws: Draws | None = None  # use(deterministic=True): time, uuid and random draws
        if self.options.deterministic and self.effective_mode in ("record", "record-new", "refresh", "replay"):
            reads = self.effective_mode in ("replay", "record-new")
            recorded = cassette.meta.get("draws") if (cassette is not None and reads) else None
            self.draws = Draws(name, recorded, replay=reads, record=self.effective_mode != "replay")
        self.served = 0
        self.live = 0
        self.written = False
        self.closed = False
        self.discarded = False
        self._token: Any = None  # the ContextVar token of the use() block that owns it

    def discard(self) -> None:
        """Do not write the cassette when this block ends (e.g. the test failed)."""
        self.discarded = True

    # -- public read-only views -----------------------------------------------------
    @property
    def new_entries(self) -> list[dict[str, Any]]:
        """Entries captured by this session so far (un-redacted, in call order)."""
        with self._lock:
            return sorted(self._new, key=lambda e: e["seq"])

    def __repr__(self) -> str:
        return f"<casstore session {self.name!r} mode={self.mode} served={self.served} live={self.live}>"

    # -- decisions ----------------------------------------------------------------------
    def refuse_live(self, url: str, what: str) -> None:
        """Offline: raise LiveCallBlocked for a live call to ``url`` unless its host is allowed."""
        host, port = host_port(url)
        if not allowed(host, port, self.allowed_hosts):
            raise blocked_error(host, port, f"CASSTORE_OFFLINE=1: {what} (cassette {self.name!r}, mode {self.mode})")

    def _normalized(self, entry: dict[str, Any]) -> str:
        """A recorded entry's identity under this session's normalizer (else its stored one)."""
        request = entry.get("request")
        if not isinstance(request, dict):
            return str(entry["identity"])
        try:
            return request_identity(str(entry.get("kind")), str(entry.get("target")), request, self.normalizer)
        except Exception:  # noqa: BLE001 - an unreadable request keeps its recorded identity
            return str(entry["identity"])

    def add_playback(self, cassette: Cassette) -> None:
        """Also answer from ``cassette`` (never written); ``auto`` without a cassette then replays."""
        with self._lock:
            self._index.add(sorted(cassette.entries, key=lambda e: e.get("seq", 0)), self._key)
            if self.mode == "auto" and self.cassette is None:
                self.effective_mode = "replay"

    def all_played(self) -> bool:
        """Every recorded entry was served (vcrpy's ``cassette.all_played``)."""
        with self._lock:
            return self._index.all_played()

    def _check_live(self, ident: CallIdentity) -> None:
        if not self.offline:
            return
        if ident.kind == "tool":
            raise LiveCallBlocked(
                f"casstore: CASSTORE_OFFLINE=1: live tool call {self._shown(ident.target)} blocked "
                f"(cassette {self.name!r}, mode {self.mode}, identity {ident.identity})"
            )
        method, _, url = ident.target.partition(" ")
        self.refuse_live(url, f"live {ident.kind} call {method} {self._shown(url.split('?', 1)[0])}")

    @property
    def sealing(self) -> Sealing:
        """Rule 3's sealing: this cassette's salt (a new one if it has none) and the project's redaction rules."""
        sealing = self._sealing
        if sealing is None:
            from ..model.redaction import RuleSet  # (only once a call is made)

            with self._lock:  # one salt per cassette, whichever thread calls first
                if self._sealing is None:
                    rules = RuleSet.from_config(dict(self._redaction_config or {}))
                    salts = self._index.salts
                    self._sealing = Sealing(salts[0], rules) if salts else Sealing.new(rules)
                sealing = self._sealing
        return sealing

    def _others(self, ident: CallIdentity, older: Callable[[int, Sealing | None], CallIdentity]) -> list[CallIdentity]:
        """The call's identities under the other salts and older rules this cassette holds entries of."""
        out = []
        if self._index.salts and self.normalizer is None:
            # the cassette's other salts; and the built-in rules where the project has its own
            # (an import seals by the built-in rules: casstore.interop.build)
            rules = self.sealing.rules
            sealings = [Sealing(salt, rules) for salt in self._index.salts if salt != ident.salt]
            if rules != type(rules)():
                sealings += [Sealing(salt, None) for salt in self._index.salts]
            out += [older(IDENTITY_RULE, sealing) for sealing in sealings]
        if self._index.rule2 and self.normalizer is None:
            out.append(older(2, None))
        if self._rule1:
            out.append(older(1, None))
        return [o for o in out if o.identity != ident.identity]

    def _take_recorded(
        self, ident: CallIdentity, older: Callable[[int, Sealing | None], CallIdentity] | None,
        request: Callable[[], dict[str, Any]]
    ) -> dict[str, Any] | None:
        """The next recorded entry of this call: under the current rule, another salt or an older
        rule, or with a normalizer as its redacted request (how the index saw the recording)."""
        entry = self._index.take(ident.identity, self.allow_repeats)
        if entry is None and older is not None:
            for other in self._others(ident, older):
                entry = self._index.take(other.identity, self.allow_repeats)
                if entry is not None:
                    break
        if entry is None and self.normalizer is not None and self._key == self._normalized:
            redacted = request_identity(ident.kind, ident.target, self._redacted(request()), self.normalizer)
            if redacted != ident.identity:
                entry = self._index.take(redacted, self.allow_repeats)
        return entry

    def begin(
        self,
        ident: CallIdentity,
        build: Callable[[], dict[str, Any]],
        older: Callable[[int, Sealing | None], CallIdentity] | None = None,
    ) -> tuple[str, Any]:
        """``("serve", entry)`` or ``("live", Call)``; raises CassetteMiss / LiveCallBlocked.
        ``build()`` makes the request record (a hit never needs it); ``older(rule, sealing)``
        is the call's identity under an older rule or another salt."""
        mode = self.effective_mode
        with self._lock:
            if mode in ("replay", "record-new"):
                entry = self._take_recorded(ident, older, build)
                if entry is not None:
                    self.served += 1
                    if self.options.faults and entry.get("seq") in self.options.faults:
                        entry = apply_fault(entry, self.options.faults[entry["seq"]])
                    self._played.append((entry["identity"], entry))
                    return "serve", entry
                if mode == "replay":
                    raise explain_miss(self, ident, build())
            recorded = self._take_recorded(ident, older, build) if mode == "drift" else None
            self._check_live(ident)
            if gate_closed():  # record-new's miss (other live modes are refused at entry)
                raise refuse(self.name, self.mode, self.mode_source, f"met a call to record ({ident.target})")
            capture = mode in RECORDING_MODES or mode == "drift"
            seq = self._next_seq
            if capture:
                self._next_seq += 1
            if mode == "refresh":
                self._exercised.add(ident.identity)
                if older is not None:  # re-recorded: its entry under an older rule or salt goes
                    self._exercised.update(o.identity for o in self._others(ident, older))
            call = Call(ident=ident, request=build(), seq=seq, capture=capture, recorded=recorded,
                        recorded_at=utc_now(), older=older)
            if capture:
                self._pending[seq] = call
                self._played.append((ident.identity, call))
            self.live += 1
            return "live", call

    def begin_http(self, method: str, url: str, headers: Iterable[tuple[str, str]], body: bytes | str | None) -> tuple[str, Any]:
        return self.begin_http_lowered(method, url, [(str(k).lower(), str(v)) for k, v in headers], body)

    def begin_http_lowered(self, method: str, url: str, items: list[tuple[str, str]], body: bytes | str | None) -> tuple[str, Any]:
        """:meth:`begin_http` of ``(name, value)`` string pairs whose names are lower-cased."""
        ident = http_identity_lowered(method, url, items, body, normalizer=self.normalizer, sealing=self.sealing)
        return self.begin(
            ident,
            lambda: encode_request(method, url, items, body),
            lambda rule, sealing: http_identity_lowered(method, url, items, body, normalizer=self.normalizer,
                                                        rule=rule, sealing=sealing),
        )

    def begin_tool(self, name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[str, Any]:
        ident = tool_identity(name, args, kwargs, normalizer=self.normalizer, sealing=self.sealing)
        request = {"args": jsonable(list(args)), "kwargs": jsonable(dict(kwargs))}
        return self.begin(ident, lambda: request, lambda rule, sealing: tool_identity(
            name, args, kwargs, normalizer=self.normalizer, rule=max(rule, 2), sealing=sealing))

    def fallback_entry(self, call: Call) -> dict[str, Any] | None:
        """In ``live`` mode with ``fallback="replay"``: the recorded answer to a failed call."""
        if self.mode != "live" or self.fallback != "replay":
            return None
        with self._lock:
            entry = self._take_recorded(call.ident, call.older, lambda: call.request)
            if entry is not None:
                self.served += 1
                self._played.append((entry["identity"], entry))
            return entry

    def finish(self, call: Call, response: dict[str, Any]) -> None:
        """A live call completed: record it, or compare it with the recording (drift)."""
        with self._lock:
            if call.done or not call.capture:
                return
            call.done = True
            self._pending.pop(call.seq, None)
            entry = make_entry(call.ident, call.request, response, seq=call.seq, recorded_at=call.recorded_at,
                               duration_ms=round((time.monotonic() - call.started) * 1000))
            timing = entry_timing(call.started, call.responded, call.marks, response)
            if timing is not None:
                entry["timing"] = timing
            call.entry = entry
            self._live_responses.append(response)
            if self.effective_mode == "drift":
                self._compare(call, entry)
            else:
                self._new.append(entry)

    # -- drift ----------------------------------------------------------------------------
    def _redacted(self, obj: Any) -> Any:
        from ..model.redaction import redact  # (a replay hit never needs it)

        return redact(obj, self.sealing.rules)[0]

    def _redacted_or_refused(self, obj: Any) -> Any:
        """For the fingerprint (the write that follows names a refused field)."""
        try:
            return self._redacted(obj)
        except RedactionRefused:
            return "<refused>"

    def _shown(self, target: str) -> str:
        """A target as messages print it (and as written): redacted like the cassette."""
        return str(self._redacted(target))

    def _compare(self, call: Call, entry: dict[str, Any]) -> None:
        ident = call.ident
        if call.recorded is None:
            self.drift.append(DriftItem("new", ident.kind, self._shown(ident.target), ident.identity,
                                        ("not in the cassette",)))
            return
        live = self._redacted(entry["response"])
        item = judge(ident.kind, self._shown(ident.target), ident.identity, call.recorded, live, self.options.scorer,
                     self.options.threshold)
        if item is not None:
            (self.similar if item.status == "similar" else self.drift).append(item)

    def drift_report(self) -> str:
        """The drift table (every finding with its score), then each difference's details."""
        return drift_table(self.name, self.drift, self.similar)

    def pacer(self, entry: Mapping[str, Any]) -> Pacer | None:
        """When the parts of a served response are due (``use(timing=...)``); ``None``: now."""
        return pacer_for(entry, self.options.timing) if self.options.timing else None

    # -- what the block played ------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """The run fingerprint: the calls served or recorded, in order (see :mod:`.played`)."""
        with self._lock:
            played = list(self._played)
        return run_fingerprint(played, self._redacted_or_refused)

    def unplayed(self) -> list[dict[str, Any]]:
        """Recorded entries this block has not played (replay, record-new, drift)."""
        if self.effective_mode not in ("replay", "record-new", "drift"):
            return []
        with self._lock:
            return self._index.unplayed()

    # -- closing and writing -------------------------------------------------------------------
    def close(self, ok: bool) -> None:
        """End of the ``use()`` block: flush open streams, write the cassette, report drift."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            pending = list(self._pending.values())
            if self.draws is not None:
                self.draws.active = False  # casstore's own clock reads are not the block's draws
        for call in pending:  # a stream nobody read to the end: keep what was received
            if call.partial is not None:
                with contextlib.suppress(Exception):
                    self.finish(call, call.partial())
            with self._lock:
                self._pending.pop(call.seq, None)
        if self.effective_mode == "drift":
            self._report_drift()
        elif ok and self.effective_mode in RECORDING_MODES:
            self._write()
        if self.effective_mode in RECORDING_MODES or self.effective_mode == "drift":
            with self._lock:
                spent = list(self._live_responses)
            report_spend(self.name, spent, self.live)
        if ok and self.options.all_played:  # raise NotAllPlayed if anything is left
            entries = self.unplayed()
            draws = self.draws.unconsumed() if self.draws is not None else {}
            if entries or draws:
                raise not_all_played(self.name, entries, draws)

    def _report_drift(self) -> None:
        self.drift += [DriftItem("missing", str(e.get("kind")), str(e.get("target")), str(e.get("identity")),
                                 ("not exercised by this run",), seq=e.get("seq"))
                       for e in self._index.unplayed()]
        if self.drift or self.similar:
            print(self.drift_report(), file=sys.stderr)  # the drift table
        if self.drift:
            warnings.warn(DriftWarning(self.drift_report()), stacklevel=4)

    def _write(self) -> None:
        written = write_cassette(
            self.path,
            name=self.name,
            mode=self.effective_mode,
            cassette=self.cassette,
            base=self.base_entries,
            new=sorted(self._new, key=lambda e: e["seq"]),
            path_stamp=self._path_stamp,
            exercised=self._exercised,
            redaction_config=self._redaction_config,
            git_root=self._git_root,
            meta_extra={"fingerprint": self.fingerprint, **runtime_meta(),
                        **({"draws": self.draws.to_write(self.effective_mode == "record-new")} if self.draws else {})},
        )
        if written:
            self.written = True
