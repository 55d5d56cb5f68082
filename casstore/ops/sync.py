"""``casstore push`` and ``pull``: objects and signature envelopes between the local cache
and the store."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import CasstoreError, IntegrityError, NotFoundError, RemoteError
from ..git.trust import Policy, policy
from ..model.blob import max_frame_size, verify_frame
from ..model.lock import Pin
from ..project import Project, who_pushes
from ..store import signing
from ..store.backends import Store, is_local_url, object_key, signature_key
from ..store.cache import CacheWriter
from ..store.local import LocalStore
from ..store.packs import FEW_KEYS, PackedStore, ReadTask, plan_reads
from ..store.remote import check_url
from ..store.transfer import NullReporter, Reporter, run_parallel
from .parallel import map_threads
from .repair import corrupt_present, repair
from .results import Problem, TransferReport, select, short

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["push", "push_pins", "pull"]


def _envelopes(pin: Pin, trusted: signing.TrustedKeys, project: Project) -> dict[str, bytes]:
    """Envelopes for ``pin``'s signatures: rebuilt from the lock for a trusted key (the bytes add
    made), else from the cache (add keeps those of untrusted keys), else from the user's key."""
    ids = trusted.by_id()
    out = {s.keyid: signing.make_envelope(pin, ids[s.keyid], s) for s in pin.signatures if s.keyid in ids}
    if len(out) < len(pin.signatures):
        cached = project.cache.signatures(pin.digest)
        out.update({s.keyid: cached[s.keyid] for s in pin.signatures if s.keyid not in out and s.keyid in cached})
    if len(out) < len(pin.signatures):
        own = signing.load_signing_key(required=False)
        out.update({s.keyid: signing.make_envelope(pin, own, s) for s in pin.signatures
                    if own is not None and s.keyid not in out and s.keyid == own.keyid})
    return out


# what a pull may read ahead while the signatures are checked (it holds the bytes until used)
EARLY_BYTES = 16 * 2**20


def _open_store_meanwhile(project: Project, *, read: dict[str, int] | None = None,
                          into: dict[tuple[str, ...], dict[str, bytes | BaseException]] | None = None,
                          then: Callable[[str, bytes], None] = lambda key, data: None,
                          ) -> Callable[[], None] | None:
    """Open ``project.store`` meanwhile (None for a local folder); with ``read`` (key -> bound) on
    a packed store, also read its catalog and the first spans (up to EARLY_BYTES) into ``into``,
    each key's bytes passed to ``then``. Errors are left to the step that needs the store."""
    if is_local_url(project.remote_location):
        return None

    def run() -> None:
        with contextlib.suppress(CasstoreError):
            store = project.store
            if not read or into is None or not isinstance(store, PackedStore) or not store.preload():
                return
            budget = EARLY_BYTES
            for task in plan_reads(store, read, read):
                if not 0 < task.bytes <= budget:
                    break
                budget -= task.bytes
                got = task.run()
                if not any(isinstance(v, BaseException) for v in got.values()):
                    into[tuple(task.keys)] = got
                    for key, data in got.items():
                        then(key, data)  # type: ignore[arg-type]
    return run


def push(project: Project, names: Sequence[str] = (), *, jobs: int | None = None,
         reporter: Reporter | None = None) -> TransferReport:
    return push_pins(project, select(project.load_lock(required=True), names), jobs=jobs, reporter=reporter)


