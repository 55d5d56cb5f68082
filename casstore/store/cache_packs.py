"""The packs of the local cache, kept few by merging (as ``git repack --geometric=2``); a merge
never loses nor hides an object (docs/design.md, "Packs in the local cache")."""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import IntegrityError, NotFoundError, StoreError
from ..model.canonical import canonical_json
from ..model.fsutil import READ_FLAGS, atomic_write, create_temp, fsync_dir, pread, write_all
from .base import ObjectInfo
from .keys import parse_key
from .local import LocalStore
from .packs import INDEX_FORMAT, PACK_MAGIC, PACK_PREFIX, Catalog, Member, PackedStore, parse_index

__all__ = ["CachePacks", "MergeReport", "plan_merge", "MERGE_AT", "MERGE_FACTOR"]

MERGE_AT = 16  # a write that leaves more packs than this merges the small ones
MERGE_FACTOR = 2  # after a merge each pack holds at least twice the bytes of all smaller ones
MERGE_MAX_MEMBERS = 200_000  # members of one merged pack (its index stays far under 64 MiB)
MAX_CONTENT_BYTES = 4 << 30  # what a member without a stated size may inflate to while it is checked
OPEN_PACKS = 64  # pack files one process keeps open (the rest are opened per read)
LOAD_ATTEMPTS = 8  # listings of the packs raced by a merge before one is taken as it is
MARK = ".merged"  # in packs/: a token replaced by every merge and rewrite before it removes packs

# catalogs of cache packs read in this process: packs folder -> (its stat, catalog); a stale
# one costs a miss, never a wrong read (members are verified, a gone pack makes a re-list)
_CATALOGS: dict[str, tuple[tuple[int, int, int], Catalog]] = {}


@dataclass
class MergeReport:
    """What one merge did (or, dry, would do)."""

    sources: list[str] = field(default_factory=list)  # ids of the packs merged
    pack: str | None = None  # the new pack's id (None: every member was dropped or held elsewhere)
    members: int = 0  # members copied into it
    bytes: int = 0  # bytes of the packs merged
    dropped: list[str] = field(default_factory=list)  # keys of members that failed verification
    problems: list[str] = field(default_factory=list)  # old packs that could not be removed


def plan_merge(sizes: dict[str, int], *, at: int = MERGE_AT) -> list[str]:
    """The packs to merge into one (ids, smallest first), none while there are ``at`` or
    fewer. Geometric, as git's: the largest packs that already grow by MERGE_FACTOR stay; the
    rest are merged, with each next pack their sum is not MERGE_FACTOR times smaller than."""
    if len(sizes) <= max(at, 1):
        return []
    order = sorted(sizes, key=lambda pid: (sizes[pid], pid))
    split = 0
    for i in range(len(order) - 1, 0, -1):
        if sizes[order[i]] < MERGE_FACTOR * sizes[order[i - 1]]:
            split = i + 1
            break
    total = sum(sizes[pid] for pid in order[:split])
    while split < len(order) and sizes[order[split]] < MERGE_FACTOR * total:
        total += sizes[order[split]]
        split += 1
    return order[:split] if split >= 2 else []


