"""gc: delete the objects no git history pins, from the cache and (``--remote``) the store.

The one invariant: an object is deleted only if no lock reachable from any ref (branches,
tags, remote-tracking refs, every stash entry, an in-progress merge), the staged lock or the working
lock pins it, and the store says it is older than the grace period. An object whose age the
store does not know counts as young. Reads repositories through
:class:`casstore.git.repo.GitRepo` (dulwich) and never writes to them.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dulwich.index import Index

from ..errors import CasstoreError, LockError, StoreError, UsageError
from ..model.lock import parse_lock
from ..project import Project
from ..store import liveness
from ..store.backends import LocalStore, Store, digest_from_key, object_key, parse_key
from ..store.transfer import NullReporter, Reporter, run_parallel
from .history import DIGEST_RE, LockHistory, lock_rel, parse_duration
from .repo import GitRepo

__all__ = ["DEFAULT_GRACE", "mark", "Marks", "gc", "GcReport", "GcItem"]

DEFAULT_GRACE = "24h"
TEMP_FILE_AGE = 3600  # seconds: a temp file this old belongs to no running write
# Heads of operations in progress (not refs, but live). ORIG_HEAD is not one: like a
# reflog entry it remembers a past state, and would keep a deleted branch alive forever.
_SPECIAL_HEADS = ("MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD")


@dataclass
class Marks:
    digests: set[str] = field(default_factory=set)
    commits: int = 0
    lock_versions: int = 0
    refs: int = 0


def _special_heads(admin: Path) -> list[bytes]:
    """Commits named by a worktree's HEAD when detached, and by operations in progress."""
    out: list[bytes] = []
    for name in ("HEAD", *_SPECIAL_HEADS):
        try:
            text = (admin / name).read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        out.extend(m.encode() for m in re.findall(r"\b[0-9a-f]{40}\b", text))
    return out


def _index_blobs(index_path: Path, rel: bytes) -> list[bytes]:
    """The lock's blob(s) in an index: one, or up to three while a merge is conflicted."""
    if not index_path.exists():
        return []
    try:
        entry = Index(str(index_path))[rel]
    except KeyError:
        return []
    except Exception as exc:  # a corrupt index: refuse rather than under-mark
        raise UsageError(f"cannot read the git index {index_path}: {exc}") from None
    sha = getattr(entry, "sha", None)
    if sha is not None:
        return [sha]
    return [e.sha for e in (getattr(entry, k, None) for k in ("ancestor", "this", "other")) if e is not None]


def _worktrees(repo: GitRepo) -> list[tuple[Path | None, Path]]:
    """(checkout root or None, admin dir) of the main worktree and every linked one."""
    common = Path(repo.repo.commondir())
    out: list[tuple[Path | None, Path]] = [(common.parent if common.name == ".git" else None, common)]
    linked = common / "worktrees"
    if linked.is_dir():
        for admin in sorted(linked.iterdir()):
            try:
                gitfile = Path((admin / "gitdir").read_text(encoding="utf-8").strip())
            except OSError:
                gitfile = None
            out.append((gitfile.parent if gitfile is not None else None, admin))
    return out


def _tips(repo: GitRepo) -> tuple[list[bytes], list[str]]:
    """Commits every ref and stash entry points at (tags peeled), and refs that point at
    missing objects."""
    r: Any = repo.repo
    tips: list[bytes] = []
    broken: list[str] = []
    for name, sha in r.get_refs().items():
        try:
            obj = r[sha]
            while obj.type_name == b"tag":
                obj = r[obj.object[1]]
        except KeyError:
            broken.append(name.decode("utf-8", "replace"))
            continue
        if obj.type_name == b"commit":
            tips.append(obj.id)
    tips += [sha for sha in repo.stash_entries() if sha in r]  # stash@{1}...: reflog only
    return tips, broken


def _text_digests(data: bytes, what: str) -> set[str]:
    found = {m.decode() for m in DIGEST_RE.findall(data)}
    if b"\\" in data:
        try:
            found |= parse_lock(data).digests()
        except LockError as exc:
            raise UsageError(f"{what} does not parse, so gc cannot tell what it pins: {exc}") from None
    return found


