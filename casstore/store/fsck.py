"""fsck of a store: every object (corrupt, unsigned) and envelope (bad, untrusted, dangling),
pinned by the lock or not."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import zstandard

from ..errors import CasstoreError, NotFoundError
from ..model.blob import max_frame_size, verify_frame
from ..model.cassette import MAX_CASSETTE_BYTES
from .backends import Store, digest_from_key, object_key, parse_key
from .packs import ReadTask, plan_reads
from .signing import TrustedKeys, check_envelope
from .transfer import NullReporter, run_parallel

__all__ = ["StoreFsck", "fsck_store", "check_envelope"]


@dataclass
class StoreFsck:
    objects: int = 0
    bytes: int = 0  # stored (compressed) bytes
    corrupt: list[str] = field(default_factory=list)  # "<digest>: <why>"
    unsigned: list[str] = field(default_factory=list)  # digests
    bad_signatures: list[str] = field(default_factory=list)  # "<key>: <why>"
    untrusted: list[str] = field(default_factory=list)  # "<digest> signed by <who> (<keyid>)"
    dangling_signatures: list[str] = field(default_factory=list)  # keys
    strays: list[str] = field(default_factory=list)  # keys that do not fit the layout


def _content_size(frame: bytes) -> int:
    try:
        size = zstandard.get_frame_parameters(frame).content_size
    except zstandard.ZstdError as exc:
        raise ValueError(f"not a zstd frame ({exc})") from None
    if size in (zstandard.CONTENTSIZE_UNKNOWN, zstandard.CONTENTSIZE_ERROR):
        raise ValueError("the frame does not state its content size")
    if size > MAX_CASSETTE_BYTES:
        raise ValueError(f"the frame claims {size} bytes, more than a cassette may hold")
    return size


SMALL_OBJECT = 1 << 20  # objects up to this size are read whole; larger ones: their header first


def _limits(store: Store, listed: dict[str, int]) -> tuple[dict[str, int], list[str]]:
    """How many bytes each object may hold, from the content size its frame header states:
    an object larger than that size's frame bound is corrupt and is not read at all."""
    limits: dict[str, int] = {}
    oversized: list[str] = []
    for key, size in listed.items():
        limit = max_frame_size(MAX_CASSETTE_BYTES)
        if size > SMALL_OBJECT:
            try:
                claimed = _content_size(store.read_range(key, 0, 18))
            except (CasstoreError, ValueError):
                claimed = None  # the full read reports it
            if claimed is not None:
                limit = max_frame_size(claimed)
        if size > limit:
            oversized.append(f"{digest_from_key(key)}: object is larger than its frame allows ({size} bytes, "
                             f"at most {limit}); refusing it")
        else:
            limits[key] = limit
    return limits, oversized


def fsck_store(store: Store, *, trusted: TrustedKeys, skip_content: Iterable[str] = (),
               jobs: int = 4) -> StoreFsck:
    """Check every object and envelope in ``store``. ``skip_content``: digests whose
    object bytes were already verified against the lock (not read twice)."""
    out = StoreFsck()
    objects: dict[str, int] = {}
    for inf in store.list("objects/"):
        d = digest_from_key(inf.key)
        if d is None:
            out.strays.append(inf.key)
        else:
            objects[d] = inf.size
    envelopes: dict[str, list[str]] = {}
    keyids: dict[str, str] = {}  # envelope key -> the key id its name says
    for inf in store.list("signatures/"):
        parsed = parse_key(inf.key)
        if parsed is None or parsed.kind != "signature" or parsed.keyid is None:
            out.strays.append(inf.key)
        elif parsed.digest not in objects:
            out.dangling_signatures.append(inf.key)
        else:
            envelopes.setdefault(parsed.digest, []).append(inf.key)
            keyids[inf.key] = parsed.keyid
    out.objects = len(objects)
    out.bytes = sum(objects.values())
    skip = set(skip_content)

    # objects, then envelopes, each in batched reads (neighbours in a pack: one ranged GET);
    # an envelope is checked against its object's size, learnt in the first pass
    sizes: dict[str, int | None] = {}
    gone: set[str] = set()

    def check_objects(task: ReadTask) -> list[str]:
        corrupt = []
        for key, got in task.run().items():
            digest = digest_from_key(key)
            assert digest is not None
            if isinstance(got, NotFoundError):
                gone.add(digest)  # deleted while we looked (a gc): not corruption
                continue
            if isinstance(got, BaseException):
                corrupt.append(f"{digest}: cannot check ({got})")
                continue
            try:
                size = _content_size(got)
                sizes[digest] = size
                verify_frame(got, digest, size)
            except (CasstoreError, ValueError) as exc:
                sizes[digest] = None
                corrupt.append(f"{digest}: {exc}".replace(f"{digest}: {digest}: ", f"{digest}: "))
        return corrupt

    def check_envelopes(task: ReadTask) -> tuple[list[str], list[str]]:
        bad, untrusted = [], []
        for key, got in task.run().items():
            if isinstance(got, NotFoundError):
                continue
            digest = owner[key]
            if isinstance(got, BaseException):
                bad.append(f"{key}: cannot check ({got})")
                continue
            err, who = check_envelope(got, digest, keyids[key], sizes.get(digest), trusted)
            if err:
                bad.append(f"{key}: {err}")
            if who:
                untrusted.append(who)
        return bad, untrusted

    limits, oversized = _limits(store, {object_key(d): objects[d] for d in sorted(objects) if d not in skip})
    out.corrupt += oversized
    for task, res, err in run_parallel(plan_reads(store, list(limits), limits), check_objects, jobs=jobs,
                                       describe=lambda *a: "", reporter=NullReporter(), label="fsck"):
        if err is not None:
            out.corrupt += [f"{digest_from_key(k)}: cannot check ({err})" for k in task.keys]
        else:
            out.corrupt += res or []
    owner = {key: d for d in sorted(objects) if d not in gone for key in envelopes.get(d, [])}
    for task, checked, err in run_parallel(plan_reads(store, owner), check_envelopes, jobs=jobs,
                                           describe=lambda *a: "", reporter=NullReporter(), label="fsck"):
        if err is not None:
            out.bad_signatures += [f"{k}: cannot check ({err})" for k in task.keys]
        else:
            assert checked is not None
            out.bad_signatures += checked[0]
            out.untrusted += checked[1]
    out.unsigned += [d for d in sorted(objects) if d not in gone and not envelopes.get(d)]
    catalog = getattr(store, "catalog", None)
    if catalog is not None:  # a pack index that does not parse, or whose pack is gone
        out.corrupt += catalog().problems
    for lst in (out.corrupt, out.bad_signatures, out.untrusted, out.dangling_signatures, out.unsigned, out.strays):
        lst.sort()
    return out