class CachePacks(PackedStore):
    """The cache's loose files and packs as one namespace (gc, push and the readers), and
    the rewrites of its packs (a dropped member, gc, merges)."""

    def __init__(self, inner: LocalStore) -> None:
        super().__init__(inner, pack_threshold=0)
        self.loose = inner
        self._dir = os.path.join(inner.url, PACK_PREFIX.rstrip("/"))
        self._fds: dict[str, int] = {}  # pack id -> its open file (never closed while the process lives)
        self._fd_lock = threading.Lock()
        self._exclusive = False  # holding the guard's flock (not merely the no-flock fallback)

    # -- reading -------------------------------------------------------------------------
    def _read_member(self, key: str, member: Member) -> bytes:
        """The member's bytes. A pack gone since the catalog was read (merged, rewritten)
        sends the reader to a fresh catalog, where the member lives in its new pack."""
        for _ in range(LOAD_ATTEMPTS):
            try:
                return self._read_once(key, member)
            except NotFoundError:
                moved = self._member(key, load=True)
                if moved is None or moved == member:  # this catalog still names the gone pack
                    self.forget_catalog()
                    moved = self._member(key, load=True)
                if moved is None or moved == member:
                    raise
                member = moved
        raise NotFoundError(f"{key}: its pack kept moving while {self.url} was read")

    def _read_once(self, key: str, member: Member) -> bytes:
        """One ``pread`` on the pack's file, kept open for the first :data:`OPEN_PACKS` packs
        read (never closed while another thread may read it), else opened around the read."""
        if not hasattr(os, "pread"):  # Windows: no positioned read on a shared file
            return super()._read_member(key, member)
        path = os.path.join(self.loose.url, f"{PACK_PREFIX}{member.pack}.pack")
        try:
            fd = self._fds.get(member.pack)
            if fd is not None:
                data = pread(fd, member.length, member.offset)
            else:
                fd = os.open(path, READ_FLAGS)
                with self._fd_lock:
                    if member.pack not in self._fds and len(self._fds) < OPEN_PACKS:
                        self._fds[member.pack] = fd
                        fd = None  # kept
                try:
                    data = pread(self._fds[member.pack] if fd is None else fd, member.length, member.offset)
                finally:
                    if fd is not None:
                        os.close(fd)
        except FileNotFoundError:
            raise NotFoundError(f"{key}: its pack {member.pack[:12]}… is gone from {self.url}") from None
        except OSError as exc:
            raise StoreError(f"cannot read {key} from {path}: {exc.strerror or exc}") from exc
        if len(data) != member.length:
            raise StoreError(f"{key}: pack {member.pack[:12]}… is truncated")
        return data

    # -- the catalog -----------------------------------------------------------------------
    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self._dir)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_nlink)

    def _pack_files(self) -> list[ObjectInfo]:
        """One ``scandir`` of the packs folder, a ``stat`` per file (no walk, no pathlib)."""
        out = []
        try:
            with os.scandir(self._dir) as it:
                for e in it:
                    if not e.name.startswith("."):
                        with contextlib.suppress(OSError):  # removed since it was listed
                            st = e.stat()
                            out.append(ObjectInfo(PACK_PREFIX + e.name, st.st_size, st.st_mtime))
        except OSError:
            pass
        return out

    def _mark(self) -> bytes | None:
        try:
            with open(os.path.join(self._dir, MARK), "rb") as fh:
                return fh.read(64)
        except OSError:
            return None

    def _load(self) -> Catalog:
        stamp = self._stamp()
        if stamp is None:
            return Catalog()  # no packs folder: nothing packed (one stat)
        memo = _CATALOGS.get(self._dir)
        if memo is not None and memo[0] == stamp:
            return memo[1]
        for _ in range(LOAD_ATTEMPTS):
            # a merge replaces the mark after its new index is in place and before it removes
            # an old one: a listing that saw neither (the new index came after the folder was
            # read, the old one went before) saw the mark change
            mark = self._mark()
            cat = super()._load()
            if not cat.vanished and self._mark() == mark:
                break
            stamp = self._stamp() or stamp
        _CATALOGS[self._dir] = (stamp, cat)
        return cat

    def forget_catalog(self) -> None:
        """This process changed the packs (or found one gone): the next read lists them again."""
        _CATALOGS.pop(self._dir, None)
        self.refresh()

    @contextlib.contextmanager
    def guard(self, *, wait: bool = True) -> Iterator[bool]:
        """Pack rewrites one process at a time, on a fresh catalog; yields whether it holds the
        lock (``wait=False``: not when another process does, nor without flock)."""
        try:
            os.makedirs(self._dir, exist_ok=True)
            fd = os.open(os.path.join(self._dir, ".guard"), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot rewrite the cache's packs in {self._dir}: {exc.strerror or exc}") from exc
        try:
            held = exclusive = True
            try:
                import fcntl

                try:
                    fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    held = exclusive = False
            except ImportError:  # no flock (Windows): rewrites race, readers still verify
                held, exclusive = wait, False
            if held:
                self.forget_catalog()
            self._exclusive = exclusive
            yield held
        finally:
            self._exclusive = False
            os.close(fd)  # releases the flock
            self.forget_catalog()

    # -- rewriting -----------------------------------------------------------------------
    def flush(self) -> list[str]:
        """Rewrite the packs that lost members (a dropped member, gc), each on its own."""
        with self._lock:
            doomed = dict(self._doomed)
        if not doomed:
            return []
        with self.guard():  # on a fresh catalog: re-mark what is still packed, then rewrite
            with self._lock:
                self._doomed = {}
            for keys in doomed.values():
                for key in keys:
                    self.forget_member(key)
            with self._lock:
                doomed, self._doomed = self._doomed, {}
            cat = self.catalog()
            problems: list[str] = []
            for pack_id, gone in sorted(doomed.items()):
                if pack_id in cat.contents:
                    try:
                        # the others copied as they are: a reader checks each when it reads it
                        problems += self._rewrite(cat, [pack_id], drop=gone, check=False).problems
                    except StoreError as exc:
                        problems.append(f"{PACK_PREFIX}{pack_id}.pack: {exc}")
            return problems

    def drop_bad(self, key: str) -> bytes | None:
        """Check every packed copy of ``key`` and rewrite only the packs whose copy is bad
        without it; a good copy's bytes, or None."""
        with self.guard():
            cat = self.catalog()
            good: bytes | None = None
            bad: list[str] = []
            packs = _Sources(self._dir)
            try:
                for pid, members in sorted(cat.contents.items()):
                    if key in members:
                        data = packs.read(members[key])
                        if data is not None and _good(key, data):
                            good = data if good is None else good
                        else:
                            bad.append(pid)
            finally:
                packs.close()
            problems: list[str] = []
            for pid in bad:  # the pack's other members copied as they are
                problems += self._rewrite(cat, [pid], drop={key}, check=False).problems
            if problems:
                raise StoreError(f"cannot drop the corrupt cached {key}: {'; '.join(problems)}")
            return good

    def write_packed(self, items: list[tuple[str, bytes]]) -> None:
        for _keys, write in self.write_packs(items):
            write()
        self.forget_catalog()
        with contextlib.suppress(StoreError, OSError):  # the objects are in; merging can wait
            self.merge(wait=False)

    def pack_count(self) -> int:
        """Packs with an index now (one listing of the folder, no index read)."""
        try:
            with os.scandir(self._dir) as it:
                return sum(1 for e in it if e.name.endswith(".idx") and not e.name.startswith("."))
        except OSError:
            return 0

    def merge(self, *, wait: bool = True, at: int = MERGE_AT, dry_run: bool = False) -> MergeReport | None:
        """Merge the small packs when there are more than ``at`` (:func:`plan_merge`); None when
        nothing was (or, dry, would be) merged. ``wait=False``: skip while another process is."""
        if self.pack_count() <= at:
            return None
        with self.guard(wait=wait) as held:
            if not held:
                return None
            cat = self.catalog()
            spare = _redundant(cat)
            plan = plan_merge({pid: cat.packs[pid].size for pid in cat.contents if pid not in spare}, at=at)
            members = 0
            for i, pid in enumerate(plan):  # smallest first: cut where the members get too many
                members += len(cat.contents[pid])
                if members > MERGE_MAX_MEMBERS and i >= 2:
                    plan = plan[:i]
                    break
            if len(plan) < 2:
                plan = []
            plan += spare
            if not plan:
                return None
            if dry_run:
                return MergeReport(sources=plan, bytes=sum(cat.packs[p].size for p in plan))
            return self._rewrite(cat, plan)

    def _rewrite(self, cat: Catalog, sources: list[str], drop: set[str] | frozenset[str] = frozenset(), *,
                 check: bool = True) -> MergeReport:
        """Write one pack of the members of ``sources`` less ``drop`` (with ``check``, less bad
        ones and those another pack holds good), durably; then remove ``sources``. Under the guard."""
        rep = MergeReport(sources=list(sources), bytes=sum(cat.packs[p].size for p in sources))
        chosen = set(sources)
        elsewhere: dict[str, list[Member]] = {}
        for pid, members in cat.contents.items():
            if pid not in chosen:
                for key, m in members.items():
                    elsewhere.setdefault(key, []).append(m)
        copies: dict[str, list[Member]] = {}
        for pid in sources:
            for key, m in cat.contents[pid].items():
                if key not in drop:
                    copies.setdefault(key, []).append(m)
        packs = _Sources(self._dir)
        try:
            rep.pack = self._write_merged(copies, elsewhere if check and self._exclusive else {}, packs, rep,
                                          check=check)
        finally:
            packs.close()
        if rep.pack is not None and sources:  # the new pack is no younger than its youngest source
            newest = max(cat.packs[p].mtime or 0 for p in sources)
            with contextlib.suppress(OSError):
                os.utime(os.path.join(self._dir, f"{rep.pack}.pack"), (newest, newest))
        # the new pack is durable and the mark replaced: now the old ones go, index first
        for suffix in ("idx", "pack"):
            for pid in sources:
                if pid == rep.pack:
                    continue
                try:
                    self.loose.delete(f"{PACK_PREFIX}{pid}.{suffix}")
                except StoreError as exc:  # (Windows: open in another process) merged again later
                    rep.problems.append(f"{PACK_PREFIX}{pid}.{suffix}: {exc}")
        self.forget_catalog()
        return rep

    def _write_merged(self, copies: dict[str, list[Member]], elsewhere: dict[str, list[Member]],
                      packs: _Sources, rep: MergeReport, *, check: bool) -> str | None:
        try:
            fd, tmp = create_temp(os.path.join(self._dir, "merge.pack"))
        except OSError as exc:
            raise StoreError(f"cannot write a merged pack in {self._dir}: {exc.strerror or exc}") from exc
        keep = False
        try:
            hasher = hashlib.sha256(PACK_MAGIC)
            write_all(fd, PACK_MAGIC)
            offset = len(PACK_MAGIC)
            index: list[list[object]] = []
            for key in sorted(copies):
                if any(_good(key, packs.read(m)) for m in elsewhere.get(key, ())):
                    continue  # another pack holds it, good: one copy is enough (a killed merge's leftovers)
                data = next((d for d in (packs.read(m) for m in copies[key])
                             if d is not None and (not check or _good(key, d))), None)
                if data is None:
                    rep.dropped.append(key)  # every copy bad (or unreadable): gone, as a reader drops it
                    continue
                write_all(fd, data)
                hasher.update(data)
                index.append([key, offset, len(data)])
                offset += len(data)
            if not index:
                return None
            if hasattr(os, "fchmod"):
                os.fchmod(fd, 0o444)
            os.fsync(fd)
            keep = True
        except OSError as exc:
            raise StoreError(f"cannot write a merged pack in {self._dir}: {exc.strerror or exc}") from exc
        finally:
            os.close(fd)
            if not keep:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        pack_id = hasher.hexdigest()
        doc = canonical_json({"format": INDEX_FORMAT, "pack": pack_id, "pack_size": offset, "members": index})
        parse_index(doc, pack_id)  # what readers will check
        try:
            os.replace(tmp, os.path.join(self._dir, f"{pack_id}.pack"))
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise StoreError(f"cannot write a merged pack in {self._dir}: {exc.strerror or exc}") from exc
        fsync_dir(Path(self._dir))
        atomic_write(os.path.join(self._dir, f"{pack_id}.idx"), doc, mode=0o444, durable=True)  # the commit point
        atomic_write(os.path.join(self._dir, MARK), os.urandom(16).hex().encode(), durable=True)
        rep.members = len(index)
        return pack_id


def _redundant(cat: Catalog) -> list[str]:
    """Packs whose every member another pack holds (a merge killed before it removed its
    sources, two writers that packed the same objects): merged away too."""
    holders: dict[str, int] = {}
    for members in cat.contents.values():
        for key in members:
            holders[key] = holders.get(key, 0) + 1
    out = []
    for pid in sorted(cat.contents, key=lambda p: (cat.packs[p].size, p)):
        keys = cat.contents[pid]
        if keys and all(holders[k] > 1 for k in keys):
            out.append(pid)
            for k in keys:
                holders[k] -= 1
    return out


class _Sources:
    """The packs a rewrite reads, each opened when first read and closed at the end."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.fds: dict[str, int | None] = {}

    def read(self, m: Member) -> bytes | None:
        """The member's bytes; None when its pack is gone or shorter than its index says."""
        try:
            if m.pack not in self.fds:
                try:
                    self.fds[m.pack] = os.open(os.path.join(self.folder, f"{m.pack}.pack"), READ_FLAGS)
                except FileNotFoundError:
                    self.fds[m.pack] = None
            fd = self.fds[m.pack]
            if fd is None:
                return None
            data = pread(fd, m.length, m.offset)
        except OSError as exc:  # an unreadable disk: stop the rewrite, remove nothing
            raise StoreError(f"cannot read pack {m.pack[:12]}…: {exc.strerror or exc}") from exc
        return data if len(data) == m.length else None

    def close(self) -> None:
        for fd in self.fds.values():
            if fd is not None:
                os.close(fd)


def _good(key: str, data: bytes | None) -> bool:
    """Whether a member may be copied: an object inflates to bytes of its digest (bounded by
    the size its frame states); an envelope names its object and its signature verifies."""
    if data is None:
        return False
    parsed = parse_key(key)
    if parsed is None:
        return False
    if parsed.kind == "object":
        import zstandard

        from ..model.blob import frame_length, verify_frame

        try:
            size = zstandard.get_frame_parameters(data).content_size
            if size in (zstandard.CONTENTSIZE_UNKNOWN, zstandard.CONTENTSIZE_ERROR):
                return frame_length(data) == len(data) and _inflates_to(data, parsed.digest)
            verify_frame(data, parsed.digest, size)
        except (IntegrityError, ValueError, zstandard.ZstdError):
            return False
        return True
    from .signing import TrustedKeys, check_envelope

    error, _untrusted = check_envelope(data, parsed.digest, parsed.keyid or "", None, TrustedKeys())
    return error is None


def _inflates_to(frame: bytes, digest: str) -> bool:
    """A frame that does not state its content size (another encoder's): streamed, hashed."""
    import zstandard

    hasher = hashlib.sha256()
    total = 0
    with zstandard.ZstdDecompressor().stream_reader(frame, read_across_frames=False) as reader:
        while chunk := reader.read(1 << 20):
            hasher.update(chunk)
            total += len(chunk)
            if total > MAX_CONTENT_BYTES:
                return False
    return "sha256:" + hasher.hexdigest() == digest