def push_pins(project: Project, pins: Sequence[Pin], *, jobs: int | None = None,
              reporter: Reporter | None = None) -> TransferReport:
    """Upload ``pins``' objects and envelopes the store lacks (one listing); those present get a
    liveness marker, and are replaced with the verified local copy when corrupt."""
    from ..store.liveness import write_marker

    reporter = reporter or NullReporter()
    jobs = jobs or project.config.jobs
    trusted = project.trusted_keys()
    required = project.signatures_required(trusted)
    report = TransferReport()
    uploads: list[tuple[Pin, str, bytes]] = []
    cache = project.cache

    def check(pin: Pin) -> bytes | CasstoreError:
        try:
            if required:
                signing.verify_pin(pin, trusted, required=True)
            frame = cache.read_frame(pin.digest, pin.size)
            verify_frame(frame, pin.digest, pin.size)
            return frame
        except NotFoundError:
            return NotFoundError(f"{pin.name}: {short(pin.digest)} is not in the local cache; `casstore add` it first")
        except CasstoreError as exc:
            return exc

    cache.load()  # the cache's packs, read once before the threads share them
    # the checks on threads, while one more opens the store (importing the S3 client takes longer)
    checked = map_threads(check, pins, jobs, meanwhile=_open_store_meanwhile(project))
    for pin, frame in zip(pins, checked, strict=True):
        if isinstance(frame, CasstoreError):
            report.problems.append(Problem(pin.name, pin.digest, str(frame)))
            continue
        uploads.append((pin, object_key(pin.digest), frame))
        for keyid, env in _envelopes(pin, trusted, project).items():
            uploads.append((pin, signature_key(pin.digest, keyid), env))
    store = project.store
    marker_error: CasstoreError | None = None
    try:
        existing = store.stat_many([k for _, k, _ in uploads])
        present = {k: (p, d) for p, k, d in uploads if k.startswith("objects/") and k in existing}
        if present:
            # this push relies on objects someone else uploaded: say so with a marker, then
            # look again (a gc may have deleted them meanwhile; then they are uploaded below)
            try:
                write_marker(store, {p.digest for p, _ in present.values()})
            except RemoteError:
                raise
            except CasstoreError as exc:  # a warning below, for the objects that rely on it
                marker_error = exc
            if isinstance(store, PackedStore):
                store.refresh()
            again = _still_there(store, present)
            for key in set(present) - again:
                del present[key], existing[key]
    except RemoteError:
        raise  # the remote's configuration: one line, exit 2
    except CasstoreError as exc:
        report.problems.append(Problem("*", "", f"cannot list {project.remote_url}: {exc}"))
        return report
    bad = corrupt_present(store, present, existing, jobs=jobs,
                          checked=project.cache.checked(store.url))
    todo = [(p, k, d) for p, k, d in uploads
            if k not in existing or (not k.startswith("objects/") and existing[k].size != len(d))]
    repairs = [(p, k, d) for p, k, d in uploads if k in bad]
    report.skipped = sorted({p.name for k, (p, _) in present.items() if k not in bad})
    if marker_error is not None and report.skipped:
        report.warnings.append(f"{len(report.skipped)} cassette(s) were already in the store, but the liveness marker "
                               f"that keeps them from a gc could not be written ({marker_error}); a `gc --remote` "
                               "from a clone that has not fetched these pins may delete them: push again")
    if not todo and not repairs:
        return report
    # one bar for the whole command: objects (cassettes) and every byte sent
    reporter.start(sum(k.startswith("objects/") for _, k, _ in todo + repairs), "push",
                   total_bytes=sum(len(d) for _, _, d in todo + repairs))
    try:
        if isinstance(store, PackedStore) and store.should_pack(sum(k.startswith("objects/") for _, k, _ in todo)):
            _push_packs(store, todo, report, jobs=jobs, reporter=reporter)
        else:
            written = _push_loose(store, todo, report, jobs=jobs, reporter=reporter)
            if written and is_local_url(project.remote_location):
                # what this push wrote to a local folder are its verified bytes: remembered
                # as checked (key, size, mtime), so the next push does not read them back
                # (S3 lists the MD5 of a single PUT, which the next push compares instead)
                mine = project.cache.checked(store.url)
                mine.add(store.stat_many(written).values())
                mine.save()
        if repairs:
            repair(store, repairs, report, jobs=jobs, reporter=reporter)
    finally:
        reporter.finish()
    report.done.sort()
    return report


