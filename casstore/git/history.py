"""casstore and git history: locks at revisions, a cassette's log, gc, and provenance.

Reads repositories through :class:`casstore.git.GitRepo` (dulwich) and never writes to
them. The one invariant of :func:`gc`: an object is deleted only if no lock reachable from
any ref (branches, tags, remote-tracking refs, stash, an in-progress merge), the staged
lock or the working lock pins it, and the store says it is older than the grace period.
An object whose age the store does not know counts as young.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
import subprocess
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CasstoreError, LockError, StoreError, UsageError
from ..model.lock import LOCK_FILE, Lock, Pin, parse_lock
from ..project import Project
from ..store.backends import LocalStore, Store, digest_from_key, object_key
from ..store.transfer import NullReporter, Reporter, run_parallel
from .repo import GitRepo

__all__ = [
    "parse_duration",
    "LockHistory",
    "lock_at",
    "log",
    "mark",
    "gc",
    "GcReport",
    "GcItem",
    "provenance",
]

_DIGEST_RE = re.compile(rb"sha256:[0-9a-f]{64}")
_DURATION_RE = re.compile(r"^(\d+)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
DEFAULT_GRACE = "24h"
TEMP_FILE_AGE = 3600  # seconds: a temp file this old belongs to no running write
# Heads of operations in progress (not refs, but live). ORIG_HEAD is not one: like a
# reflog entry it remembers a past state, and would keep a deleted branch alive forever.
_SPECIAL_HEADS = ("MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD")


def parse_duration(text: str) -> int:
    """``0``, ``90s``, ``30m``, ``24h``, ``7d``, ``2w`` -> seconds; else UsageError."""
    t = text.strip().lower()
    if t == "0":
        return 0
    m = _DURATION_RE.match(t)
    if not m:
        raise UsageError(f"invalid duration {text!r}: use 0, 90s, 30m, 24h, 7d or 2w")
    return int(m.group(1)) * _UNITS[m.group(2)]


# -- the lock across history ---------------------------------------------------------------
def lock_rel(project: Project, repo: GitRepo) -> bytes:
    try:
        rel = project.lock_path.resolve().relative_to(repo.root.resolve())
    except ValueError:
        raise UsageError(f"{project.root} is not inside the git repository {repo.root}") from None
    return rel.as_posix().encode()


class LockHistory:
    """The lock file's blob in each commit, each distinct blob read and parsed once."""

    def __init__(self, repo: GitRepo, rel: bytes) -> None:
        self.git = repo
        self.store: Any = repo.repo.object_store  # dulwich's ObjectID types are stricter than bytes
        self.rel = rel
        self.parts = rel.split(b"/")
        self._tree_blob: dict[bytes, bytes | None] = {}
        self._digests: dict[bytes, frozenset[str]] = {}
        self._locks: dict[bytes, Lock | None] = {}
        self.missing: list[str] = []  # commits referenced but absent (shallow clone, broken repo)

    def blob_of_tree(self, tree: bytes) -> bytes | None:
        if tree in self._tree_blob:
            return self._tree_blob[tree]
        sha: bytes | None = tree
        for part in self.parts:
            try:
                obj = self.store[sha]
                _mode, sha = obj[part]
            except KeyError:
                sha = None
                break
        self._tree_blob[tree] = sha
        return sha

    def digests(self, blob: bytes) -> frozenset[str]:
        """Every digest a lock blob mentions. Over-marking is safe; under-marking is not,
        so an escaped string (TOML allows ``\\u`` escapes) falls back to a full parse."""
        got = self._digests.get(blob)
        if got is None:
            data = self.store.get_raw(blob)[1]  # raw bytes: no object parsing
            found = {m.decode() for m in _DIGEST_RE.findall(data)}
            if b"\\" in data:
                try:
                    found |= parse_lock(data).digests()
                except LockError:
                    pass
            got = self._digests[blob] = frozenset(found)
        return got

    def lock(self, blob: bytes | None) -> Lock | None:
        """The parsed lock of a blob (empty Lock when absent, None when it does not parse)."""
        if blob is None:
            return Lock()
        if blob not in self._locks:
            try:
                self._locks[blob] = parse_lock(self.store[blob].data)
            except LockError:
                self._locks[blob] = None
        return self._locks[blob]

    def reachable(self, tips: Iterable[bytes]) -> Iterator[Any]:
        """Every commit reachable from ``tips``, each once (no ordering)."""
        shallow = set(self.git.repo.get_shallow())
        seen: set[bytes] = set()
        stack = list(tips)
        while stack:
            sha = stack.pop()
            if sha in seen:
                continue
            seen.add(sha)
            try:
                commit = self.store[sha]
            except KeyError:
                self.missing.append(sha.decode())
                continue
            yield commit
            if sha in shallow:
                self.missing.append(f"parents of {sha.decode()[:12]} (shallow clone)")
                continue
            stack.extend(commit.parents)


def lock_at(project: Project, rev: str | None) -> Lock:
    """The lock at ``rev`` (None: the working file). A missing file is an empty lock."""
    if rev is None:
        return project.load_lock()
    repo = GitRepo(project.root)
    data = repo.read_at(repo.resolve(rev), project.lock_path)
    if data is None:
        return Lock()
    try:
        return parse_lock(data)
    except LockError as exc:
        raise LockError(f"{LOCK_FILE} at {rev}: {exc}") from None


# -- log -------------------------------------------------------------------------------------
def _pin_key(pin: Pin | None) -> tuple[str, frozenset[str]] | None:
    return None if pin is None else (pin.digest, frozenset(s.keyid for s in pin.signatures))


