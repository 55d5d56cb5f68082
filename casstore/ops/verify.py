"""``casstore verify``: every pinned object checked against its digest and signatures, in
the local cache or (``--remote``) in the store, whose whole content fsck then checks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .. import signing
from ..errors import CasstoreError, IntegrityError, NotFoundError
from ..forking import map_forked
from ..git.trust import policy
from ..model.blob import max_frame_size, verify_frame
from ..model.lock import Pin
from ..project import Project
from ..store.backends import digest_from_key, object_key, signature_key
from ..store.fsck import StoreFsck, fsck_store
from ..store.packs import ReadTask, plan_reads
from ..store.transfer import NullReporter, run_parallel
from .repair import remedy
from .results import Problem, select, short

__all__ = ["VerifyReport", "verify"]


@dataclass
class VerifyReport:
    checked: int = 0
    ok: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    refetched: list[str] = field(default_factory=list)  # corrupt in the cache, fetched again
    bytes: int = 0
    fsck: StoreFsck | None = None  # with --remote: the whole store checked


def verify(project: Project, names: Sequence[str] = (), *, remote: bool = False,
           jobs: int | None = None, trust_from: str | None = None) -> VerifyReport:
    """Check every pin (signature, object, digest, size). ``trust_from``: signatures are
    checked against trusted_keys as it was at that revision, never the working tree's."""
    lock = project.load_lock(required=True)
    pins = select(lock, names)
    pol = policy(project, trust_from)
    trusted, required = pol.trusted, pol.required
    rep = VerifyReport()
    store = project.store if remote else None
    jobs = jobs or min(4, project.config.jobs)

    def record(pin: Pin, size: int | None, err: BaseException | None) -> None:
        rep.checked += 1
        if err is None:
            rep.ok.append(pin.name)
            rep.bytes += size or 0
        else:
            msg = str(err) if isinstance(err, CasstoreError) else f"{type(err).__name__}: {err}"
            rep.problems.append(Problem(pin.name, pin.digest, f"{pin.name}: {msg}"))

    if store is None:
        cache = project.cache

        def check(pin: Pin) -> tuple[str, BaseException | None]:
            """("ok" | "missing" | "dropped", None), or ("", the error); nothing raised."""
            try:
                signing.verify_pin(pin, trusted, required=required, where=pol.where)
                return cache.verified(pin.digest, pin.size), None  # a bad cached object is dropped
            except Exception as exc:
                return "", exc

        def refetch(pin: Pin) -> None:
            try:
                project.fetch_verified(pin)
            except CasstoreError as exc:
                raise IntegrityError(
                    f"the cached object was corrupt (dropped) and the store cannot replace it "
                    f"({str(exc).removeprefix(pin.name + ': ')}); from a clone that holds it, "
                    "`casstore add` its working copy, then `casstore push`"
                ) from None
            rep.refetched.append(pin.name)

        # signature checks hold the GIL: many pins are split over forked processes
        dropped = []
        for pin, (state, err) in zip(pins, map_forked(check, pins, processes=jobs), strict=True):
            if state == "dropped":
                dropped.append(pin)
                continue
            if state == "missing":
                err = NotFoundError(f"{short(pin.digest)} is not in the local cache (run `casstore pull`)")
            record(pin, pin.size, err)
        for pin, _res, err in run_parallel(dropped, refetch, jobs=jobs, describe=lambda *a: "",
                                           reporter=NullReporter(), label="verify"):
            record(pin, pin.size, err)
    else:
        # the store: signatures first (no request), then the objects in batched reads
        # (neighbours in a pack come in one ranged GET) and the envelopes in one listing
        by_key: dict[str, list[Pin]] = {}
        for pin in pins:
            try:
                signing.verify_pin(pin, trusted, required=required, where=pol.where)
            except CasstoreError as exc:
                record(pin, None, exc)
                continue
            by_key.setdefault(object_key(pin.digest), []).append(pin)
        envelopes = {signature_key(p.digest, s.keyid) for ps in by_key.values() for p in ps for s in p.signatures}
        present = store.exists_many(envelopes) if envelopes else {}

        def check_task(task: ReadTask) -> dict[str, BaseException | None]:
            out: dict[str, BaseException | None] = {}
            for key, got in task.run().items():
                digest, size = by_key[key][0].digest, by_key[key][0].size
                if isinstance(got, NotFoundError):
                    out[key] = NotFoundError(f"{short(digest)} is missing from {project.remote_url}; "
                                             + remedy(project, by_key[key][0], "uploads"))
                    continue
                if isinstance(got, IntegrityError):
                    out[key] = IntegrityError(f"{got}; {remedy(project, by_key[key][0], 'replaces')}")
                    continue
                if isinstance(got, BaseException):
                    out[key] = got
                    continue
                try:
                    verify_frame(got, digest, size)
                    out[key] = None
                except IntegrityError as exc:
                    out[key] = IntegrityError(f"corrupt in the store: {exc}; {remedy(project, by_key[key][0], 'replaces')}")
                except CasstoreError as exc:
                    out[key] = exc
            return out

        limits = {k: max_frame_size(ps[0].size) for k, ps in by_key.items()}
        unsure: set[str] = set()  # objects that did not verify: the next push reads them back again
        for task, res, err in run_parallel(plan_reads(store, by_key, limits), check_task, jobs=jobs,
                                           describe=lambda *a: "", reporter=NullReporter(), label="verify"):
            for key in task.keys:
                if err is not None or (res or {}).get(key) is not None:
                    unsure.add(key)
                for pin in by_key[key]:
                    problem = err if err is not None else (res or {}).get(key)
                    if problem is None:
                        missing = [s.keyid for s in pin.signatures if signature_key(pin.digest, s.keyid) not in present]
                        if missing:
                            problem = NotFoundError(f"signature envelope {missing[0]} of {short(pin.digest)} "
                                                    f"is missing from the store; {remedy(project, pin, 'uploads')}")
                    record(pin, pin.size, problem)
    if store is not None:
        if unsure:
            checked = project.cache.checked(store.url)
            checked.forget(unsure)
            checked.save()
        pinned = lock.digests()
        fs = rep.fsck = fsck_store(store, trusted=trusted, skip_content={p.digest for p in pins},
                                   jobs=jobs or min(4, project.config.jobs))
        for inf in store.list("objects/"):
            d = digest_from_key(inf.key)
            if d is None or d not in pinned:
                rep.orphans.append(d or inf.key)
        for line in fs.corrupt:
            rep.problems.append(Problem("store", line[:71], f"corrupt object {line}"))
        for line in fs.bad_signatures:
            rep.problems.append(Problem("store", "", f"bad signature envelope {line}"))
        if required:
            for d in fs.unsigned:
                if d not in pinned:  # a pinned one is reported by its pin above
                    rep.problems.append(Problem("store", d, f"object {d} has no signature envelope"))
    rep.ok.sort()
    rep.problems.sort(key=lambda p: p.name)
    return rep