def mark(project: Project) -> Marks:
    """Every digest pinned by the lock in any commit any ref reaches, and in every worktree's
    HEAD, index (all stages) and working file."""
    repo = GitRepo(project.root)
    rel = lock_rel(project, repo)
    hist = LockHistory(repo, rel)
    tips, broken = _tips(repo)
    if broken:
        raise UsageError(f"ref(s) {', '.join(broken)} point at missing objects; gc needs a sound repository "
                         "(`git fsck`)")
    worktrees = _worktrees(repo)
    for _root, admin in worktrees:
        tips += _special_heads(admin)
    marks = Marks(refs=len(tips))
    blobs: set[bytes] = set()
    for commit in hist.reachable(tips):
        marks.commits += 1
        blob = hist.blob_of_tree(commit.tree)
        if blob is not None:
            blobs.add(blob)
    if hist.missing:
        raise UsageError(
            f"git history is incomplete ({len(hist.missing)} commit(s) missing, e.g. {hist.missing[0]}); "
            "gc needs all of it to know what is pinned — run `git fetch --unshallow` first"
        )
    marks.lock_versions = len(blobs)
    for _root, admin in worktrees:
        blobs.update(_index_blobs(admin / "index", rel))
    for blob in blobs:
        marks.digests |= hist.digests(blob)
    paths = {project.lock_path} | {root / rel.decode() for root, _admin in worktrees if root is not None}
    for path in paths:
        try:
            marks.digests |= _text_digests(path.read_bytes(), str(path))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    return marks


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


def _inventory(store: Store) -> tuple[dict[str, Any], dict[str, list[str]]]:
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


def _sweep(store: Store, where: str, victims: list[GcItem], sigs: dict[str, list[str]], *,
           dry_run: bool, jobs: int, reporter: Reporter) -> None:
    for item in victims:
        item.signatures = len(sigs.get(item.digest, []))
    if dry_run or not victims:
        return

    def delete(item: GcItem) -> None:
        store.delete(object_key(item.digest))  # the object first: envelopes alone are swept later
        for key in sigs.get(item.digest, []):
            store.delete(key)

    for item, _res, err in run_parallel(victims, delete, jobs=jobs, reporter=reporter, label=f"gc {where}",
                                        describe=lambda it, r, e: f"{'FAILED ' if e else ''}{it.digest}"):
        if err is not None:
            item.error = str(err) if isinstance(err, CasstoreError) else f"{type(err).__name__}: {err}"
    flush = getattr(store, "flush", None)
    if flush is not None:  # packs that lost members are rewritten without them
        problems = flush()
        if problems:
            for item in victims:  # their bytes are still in a pack we could not rewrite
                item.error = item.error or "; ".join(problems)


