"""gc: delete from the cache and (``--remote``) the store the objects no lock of any ref, the index
or the work tree pins, older than the grace period (an unknown age counts as young)."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

from ..errors import StoreError
from ..git.history import parse_duration
from ..git.pinned import Marks, mark
from ..project import Project
from ..store import liveness
from ..store.backends import ObjectInfo, Store, digest_from_key, object_key, parse_key
from ..store.transfer import NullReporter, Reporter, run_parallel
from .results import error_text

__all__ = ["DEFAULT_GRACE", "gc", "GcReport", "GcItem"]

DEFAULT_GRACE = "24h"
TEMP_FILE_AGE = 3600  # seconds: a temp file this old belongs to no running write


@dataclass
class GcItem:
    where: str  # "cache" | "store"
    digest: str
    bytes: int
    age_seconds: float
    signatures: int = 0  # envelopes deleted with it
    error: str | None = None


@dataclass
class GcReport:
    dry_run: bool
    grace_seconds: int
    remote: str | None
    live: int = 0
    commits: int = 0
    lock_versions: int = 0
    deleted: list[GcItem] = field(default_factory=list)
    kept_young: int = 0
    kept_unpushed: int = 0  # cache-only objects: maybe another repository's unpushed recording
    kept_refreshed: int = 0  # unpinned here, but a push re-pinned them within the grace period
    markers_deleted: int = 0  # liveness markers older than the grace period
    dangling_signatures: int = 0
    notes: list[str] = field(default_factory=list)
    stray_packs: int = 0  # packs without an index (an interrupted push), removed
    temp_files: int = 0  # temp files of killed writes in the cache (and a local-folder store)
    temp_bytes: int = 0
    packs_merged: int = 0  # small packs of the cache merged into one (see store/cache_packs.py)
    packs_merged_bytes: int = 0

    @property
    def total_bytes(self) -> int:
        return sum(i.bytes for i in self.deleted if i.error is None)

    @property
    def problems(self) -> list[str]:
        return [f"{i.where} {i.digest}: {i.error}" for i in self.deleted if i.error]


def _inventory(store: Store) -> tuple[dict[str, ObjectInfo], dict[str, list[str]]]:
    """(digest -> ObjectInfo of its object, digest -> keys of its signature envelopes)."""
    objects = {}
    for inf in store.list("objects/"):
        d = digest_from_key(inf.key)
        if d is not None:
            objects[d] = inf
    sigs: dict[str, list[str]] = {}
    for inf in store.list("signatures/"):
        parsed = parse_key(inf.key)
        if parsed is not None and parsed.kind == "signature":
            sigs.setdefault(parsed.digest, []).append(inf.key)
    return objects, sigs


@dataclass
class _Run:
    project: Project
    rep: GcReport
    marks: Marks
    now: float
    cutoff: float
    dry_run: bool
    jobs: int

    def old(self, inf: ObjectInfo) -> bool:
        return inf.mtime is not None and inf.mtime <= self.cutoff

    def victims(self, where: str, objects: dict[str, ObjectInfo], sigs: dict[str, list[str]],
                spared: set[str]) -> list[GcItem]:
        """The unpinned old objects of ``objects``, less ``spared`` (the store: re-pinned by a
        push lately; the cache: not in the store, maybe another repository's only copy)."""
        out = []
        for d, inf in sorted(objects.items()):
            if d in self.marks.digests:
                continue
            if d in spared:
                if where == "store":
                    self.rep.kept_refreshed += 1
                else:
                    self.rep.kept_unpushed += 1
            elif not self.old(inf):
                self.rep.kept_young += 1
            else:
                out.append(GcItem(where, d, inf.size, self.now - (inf.mtime or 0), signatures=len(sigs.get(d, []))))
        return out

    def delete(self, store: Store, key: str) -> None:
        if not self.dry_run:
            store.delete(key)


def gc(project: Project, *, grace: str = DEFAULT_GRACE, remote: bool = False, dry_run: bool = False,
       jobs: int | None = None, reporter: Reporter | None = None) -> GcReport:
    """Delete objects no ref pins and older than ``grace`` from the cache (and the store)."""
    grace_s = parse_duration(grace)
    now = time.time()
    marks = mark(project)
    rep = GcReport(dry_run=dry_run, grace_seconds=grace_s, remote=project.remote_url if remote else None,
                   live=len(marks.digests), commits=marks.commits, lock_versions=marks.lock_versions)
    run = _Run(project, rep, marks, now, now - grace_s, dry_run, jobs or project.config.jobs)
    try:
        store_objects, store_sigs = _inventory(project.store)
    except StoreError as exc:
        if remote:
            raise
        rep.notes.append(f"store unreachable ({exc}); the cache was left alone")
    else:
        if remote:
            _sweep_store(run, store_objects, store_sigs)
            _sweep_stray_packs(run)
            _sweep_dangling_signatures(run, store_objects, store_sigs)
        _sweep_cache(run, store_objects)
    _merge_cache_packs(run)
    _sweep_temp_files(run, remote)
    return rep


def _sweep_store(run: _Run, objects: dict[str, ObjectInfo], sigs: dict[str, list[str]]) -> None:
    """Unpinned old objects of the store, with their envelopes; objects a push found present
    and re-pinned lately (its liveness markers) stay, and so do those it re-pins meanwhile."""
    store, rep = run.project.store, run.rep
    markers = liveness.read_markers(store, run.cutoff)
    rep.notes += [f"ignored marker {p}" for p in markers.problems]
    victims = run.victims("store", objects, sigs, markers.digests)
    if victims and not run.dry_run:
        swept = liveness.sweep(store, {i.digest: [object_key(i.digest), *sigs.get(i.digest, [])] for i in victims},
                               {i.digest: i.bytes for i in victims}, cutoff=run.cutoff, jobs=run.jobs,
                               seen=set(markers.fresh) | {m.key for m in markers.expired})
        for item in victims:
            item.error = swept.errors.get(item.digest)
        rep.kept_refreshed += len(swept.restored)
        victims = [i for i in victims if i.digest not in swept.restored]
    rep.deleted += victims
    for inf in markers.expired:  # they protect nothing any more
        rep.markers_deleted += 1
        run.delete(store, inf.key)


def _sweep_stray_packs(run: _Run) -> None:
    """Packs without an index, left by an interrupted push."""
    for inf in run.project.store.stray_packs():
        if run.old(inf):
            run.rep.stray_packs += 1
            run.delete(run.project.store, inf.key)


def _sweep_dangling_signatures(run: _Run, objects: dict[str, ObjectInfo], sigs: dict[str, list[str]]) -> None:
    """Envelopes whose object is gone, left by an interrupted gc."""
    store = run.project.store
    for d, keys in sorted(sigs.items()):
        if d not in run.marks.digests and d not in objects:
            infos = [store.info(k) for k in keys]
            if all(i is not None and run.old(i) for i in infos):
                run.rep.dangling_signatures += len(keys)
                for k in keys:
                    run.delete(store, k)


def _sweep_cache(run: _Run, store_objects: dict[str, ObjectInfo]) -> None:
    """Unpinned old objects of the cache that the store holds too: the cache is shared, so an
    object only it holds may be another repository's only copy."""
    cache, rep = run.project.cache.store, run.rep
    objects, sigs = _inventory(cache)
    victims = run.victims("cache", objects, sigs, {d for d in objects if d not in store_objects})
    rep.deleted += victims
    if run.dry_run or not victims:
        return

    def delete(item: GcItem) -> None:
        cache.delete(object_key(item.digest))  # the object first: envelopes alone are swept later
        for key in sigs.get(item.digest, []):
            cache.delete(key)

    for item, _res, err in run_parallel(victims, delete, jobs=1, reporter=NullReporter(), label="gc cache",
                                        describe=lambda it, r, e: f"{'FAILED ' if e else ''}{it.digest}"):
        if err is not None:
            item.error = error_text(err)
    problems = cache.flush()  # packs that lost members are rewritten without them
    if problems:
        for item in victims:  # their bytes are still in a pack we could not rewrite
            item.error = item.error or "; ".join(problems)


def _merge_cache_packs(run: _Run) -> None:
    """The cache's small packs merged (geometrically: each pack kept at least twice the size
    of all smaller ones together); a member that fails verification is not copied."""
    merged = run.project.cache.store.merge(at=1, dry_run=run.dry_run)
    if merged is not None:
        run.rep.packs_merged, run.rep.packs_merged_bytes = len(merged.sources), merged.bytes
        run.rep.notes += [f"cache pack member {key} failed verification: dropped" for key in merged.dropped]
        run.rep.notes += [f"merged, not yet removed: {p}" for p in merged.problems]


def _sweep_temp_files(run: _Run, remote: bool) -> None:
    """Temp files of killed writes older than an hour (or the grace, if shorter), in the cache
    (and a local-folder store); a cache pack without an index waits an hour whatever the grace."""
    rep, cache = run.rep, run.project.cache
    for inf in cache.store.stray_packs():
        if inf.mtime is not None and inf.mtime <= run.now - TEMP_FILE_AGE:
            rep.temp_files += 1
            rep.temp_bytes += inf.size
            run.delete(cache.loose, inf.key)
    for store in [cache.loose, run.project.store] if remote else [cache.loose]:
        for path, size in store.stale_temp_files(max(run.cutoff, run.now - TEMP_FILE_AGE)):
            rep.temp_files += 1
            rep.temp_bytes += size
            if not run.dry_run:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