def _iso(seconds: int, offset: int) -> str:
    tz = _dt.timezone(_dt.timedelta(seconds=offset))
    return _dt.datetime.fromtimestamp(seconds, tz).isoformat()


def log(project: Project, name: str, rev: str = "HEAD") -> list[dict[str, Any]]:
    """Commits reachable from ``rev`` that changed the pin of ``name``, newest first."""
    repo = GitRepo(project.root)
    tip = repo.resolve(rev)
    hist = LockHistory(repo, lock_rel(project, repo))
    _unknown = object()

    def pin_in(commit: Any) -> Any:
        lock = hist.lock(hist.blob_of_tree(commit.tree))
        return _unknown if lock is None else lock.pins.get(name)

    rows: list[dict[str, Any]] = []
    from dulwich.walk import ORDER_TOPO

    walker: Any = repo.repo.get_walker
    for entry in walker(include=[tip], order=ORDER_TOPO):  # children before parents
        c = entry.commit
        blob = hist.blob_of_tree(c.tree)
        parents = []
        for p in c.parents:
            try:
                parents.append(hist.store[p])
            except KeyError:
                continue
        if any(hist.blob_of_tree(p.tree) == blob for p in parents):
            continue  # the lock did not change in this commit
        pin = pin_in(c)
        if pin is _unknown:
            continue
        before = [x for x in (pin_in(p) for p in parents) if x is not _unknown] if parents else [None]
        if any(_pin_key(x) == _pin_key(pin) for x in before) or (pin is None and not before):
            continue
        prev = before[0] if before else None
        if pin is None:
            action = "removed"
        elif prev is None:
            action = "pinned"
        elif prev.digest == pin.digest:
            action = "re-signed"
        else:
            action = "re-pinned"
        shown = pin if pin is not None else prev
        rows.append({
            "commit": c.id.decode(),
            "date": _iso(c.commit_time, c.commit_timezone),
            "author": c.author.decode("utf-8", "replace"),
            "subject": c.message.decode("utf-8", "replace").strip().splitlines()[0] if c.message.strip() else "",
            "action": action,
            "digest": shown.digest if shown else None,
            "size": shown.size if shown else None,
            "entries": shown.entries if shown else None,
            "signers": sorted({s.signer for s in shown.signatures}) if shown else [],
        })
    return rows


# -- gc --------------------------------------------------------------------------------------
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
    from dulwich.index import Index

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
    """Commits every ref points at (tags peeled), and refs that point at missing objects."""
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
    return tips, broken


def _text_digests(data: bytes, what: str) -> set[str]:
    found = {m.decode() for m in _DIGEST_RE.findall(data)}
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
    dangling_signatures: int = 0
    notes: list[str] = field(default_factory=list)
    stray_packs: int = 0  # packs without an index (an interrupted push), removed
    temp_files: int = 0  # temp files of killed writes in the cache (and a local-folder store)
    temp_bytes: int = 0

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
        parts = inf.key.split("/")
        if len(parts) == 5 and parts[1] == "sha256":
            d = digest_from_key(f"objects/sha256/{parts[2]}/{parts[3]}")
            if d is not None:
                sigs.setdefault(d, []).append(inf.key)
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
        victims = []
        for d, inf in sorted(store_objects.items()):
            if d in marks.digests:
                continue
            if not old(inf):
                rep.kept_young += 1
                continue
            victims.append(GcItem("store", d, inf.size, now - inf.mtime))
        _sweep(project.store, "store", victims, store_sigs, dry_run=dry_run, jobs=jobs, reporter=reporter)
        rep.deleted += victims
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
    # temp files of writes killed mid-way: older than an hour (or the grace, if shorter)
    # no writer is still behind them
    local = [project.cache.store]
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


# -- provenance ------------------------------------------------------------------------------
def _status_paths(git_root: Path) -> list[str] | None:
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain=v1", "-z", "--untracked-files=no", "--ignore-submodules=dirty"],
            cwd=git_root, capture_output=True, timeout=30, check=False,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    paths = []
    fields = out.stdout.split(b"\0")
    i = 0
    while i < len(fields):
        f = fields[i]
        i += 1
        if len(f) < 4:
            continue
        paths.append(f[3:].decode("utf-8", "surrogateescape"))
        if f[:1] in (b"R", b"C"):
            i += 1  # the rename source follows
    return paths


def provenance(root: Path | str, *, ignore: Iterable[str] | None = None) -> dict[str, Any]:
    """Where a recording comes from: ``{"commit", "branch", "dirty"}``.

    ``commit`` is HEAD's sha (None before the first commit), ``branch`` the checked-out
    branch (None when detached), ``dirty`` whether tracked files differ from HEAD, not
    counting ``casstore.lock`` and the cassette dir (recording outputs, not inputs) nor the
    paths in ``ignore`` (relative to the git root). Outside git every value is None.
    """
    try:
        repo = GitRepo(root)
    except CasstoreError:
        return {"commit": None, "branch": None, "dirty": None}
    head = repo.head()
    skip: list[str] = list(ignore or [])
    try:
        project = Project.discover(root)
        for p in (project.lock_path, project.cassette_dir):
            skip.append(p.resolve().relative_to(repo.root.resolve()).as_posix())
    except (CasstoreError, ValueError, OSError):
        skip.append(LOCK_FILE)
    paths = _status_paths(repo.root)
    dirty = None if paths is None else any(
        not any(p == s or p.startswith(s.rstrip("/") + "/") for s in skip) for p in paths
    )
    return {"commit": head.decode() if head else None, "branch": repo.branch(), "dirty": dirty}