def gc(project: Project, *, grace: str | int = DEFAULT_GRACE, remote: bool = False, dry_run: bool = False,
       jobs: int | None = None, now: float | None = None, reporter: Reporter | None = None) -> GcReport:
    """Delete objects no ref pins and older than ``grace`` from the cache (and the store)."""
    grace_s = grace if isinstance(grace, int) else parse_duration(grace)
    now = time.time() if now is None else now
    cutoff = now - grace_s
    reporter = reporter or NullReporter()
    jobs = jobs or project.config.jobs
    marks = mark(project)
    rep = GcReport(dry_run=dry_run, grace_seconds=grace_s, remote=project.remote_url if remote else None,
                   live=len(marks.digests), commits=marks.commits, lock_versions=marks.lock_versions)

    def old(inf: Any) -> bool:
        return inf.mtime is not None and inf.mtime <= cutoff

    try:
        store_objects, store_sigs = _inventory(project.store)
    except StoreError as exc:
        if remote:
            raise
        store_objects, store_sigs = None, {}
        rep.notes.append(f"store unreachable ({exc}); the cache was left alone")

    if remote and store_objects is not None:
        # objects a push found present and re-pinned lately (liveness markers) stay
        markers = liveness.read_markers(project.store, cutoff)
        rep.notes += [f"ignored marker {p}" for p in markers.problems]
        refreshed = markers.digests
        victims = []
        for d, inf in sorted(store_objects.items()):
            if d in marks.digests:
                continue
            if d in refreshed:
                rep.kept_refreshed += 1
                continue
            if not old(inf):
                rep.kept_young += 1
                continue
            victims.append(GcItem("store", d, inf.size, now - inf.mtime, signatures=len(store_sigs.get(d, []))))
        if victims and not dry_run:
            swept = liveness.sweep(project.store, {i.digest: [object_key(i.digest), *store_sigs.get(i.digest, [])]
                                                   for i in victims},
                                   {i.digest: i.bytes for i in victims}, cutoff=cutoff, jobs=jobs,
                                   seen=set(markers.fresh) | {m.key for m in markers.expired})
            for item in victims:
                item.error = swept.errors.get(item.digest)
            rep.kept_refreshed += len(swept.restored)
            victims = [i for i in victims if i.digest not in swept.restored]
        rep.deleted += victims
        for inf in markers.expired:  # they protect nothing any more
            rep.markers_deleted += 1
            if not dry_run:
                project.store.delete(inf.key)
        stray_packs = getattr(project.store, "stray_packs", None)
        for inf in stray_packs() if stray_packs is not None else []:  # left by an interrupted push
            if old(inf):
                rep.stray_packs += 1
                if not dry_run:
                    project.store.delete(inf.key)
        for d, keys in sorted(store_sigs.items()):  # envelopes left by an interrupted gc
            if d not in marks.digests and d not in store_objects:
                infos = [project.store.info(k) for k in keys]
                if all(i is not None and old(i) for i in infos):
                    rep.dangling_signatures += len(keys)
                    if not dry_run:
                        for k in keys:
                            project.store.delete(k)

    if store_objects is not None:
        cache = project.cache.store
        cache_objects, cache_sigs = _inventory(cache)
        victims = []
        for d, inf in sorted(cache_objects.items()):
            if d in marks.digests:
                continue
            if d not in store_objects:
                rep.kept_unpushed += 1  # the cache is shared: this may be another repo's only copy
                continue
            if not old(inf):
                rep.kept_young += 1
                continue
            victims.append(GcItem("cache", d, inf.size, now - inf.mtime))
        _sweep(cache, "cache", victims, cache_sigs, dry_run=dry_run, jobs=1, reporter=NullReporter())
        rep.deleted += victims
    # the cache's small packs merged (geometrically: each pack kept at least twice the size
    # of all smaller ones together); a member that fails verification is not copied
    merged = project.cache.store.merge(at=1, dry_run=dry_run)
    if merged is not None:
        rep.packs_merged, rep.packs_merged_bytes = len(merged.sources), merged.bytes
        rep.notes += [f"cache pack member {key} failed verification: dropped" for key in merged.dropped]
        rep.notes += [f"merged, not yet removed: {p}" for p in merged.problems]
    # temp files of writes killed mid-way: older than an hour (or the grace, if shorter)
    # no writer is still behind them
    # a pack whose add, pull or merge was killed before its index; an hour old whatever the
    # grace: a younger one may be a running write's, between its pack and its index (gone, the
    # write's index would name a pack no one has, and its pins objects no cache holds)
    for inf in project.cache.store.stray_packs():
        if inf.mtime is not None and inf.mtime <= now - TEMP_FILE_AGE:
            rep.temp_files += 1
            rep.temp_bytes += inf.size
            if not dry_run:
                project.cache.loose.delete(inf.key)
    local = [project.cache.loose]
    inner = getattr(project.store, "inner", project.store)
    if remote and isinstance(inner, LocalStore):
        local.append(inner)
    for st in local:
        for path, size in st.stale_temp_files(max(cutoff, now - TEMP_FILE_AGE)):
            rep.temp_files += 1
            rep.temp_bytes += size
            if not dry_run:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
    return rep
