"""Packs: many objects in one stored file (``packs/<id>.pack`` + ``.idx``) where requests cost;
:class:`PackedStore` shows members under their loose keys. Nothing in a pack is trusted
(docs/design.md, "Packs")."""

from __future__ import annotations

import builtins
import hashlib
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import CasstoreError, IntegrityError, NotFoundError, StoreError
from ..model.canonical import canonical_json, loads_bounded
from ..model.defaults import PACK_THRESHOLD
from .base import ObjectInfo, Store, too_large
from .keys import parse_key
from .local import LocalStore

__all__ = ["PackedStore", "PACK_MAGIC", "build_pack", "parse_index", "plan_reads", "ReadTask", "DEFAULT_PACK_THRESHOLD"]

PACK_MAGIC = b"CASSTORE-PACK/1\n"
INDEX_FORMAT = "casstore.pack-index/v1"
PACK_PREFIX = "packs/"
DEFAULT_PACK_THRESHOLD = PACK_THRESHOLD  # objects in one push before they go into packs
PACK_TARGET_BYTES = 32 << 20  # a pack is closed once it holds this much
MAX_INDEX_BYTES = 64 << 20
MAX_MEMBER_BYTES = (2 << 30) + (64 << 20)  # a 2 GiB cassette's frame, with room for zstd's worst case
COALESCE_GAP = 256 << 10  # read across a gap this small rather than send another request
MAX_SPAN_BYTES = 16 << 20  # one ranged read fetches at most this much
FEW_KEYS = 3  # reading this many keys or fewer tries the loose layout before the packs

_PACK_KEY = re.compile(r"^packs/([0-9a-f]{64})\.(pack|idx)\Z")

# (the pack's hex id, offset, length); the call form: the class form's string annotations
# would make typing compile them at start-up
Member = NamedTuple("Member", [("pack", str), ("offset", int), ("length", int)])  # noqa: UP014

# what a pack may hold: an object key or a well-formed signature envelope key
_MEMBER_KEY = re.compile(r"(?:objects/sha256/[0-9a-f]{2}/[0-9a-f]{62}"
                         r"|signatures/sha256/[0-9a-f]{2}/[0-9a-f]{62}/[0-9a-f]{1,64}\.sig)")


def build_pack(items: Sequence[tuple[str, bytes]]) -> tuple[str, bytes, bytes]:
    """(pack id, pack bytes, index bytes) for ``items`` ((loose key, bytes)), in key order:
    the same members give the same pack id (a retried push rewrites the same object)."""
    return _build_pack(items)[:3]


def _build_pack(items: Sequence[tuple[str, bytes]]) -> tuple[str, bytes, bytes, list[list[Any]]]:
    """build_pack, and the index's members ([key, offset, length], as parse_index reads them)."""
    parts = [PACK_MAGIC]
    members: list[list[Any]] = []
    offset = len(PACK_MAGIC)
    seen: set[str] = set()
    for key, data in sorted(items, key=lambda kv: kv[0]):
        if key in seen:
            continue
        if not _MEMBER_KEY.fullmatch(key):
            raise StoreError(f"cannot pack {key!r}: not an object or signature key")
        seen.add(key)
        members.append([key, offset, len(data)])
        parts.append(data)
        offset += len(data)
    pack = b"".join(parts)
    pack_id = hashlib.sha256(pack).hexdigest()
    index = canonical_json({"format": INDEX_FORMAT, "pack": pack_id, "pack_size": len(pack),
                            "members": members})
    return pack_id, pack, index, members