def _still_there(store: Store, keys: dict[str, Any]) -> set[str]:
    """push's second look: which of ``keys`` are still there (a local folder: one listing per
    fan-out folder; what it does not hold loose, a pack still may)."""
    inner = store.inner if isinstance(store, PackedStore) else store
    if not isinstance(inner, LocalStore):
        return set(store.stat_many(keys))
    found = inner.present(keys)
    if len(found) < len(keys):
        found |= set(store.stat_many([k for k in keys if k not in found]))
    return found


def _push_loose(store: Store, todo: list[tuple[Pin, str, bytes]], report: TransferReport, *, jobs: int,
                reporter: Reporter) -> list[str]:
    def put(item: tuple[Pin, str, bytes]) -> bool:
        # existence was settled by the one listing above: a single PUT per object
        return store.write_once(item[1], item[2], checked=True)

    def describe(item: tuple[Pin, str, bytes], res: bool | None, err: BaseException | None) -> str:
        pin, key, data = item
        what = "object" if key.startswith("objects/") else "signature"
        return f"{'FAILED ' if err else ''}{what} {pin.name} {short(pin.digest)} ({len(data)} B)" + (f": {err}" if err else "")

    # objects first, then signatures: a signature never points at a missing object
    failed: set[str] = set()
    written: list[str] = []
    for phase in ("objects/", "signatures/"):
        batch = [t for t in todo if t[1].startswith(phase) and t[0].digest not in failed]
        for (pin, key, data), _res, err in run_parallel(
            batch, put, jobs=jobs, describe=describe, reporter=reporter, label=None,
            weigh=lambda it: (int(it[1].startswith("objects/")), len(it[2])),
        ):
            if isinstance(err, RemoteError):
                raise err
            if err is not None:
                failed.add(pin.digest)  # its signatures wait for the object's next push
                report.problems.append(Problem(pin.name, pin.digest, f"{pin.name}: upload of {key} failed: {err}"))
            elif phase == "objects/":
                report.done.append(pin.name)
                report.bytes += len(data)
                written.append(key)
    return written


def _push_packs(store: PackedStore, todo: list[tuple[Pin, str, bytes]], report: TransferReport, *, jobs: int,
                reporter: Reporter) -> None:
    """Objects and their envelopes in packs: two PUTs per pack instead of one per key."""
    by_key: dict[str, list[tuple[Pin, bytes]]] = {}
    for pin, key, data in todo:
        by_key.setdefault(key, []).append((pin, data))
    packs = store.write_packs([(k, v[0][1]) for k, v in by_key.items()])

    def describe(item: tuple[list[str], Callable[[], str]], res: str | None, err: BaseException | None) -> str:
        keys, _ = item
        n = sum(k.startswith("objects/") for k in keys)
        return f"{'FAILED ' if err else ''}pack of {n} object(s)" + (f": {err}" if err else f" {str(res)[:12]}")

    def weigh(item: tuple[list[str], Callable[[], str]]) -> tuple[int, int]:
        keys, _ = item
        return sum(k.startswith("objects/") for k in keys), sum(len(by_key[k][0][1]) for k in keys)

    for (keys, _write), _res, err in run_parallel(packs, lambda p: p[1](), jobs=jobs, describe=describe,
                                                 reporter=reporter, label=None, weigh=weigh):
        if isinstance(err, RemoteError):
            raise err
        for key in keys:
            if not key.startswith("objects/"):
                continue
            for pin, data in by_key[key]:
                if err is not None:
                    report.problems.append(Problem(pin.name, pin.digest, f"{pin.name}: upload of the pack "
                                                                         f"holding {key} failed: {err}"))
                else:
                    report.done.append(pin.name)
                    report.bytes += len(data)


# -- pull ------------------------------------------------------------------------
def pull(project: Project, names: Sequence[str] = (), *, frozen: bool = False, jobs: int | None = None,
         reporter: Reporter | None = None, trust_from: str | None = None) -> TransferReport:
    """Fetch pinned objects into the cache, verified. ``trust_from``: check signatures
    against trusted_keys as it was at that revision (see :func:`casstore.git.trust.policy`)."""
    pins = select(project.load_lock(required=frozen), names)
    run = _Pull(project, jobs or project.config.jobs)
    wanted = run.check(pins, policy(project, trust_from))
    if not wanted:  # nothing to fetch: the store is not opened (no S3 client import)
        check_url(project.remote_location)  # a malformed remote URL is still refused
    else:
        run.fetch(wanted, reporter or NullReporter())
    run.report.done.sort()
    run.report.skipped.sort()
    return run.report


