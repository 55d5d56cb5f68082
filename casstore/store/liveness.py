"""Liveness markers (``live/<UTC time>-<random>.json``): a push that finds its objects stored
names them, so a gc racing it keeps them (docs/design.md, "gc and re-pins")."""

from __future__ import annotations

import datetime as _dt
import re
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import IntegrityError, NotFoundError
from ..model.canonical import canonical_json, loads_bounded
from .backends import ObjectInfo, Store
from .packs import plan_reads
from .transfer import NullReporter, run_parallel

__all__ = ["LIVE_PREFIX", "MARKER_FORMAT", "Markers", "SweepResult", "parse_marker", "write_marker",
           "read_markers", "sweep"]

LIVE_PREFIX = "live/"
MARKER_FORMAT = "casstore.live/v1"
MAX_MARKER_BYTES = 64 << 20
_KEY = re.compile(r"^live/(\d{8}T\d{6}Z)-[0-9a-f]{16}\.json\Z")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")


def parse_marker(data: bytes) -> set[str]:
    """The digests a marker names; ValueError if it is not a marker."""
    if len(data) > MAX_MARKER_BYTES:
        raise ValueError(f"marker is {len(data)} bytes, over the {MAX_MARKER_BYTES} limit")
    try:
        doc = loads_bounded(data.decode("utf-8"))
    except Exception as exc:  # noqa: BLE001 - any parse failure is "not a marker"
        raise ValueError(f"marker is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != MARKER_FORMAT or not isinstance(doc.get("digests"), list):
        raise ValueError(f"not a {MARKER_FORMAT} marker")
    return {d for d in doc["digests"] if isinstance(d, str) and _DIGEST.match(d)}


def write_marker(store: Store, digests: Iterable[str]) -> str | None:
    """Write one marker naming ``digests`` (none: no marker); return its key."""
    wanted = sorted(set(digests))
    if not wanted:
        return None
    now = _dt.datetime.fromtimestamp(time.time(), _dt.timezone.utc)
    key = f"{LIVE_PREFIX}{now.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(8)}.json"
    body = {"digests": wanted, "format": MARKER_FORMAT, "time": now.strftime("%Y-%m-%dT%H:%M:%SZ")}
    store.write_once(key, canonical_json(body), checked=True)
    return key


@dataclass
class Markers:
    """What the store's markers say at one listing."""

    fresh: dict[str, set[str]] = field(default_factory=dict)  # marker key -> digests, within grace
    expired: list[ObjectInfo] = field(default_factory=list)  # older than the grace period
    problems: list[str] = field(default_factory=list)  # "live/…: why" (kept, never trusted)

    @property
    def digests(self) -> set[str]:
        return set().union(*self.fresh.values())


def read_markers(store: Store, cutoff: float, *, skip: Iterable[str] = ()) -> Markers:
    """The markers in ``store``: fresh ones (newer than ``cutoff``) are read, older ones
    listed for deletion. ``skip``: keys already read (a second listing reads only new ones)."""
    out = Markers()
    known = set(skip)
    for inf in store.list(LIVE_PREFIX):
        m = _KEY.match(inf.key)
        if m is None or inf.key in known:
            continue
        when = inf.mtime
        if when is None:  # a store without times: the one in the name (the body's is the same)
            when = _dt.datetime.strptime(m.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=_dt.timezone.utc).timestamp()
        if when <= cutoff:
            out.expired.append(inf)
            continue
        try:
            digests = parse_marker(store.read_bounded(inf.key, MAX_MARKER_BYTES))
        except NotFoundError:
            continue  # removed while we listed (another gc)
        except (ValueError, IntegrityError) as exc:  # not a marker: reported, protects nothing
            out.problems.append(f"{inf.key}: {exc}")
            continue
        # a StoreError propagates: gc must not sweep without knowing what a marker protects
        out.fresh[inf.key] = digests
    return out


SWEEP_BATCH_BYTES = 64 << 20  # victims read (to put back if a push re-pins them) per round


@dataclass
class SweepResult:
    errors: dict[str, str] = field(default_factory=dict)  # digest -> why it was not deleted
    restored: set[str] = field(default_factory=set)  # deleted, then put back: a push re-pinned it
    seen: set[str] = field(default_factory=set)  # marker keys read


def sweep(store: Store, victims: dict[str, list[str]], sizes: dict[str, int], *, cutoff: float,
          seen: Iterable[str], jobs: int = 8) -> SweepResult:
    """Delete ``victims`` (digest -> its keys, the object first) so that a racing push never loses
    its object: read, delete, and put back each one a marker written since (not ``seen``) names."""
    out = SweepResult(seen=set(seen))
    batches: list[list[str]] = [[]]
    size = 0
    for d in sorted(victims):
        if batches[-1] and size + sizes.get(d, 0) > SWEEP_BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(d)
        size += sizes.get(d, 0)
    for batch in batches:
        if not batch:
            continue
        keys = [k for d in batch for k in victims[d]]
        # no victim is read past the size the listing showed (an envelope: 1 MiB)
        limits = {k: sizes.get(d, 0) if k.startswith("objects/") else 1 << 20 for d in batch for k in victims[d]}
        held: dict[str, bytes] = {}
        for task in plan_reads(store, keys, limits):
            for key, got in task.run().items():
                if isinstance(got, bytes):
                    held[key] = got
                elif not isinstance(got, NotFoundError):
                    owner = next(d for d in batch if key in victims[d])
                    out.errors[owner] = f"not deleted: could not read it first ({got})"
        doomed = [d for d in batch if d not in out.errors]

        def delete(d: str) -> None:
            for key in victims[d]:  # the object first: envelopes alone are swept later
                store.delete(key)

        for d, _res, err in run_parallel(doomed, delete, jobs=jobs, reporter=NullReporter(), label="gc store",
                                         describe=lambda *a: ""):
            if err is not None:
                out.errors[d] = str(err)
        flush = getattr(store, "flush", None)
        problems = flush() if flush is not None else []
        if problems:
            for d in doomed:  # their bytes are still in a pack we could not rewrite
                out.errors.setdefault(d, "; ".join(problems))
        later = read_markers(store, cutoff, skip=out.seen)
        out.seen |= set(later.fresh) | {i.key for i in later.expired}
        for d in sorted(set(doomed) & later.digests):
            for key in victims[d]:
                if key in held:
                    store.write_once(key, held[key], checked=True)
            out.restored.add(d)
            out.errors.pop(d, None)
    return out