def parse_index(data: bytes, pack_id: str) -> dict[str, Member]:
    """The members an index lists, validated; raises ValueError naming what is wrong."""
    if len(data) > MAX_INDEX_BYTES:
        raise ValueError(f"index is {len(data)} bytes, over the {MAX_INDEX_BYTES} limit")
    try:
        doc = loads_bounded(data.decode("utf-8"))
    except Exception as exc:  # noqa: BLE001 - every parse failure is "not an index"
        raise ValueError(f"index is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != INDEX_FORMAT:
        raise ValueError(f"index format is not {INDEX_FORMAT}")
    if doc.get("pack") != pack_id:
        raise ValueError(f"index names pack {str(doc.get('pack'))[:70]!r}, not its own {pack_id[:12]}…")
    size = doc.get("pack_size")
    if type(size) is not int or size < len(PACK_MAGIC):
        raise ValueError("index has no valid pack_size")
    raw = doc.get("members")
    if not isinstance(raw, list):
        raise ValueError("index members is not a list")
    out: dict[str, Member] = {}
    for i, m in enumerate(raw):
        if not (isinstance(m, list) and len(m) == 3 and isinstance(m[0], str)
                and type(m[1]) is int and type(m[2]) is int):
            raise ValueError(f"index member {i} is not [key, offset, length]")
        key, off, length = m
        if not _MEMBER_KEY.fullmatch(key):
            raise ValueError(f"index member {i} has an invalid key {key[:80]!r}")
        if off < len(PACK_MAGIC) or length <= 0 or length > MAX_MEMBER_BYTES or off + length > size:
            raise ValueError(f"index member {key} has an invalid range {off}+{length} in a {size}-byte pack")
        out[key] = Member(pack_id, off, length)
    return out


@dataclass
class Catalog:
    """What the store's packs hold: loose key -> member, and the packs' own listings."""

    members: dict[str, Member] = field(default_factory=dict)
    packs: dict[str, ObjectInfo] = field(default_factory=dict)  # id -> info of the .pack
    indexes: dict[str, ObjectInfo] = field(default_factory=dict)  # id -> info of the .idx
    contents: dict[str, dict[str, Member]] = field(default_factory=dict)  # id -> its members
    problems: list[str] = field(default_factory=list)  # "packs/<id>.idx: why"
    vanished: list[str] = field(default_factory=list)  # ids whose index went while we listed (a gc, a merge)


@dataclass
class ReadTask:
    """One request's worth of reading: a span of one pack, or one loose key."""

    keys: list[str]
    run: Callable[[], dict[str, bytes | BaseException]]
    bytes: int = 0


class PackedStore(Store):
    """A store plus its packs, seen as one loose namespace. See the module docstring."""

    def __init__(self, inner: Store, *, pack_threshold: int = DEFAULT_PACK_THRESHOLD) -> None:
        self.inner = inner
        self.url = inner.url
        # packing pays where requests cost; a local folder keeps the plain loose layout
        self.pack_threshold = 0 if isinstance(inner, LocalStore) else pack_threshold
        self._catalog: Catalog | None = None
        self._held: CasstoreError | None = None  # what preload() met, for the next catalog() to raise
        self._lock = threading.Lock()
        self._doomed: dict[str, set[str]] = {}  # pack id -> member keys deleted, awaiting flush
        self._listed: dict[str, set[str]] = {}  # prefix -> loose keys its last listing showed

    # -- the catalog -------------------------------------------------------------------
    def catalog(self) -> Catalog:
        with self._lock:
            if self._catalog is None:
                held, self._held = self._held, None
                if held is not None:
                    raise held  # what preload met, retries spent: not a second round of them
                self._catalog = self._load()
            return self._catalog

    def preload(self) -> bool:
        """Read the catalog now (while something else runs): True when read; a failure is
        raised once by the next :meth:`catalog` call instead."""
        try:
            self.catalog()
            return True
        except CasstoreError as exc:
            with self._lock:
                self._held = exc
            return False

    def refresh(self) -> None:
        """Forget the catalog: the next read lists the packs again."""
        with self._lock:
            self._catalog = None
            self._held = None

    def _pack_files(self) -> Iterable[ObjectInfo]:
        return self.inner.list(PACK_PREFIX)

    def _load(self) -> Catalog:
        cat = Catalog()
        for inf in self._pack_files():
            m = _PACK_KEY.match(inf.key)
            if m is None:
                continue
            (cat.packs if m.group(2) == "pack" else cat.indexes)[m.group(1)] = inf
        for pack_id in sorted(cat.indexes):
            where = f"{PACK_PREFIX}{pack_id}.idx"
            if pack_id not in cat.packs:
                if self.inner.info(where) is None:  # both removed while we listed (index first)
                    cat.vanished.append(pack_id)
                else:
                    cat.problems.append(f"{where}: its pack {PACK_PREFIX}{pack_id}.pack is missing")
                continue
            listed = cat.indexes[pack_id].size
            if listed > MAX_INDEX_BYTES:
                cat.problems.append(f"{where}: index is {listed} bytes, over the {MAX_INDEX_BYTES} limit")
                continue
            try:  # no more than the listing said: a store that sends more is refused at listed + 1 bytes
                members = parse_index(self.inner.read_bounded(where, listed), pack_id)
            except IntegrityError:
                cat.problems.append(f"{where}: larger than the {listed} bytes listed")
                continue
            except NotFoundError:
                cat.vanished.append(pack_id)  # removed while we listed (a gc, a merge)
                continue
            except ValueError as exc:
                cat.problems.append(f"{where}: {exc}")
                continue
            size = cat.packs[pack_id].size
            if members and max(m.offset + m.length for m in members.values()) > size:
                cat.problems.append(f"{where}: lists ranges past the end of its {size}-byte pack")
                continue
            cat.contents[pack_id] = members
        for pack_id in sorted(cat.contents, reverse=True):  # a key in two packs: the first pack's (in C)
            cat.members.update(cat.contents[pack_id])
        return cat

    def _member(self, key: str, *, load: bool) -> Member | None:
        cat = self._catalog
        if cat is None:
            if not load:
                return None
            cat = self.catalog()
        return cat.members.get(key)

    def _read_member(self, key: str, member: Member) -> bytes:
        data = self.inner.read_range(f"{PACK_PREFIX}{member.pack}.pack", member.offset, member.offset + member.length)
        if len(data) != member.length:
            raise StoreError(f"{key}: pack {member.pack[:12]}… is truncated")
        return data

    # -- Store interface -------------------------------------------------------------------
    def read(self, key: str) -> bytes:
        member = self._member(key, load=False)
        if member is None:
            try:
                return self.inner.read(key)
            except NotFoundError:
                member = self._member(key, load=True)
                if member is None:
                    raise
        try:
            return self._read_member(key, member)
        except (NotFoundError, StoreError):
            try:
                return self.inner.read(key)  # a loose copy, if there is one
            except NotFoundError:
                raise NotFoundError(f"{key} is not in {self.url} (its pack {member.pack[:12]}… is unreadable)") from None

    def read_range(self, key: str, start: int, end: int) -> bytes:
        member = self._member(key, load=True)
        if member is None:
            return self.inner.read_range(key, start, end)
        end = min(end, member.length)
        if end <= start:
            return b""
        return self.inner.read_range(f"{PACK_PREFIX}{member.pack}.pack", member.offset + start, member.offset + end)

    def read_bounded(self, key: str, limit: int) -> bytes:
        member = self._member(key, load=False)
        if member is None:
            try:
                return self.inner.read_bounded(key, limit)
            except NotFoundError:
                member = self._member(key, load=True)
                if member is None:
                    raise
        if member.length > limit:  # refused from the index, before a byte is read
            raise too_large(key, self.url, limit)
        return self.read(key)

    def write_once(self, key: str, data: bytes, *, checked: bool = False) -> bool:
        return self.inner.write_once(key, data, checked=checked)

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        seen = set()
        for inf in self.inner.list(prefix):
            seen.add(inf.key)
            yield inf
        with self._lock:
            self._listed[prefix] = seen
        if prefix.split("/", 1)[0] in ("", "objects", "signatures"):  # where packed members live
            cat = self.catalog()
            for key, member in sorted(cat.members.items()):
                if key.startswith(prefix) and key not in seen:
                    yield ObjectInfo(key, member.length, cat.packs[member.pack].mtime)

    def info(self, key: str) -> ObjectInfo | None:
        inf = self.inner.info(key)
        if inf is not None:
            return inf
        member = self._member(key, load=True)
        if member is None:
            return None
        return ObjectInfo(key, member.length, self.catalog().packs[member.pack].mtime)

    def stat_many(self, keys: Iterable[str]) -> dict[str, ObjectInfo]:
        wanted = set(keys)
        found = self.inner.stat_many(wanted) if wanted else {}
        cat = self.catalog() if wanted else None
        for key in wanted - set(found):
            if cat is not None and key in cat.members:
                m = cat.members[key]
                found[key] = ObjectInfo(key, m.length, cat.packs[m.pack].mtime)
        return found

    def packed(self, key: str) -> bool:
        """Whether a pack holds ``key`` (its catalog as last loaded)."""
        return self._member(key, load=True) is not None

    def forget_member(self, key: str) -> None:
        """Drop ``key`` from every pack holding it (concurrent pushes may have packed it twice)
        on the next :meth:`flush`; a loose copy stays."""
        cat = self.catalog()
        with self._lock:
            for pack_id, members in cat.contents.items():
                if key in members:
                    self._doomed.setdefault(pack_id, set()).add(key)

    def delete(self, key: str) -> None:
        with self._lock:
            loose = [seen for prefix, seen in self._listed.items() if key.startswith(prefix)]
        packed = self._member(key, load=True) is not None
        if not (packed and loose and all(key not in seen for seen in loose)):
            self.inner.delete(key)  # (skipped for a key the last listing showed only in a pack)
        if packed:
            self.forget_member(key)

    def close(self) -> None:
        self.inner.close()

    # -- many at once ---------------------------------------------------------------------
    def read_plan(self, keys: Iterable[str], limits: Mapping[str, int] | None = None) -> builtins.list[ReadTask]:
        """Tasks that together read ``keys`` (a ranged read per run of neighbouring members, a read
        per loose key), each returning ``{key: bytes or exception}``; ``limits``: bytes a key may hold."""
        keys = list(dict.fromkeys(keys))
        limits = limits or {}
        if self._catalog is None and len(keys) <= FEW_KEYS:
            # a few keys: try them loose first (one GET each), the packs only for a miss
            return [ReadTask([k], _read_one(self, k, limits.get(k))) for k in keys]
        cat = self.catalog()
        by_pack: dict[str, list[tuple[str, Member]]] = {}
        tasks: list[ReadTask] = []
        for key in keys:
            member = cat.members.get(key)
            limit = limits.get(key)
            if member is None:
                tasks.append(ReadTask([key], _read_one(self.inner, key, limit)))
            elif limit is not None and member.length > limit:
                tasks.append(ReadTask([key], _refuse(key, too_large(key, self.url, limit))))
            else:
                by_pack.setdefault(member.pack, []).append((key, member))
        for pack_id, found in sorted(by_pack.items()):
            found.sort(key=lambda km: km[1].offset)
            span: list[tuple[str, Member]] = []
            for km in found:
                if span:
                    start = span[0][1].offset
                    end = span[-1][1].offset + span[-1][1].length
                    if km[1].offset - end > COALESCE_GAP or km[1].offset + km[1].length - start > MAX_SPAN_BYTES:
                        tasks.append(self._span_task(pack_id, span, limits))
                        span = []
                span.append(km)
            if span:
                tasks.append(self._span_task(pack_id, span, limits))
        return tasks

    def _span_task(self, pack_id: str, span: builtins.list[tuple[str, Member]], limits: Mapping[str, int]) -> ReadTask:
        start = span[0][1].offset
        end = max(m.offset + m.length for _, m in span)

        def run() -> dict[str, bytes | BaseException]:
            failed: BaseException | None = None
            try:
                data = self.inner.read_range(f"{PACK_PREFIX}{pack_id}.pack", start, end)
            except Exception as exc:  # noqa: BLE001 - fall back to reading each key on its own
                data, failed = b"", exc
            out: dict[str, bytes | BaseException] = {}
            for key, m in span:
                piece = data[m.offset - start : m.offset - start + m.length]
                if len(piece) == m.length:
                    out[key] = piece
                else:  # pack gone or truncated: a loose copy may still exist
                    try:
                        limit = limits.get(key)
                        out[key] = self.inner.read(key) if limit is None else self.inner.read_bounded(key, limit)
                    except NotFoundError:
                        # no loose copy: what the pack's read met (a store that sent more than asked), or its absence
                        out[key] = failed if isinstance(failed, IntegrityError) else NotFoundError(
                            f"{key} is not in {self.url} (its pack {pack_id[:12]}… is unreadable)")
                    except Exception as exc:  # noqa: BLE001
                        out[key] = exc
            return out

        return ReadTask([k for k, _ in span], run, end - start)

    def should_pack(self, objects: int) -> bool:
        return 0 < self.pack_threshold <= objects

    def write_packs(self, items: Sequence[tuple[str, bytes]]) -> builtins.list[tuple[builtins.list[str], Callable[[], str]]]:
        """``(member keys, write)`` per pack of ``items`` (an object and its envelopes stay
        together); ``write()`` stores the pack, then its index, and returns the pack id."""
        groups: dict[str, list[tuple[str, bytes]]] = {}
        for key, data in items:
            d = _member_digest(key)
            groups.setdefault(d, []).append((key, data))
        packs: list[list[tuple[str, bytes]]] = [[]]
        size = 0
        for d in sorted(groups):
            if size >= PACK_TARGET_BYTES and packs[-1]:
                packs.append([])
                size = 0
            packs[-1].extend(groups[d])
            size += sum(len(b) for _, b in groups[d])
        out = []
        for members in packs:
            if members:
                out.append(([k for k, _ in members], self._pack_writer(members)))
        return out

    def _pack_writer(self, members: builtins.list[tuple[str, bytes]]) -> Callable[[], str]:
        def write() -> str:
            pack_id, pack, index, listed = _build_pack(members)
            self.inner.write_once(f"{PACK_PREFIX}{pack_id}.pack", pack, checked=True)
            self.inner.write_once(f"{PACK_PREFIX}{pack_id}.idx", index, checked=True)  # the commit point
            # what parse_index reads back from that index (built here from checked keys), without reading it
            parsed = {key: Member(pack_id, offset, length) for key, offset, length in listed}
            with self._lock:
                if self._catalog is not None:
                    self._catalog.packs[pack_id] = ObjectInfo(f"{PACK_PREFIX}{pack_id}.pack", len(pack), None)
                    self._catalog.contents[pack_id] = parsed
                    for key, member in parsed.items():
                        self._catalog.members.setdefault(key, member)
            return pack_id
        return write

    def flush(self) -> builtins.list[str]:
        """Rewrite the packs that lost members to :meth:`delete`. Returns problems."""
        with self._lock:
            doomed, self._doomed = self._doomed, {}
        problems: list[str] = []
        if not doomed:
            return problems
        cat = self.catalog()
        for pack_id, gone in sorted(doomed.items()):
            members = cat.contents.get(pack_id, {})
            keep = {k: m for k, m in members.items() if k not in gone}
            try:
                if keep:
                    data = self.inner.read_bounded(f"{PACK_PREFIX}{pack_id}.pack", cat.packs[pack_id].size)
                    items = [(k, data[m.offset : m.offset + m.length]) for k, m in keep.items()]
                    if any(len(b) != m.length for (_, b), m in zip(items, keep.values(), strict=True)):
                        raise StoreError(f"pack {pack_id[:12]}… is truncated; left as it is")
                    self._pack_writer(items)()
                self.inner.delete(f"{PACK_PREFIX}{pack_id}.idx")  # invisible first, then gone
                self.inner.delete(f"{PACK_PREFIX}{pack_id}.pack")
            except (StoreError, NotFoundError, IntegrityError) as exc:
                problems.append(f"{PACK_PREFIX}{pack_id}.pack: {exc}")
        self._catalog = None
        return problems

    def stale_temp_files(self, cutoff: float) -> builtins.list[tuple[Path, int]]:
        return self.inner.stale_temp_files(cutoff)

    def stray_packs(self) -> builtins.list[ObjectInfo]:
        """Packs with no index: an interrupted push left them; nothing can read them."""
        cat = self.catalog()
        return [inf for pid, inf in sorted(cat.packs.items()) if pid not in cat.indexes]


def _member_digest(key: str) -> str:
    parsed = parse_key(key)
    if parsed is None:
        raise StoreError(f"cannot pack {key!r}: not an object or signature key")
    return parsed.digest


def _read_one(store: Store, key: str, limit: int | None = None) -> Callable[[], dict[str, bytes | BaseException]]:
    def run() -> dict[str, bytes | BaseException]:
        try:
            return {key: store.read(key) if limit is None else store.read_bounded(key, limit)}
        except Exception as exc:  # noqa: BLE001 - reported per key by the caller
            return {key: exc}
    return run


def _refuse(key: str, exc: BaseException) -> Callable[[], dict[str, bytes | BaseException]]:
    return lambda: {key: exc}


def plan_reads(store: Store, keys: Iterable[str], limits: Mapping[str, int] | None = None) -> list[ReadTask]:
    """Tasks reading ``keys`` from any store (see :meth:`PackedStore.read_plan`)."""
    if isinstance(store, PackedStore):
        return store.read_plan(keys, limits)
    limits = limits or {}
    return [ReadTask([k], _read_one(store, k, limits.get(k))) for k in dict.fromkeys(keys)]