class _Pull:
    """One pull: the pins' checks (signatures, the cache) on threads while one more opens the
    store and reads ahead, then the planned reads of what the cache lacks, verified into it."""

    def __init__(self, project: Project, jobs: int) -> None:
        self.project, self.jobs, self.cache = project, jobs, project.cache
        self.report = TransferReport()
        self.lacking: set[str] = set()  # digests the cache lacked at the start
        self.keys: dict[str, str] = {}  # digest -> its object key
        self.firsts: dict[str, Pin] = {}  # key -> its first pin
        self.early: dict[tuple[str, ...], dict[str, bytes | BaseException]] = {}  # read ahead, by task keys
        self.prechecked: dict[str, tuple[bytes, int, CasstoreError | None]] = {}  # key -> (bytes, size, outcome)
        self.by_key: dict[str, list[Pin]] = {}
        self.workers = max(2, min(8, os.cpu_count() or 1))
        self.pool: list[ThreadPoolExecutor] = []  # made for the first span that was not verified early
        self.pool_lock = threading.Lock()

    # -- the checks, with the store opened and read ahead meanwhile -------------------------
    def check(self, pins: list[Pin], pol: Policy) -> list[Pin]:
        """The pins whose signatures hold and whose objects the cache lacks (or held corrupt)."""
        cache = self.cache

        def check_one(pin: Pin) -> tuple[str, CasstoreError | None]:
            try:
                signing.verify_pin(pin, pol.trusted, required=pol.required, where=pol.where)
            except CasstoreError as exc:
                return "", exc
            if pin.digest in self.lacking:
                return "missing", None  # not in the cache a moment ago: no second look (an open per pin)
            return cache.verified(pin.digest, pin.size), None  # a bad cached object is dropped

        cache.load()  # the cache's packs, read once before the threads share them
        self.lacking = cache.lacking(p.digest for p in pins)
        # more keys than FEW_KEYS are read through the packs' catalog (plan_reads): read it, and
        # the first spans, meanwhile too (network waits, while the checks use the cores), and
        # verify what they bring then, against the size of the first pin of each digest
        uncached: dict[str, int] = {}  # key -> the bound of its last pin's frame
        for p in pins:
            if p.digest in self.lacking:
                key = self.keys[p.digest] = object_key(p.digest)
                uncached[key] = max_frame_size(p.size)
                self.firsts.setdefault(key, p)
        warm = _open_store_meanwhile(self.project, read=uncached if len(uncached) > FEW_KEYS else None,
                                     into=self.early, then=self._precheck) if uncached else None
        wanted = []
        for pin, (state, err) in zip(pins, map_threads(check_one, pins, self.jobs, meanwhile=warm), strict=True):
            if err is not None:
                self.report.problems.append(Problem(pin.name, pin.digest, str(err)))
            elif state == "ok":
                self.report.skipped.append(pin.name)
            else:
                if state == "dropped":
                    self.report.refetched.append(pin.name)
                    cache.refresh()  # a check may have rewritten a pack
                wanted.append(pin)
        return wanted

    def _precheck(self, key: str, frame: bytes) -> None:
        pin = self.firsts.get(key)
        if pin is None:
            return
        try:
            verify_frame(frame, pin.digest, pin.size)
            self.prechecked[key] = (frame, pin.size, None)
        except CasstoreError as exc:
            self.prechecked[key] = (frame, pin.size, exc)

    # -- the reads -------------------------------------------------------------------------
    def fetch(self, wanted: list[Pin], reporter: Reporter) -> None:
        project, report = self.project, self.report
        store = project.store
        for pin in wanted:
            self.by_key.setdefault(self.keys.get(pin.digest) or object_key(pin.digest), []).append(pin)
        try:
            tasks = plan_reads(store, self.by_key, {k: max_frame_size(ps[0].size) for k, ps in self.by_key.items()})
        except RemoteError:
            raise  # the remote's configuration: one line, exit 2
        except CasstoreError as exc:
            for pin in wanted:
                report.problems.append(Problem(pin.name, pin.digest, f"{pin.name}: cannot list {project.remote_url}: {exc}"))
            return
        self.writer = CacheWriter(self.cache)  # what this pull fetched: one pack (or loose files, when few)
        try:
            outcomes = run_parallel(tasks, self._fetch, jobs=self.jobs, describe=self._describe, reporter=reporter,
                                    label="pull",
                                    weigh=lambda t: (len(t.keys), sum(self.by_key[k][0].size for k in t.keys)))
        finally:
            for executor in self.pool:
                executor.shutdown()
        failed = self.writer.close()
        for task, res, failure in outcomes:
            for key in task.keys:
                got = failure if failure is not None else (res or {}).get(key)
                if isinstance(got, RemoteError):
                    raise got
                if key in failed:  # verified, but the cache could not take it (a full disk)
                    got = failed[key]
                for pin in self.by_key[key]:
                    if isinstance(got, BaseException) or got is None:
                        report.problems.append(Problem.of(pin, got))
                    else:
                        report.done.append(pin.name)
                        report.bytes += got

    def _put(self, key: str, pin: Pin, frame: bytes) -> int | BaseException:
        try:
            pre = self.prechecked.get(key)
            if pre is None or pre[0] is not frame or pre[1] != pin.size:
                verify_frame(frame, pin.digest, pin.size)  # only verified objects enter the cache
            elif pre[2] is not None:
                raise pre[2]  # verified while the signatures were checked: it failed then
            self.writer.add(key, frame)
            return len(frame)
        except IntegrityError as exc:
            return IntegrityError(f"refused object from {self.project.remote_url}: {exc}")
        except CasstoreError as exc:
            return exc

    def _fetch(self, task: ReadTask) -> dict[str, int | BaseException]:
        out: dict[str, int | BaseException] = {}
        todo: list[tuple[str, Pin, bytes]] = []
        results = self.early.pop(tuple(task.keys), None)  # read (and verified) while the signatures were checked
        for key, got in (task.run() if results is None else results).items():
            pin = self.by_key[key][0]
            if isinstance(got, NotFoundError):
                out[key] = NotFoundError(f"{short(pin.digest)} is missing from {self.project.remote_url}; {who_pushes(pin)}")
            elif isinstance(got, BaseException):
                out[key] = got
            elif len(task.keys) == 1 or key in self.prechecked:  # one object (a loose read), or verified already
                out[key] = self._put(key, pin, got)
            else:
                todo.append((key, pin, got))
        if todo:  # one ranged GET brought a pack's worth: verify them on all cores, a slice a thread
            with self.pool_lock:
                if not self.pool:
                    from concurrent.futures import ThreadPoolExecutor

                    self.pool.append(ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="casstore-cache"))
            parts = [todo[i::self.workers] for i in range(min(self.workers, len(todo)))]
            futures = [self.pool[0].submit(lambda p: [self._put(*item) for item in p], part) for part in parts]
            for part, fut in zip(parts, futures, strict=True):
                for (key, _, _), res in zip(part, fut.result(), strict=True):
                    out[key] = res
        for key, res in out.items():
            if isinstance(res, IntegrityError) and "refused object" not in str(res):
                out[key] = IntegrityError(f"refused object from {self.project.remote_url}: {res}")
        return out

    def _describe(self, task: ReadTask, res: dict[str, int | BaseException] | None, err: BaseException | None) -> str:
        lines = []
        for key in task.keys:
            got = err if err is not None else (res or {}).get(key)
            for pin in self.by_key[key]:
                lines.append(f"FAILED {pin.name}: {got}" if isinstance(got, BaseException)
                             else f"{pin.name} {short(pin.digest)} ({got} B)")
        return "\n".join(lines)
