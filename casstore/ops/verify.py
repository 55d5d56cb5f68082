"""``casstore verify``: every pinned object checked against its digest and signatures, in
the local cache or (``--remote``) in the store, whose whole content fsck then checks."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import CasstoreError, IntegrityError, NotFoundError
from ..git.trust import Policy, policy
from ..model.lock import Lock, Pin
from ..project import Project
from ..store import signing
from .parallel import map_threads
from .results import Problem, select, short

if TYPE_CHECKING:  # what only --remote needs is imported there (start-up time)
    from ..store.fsck import StoreFsck

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
    unbound: list[str] = field(default_factory=list)  # one line per pin signed before signatures named the cassette

    def record(self, pin: Pin, err: BaseException | None) -> None:
        self.checked += 1
        if err is None:
            self.ok.append(pin.name)
            self.bytes += pin.size
        else:
            self.problems.append(Problem.of(pin, err))


def verify(project: Project, names: Sequence[str] = (), *, remote: bool = False,
           jobs: int | None = None, trust_from: str | None = None) -> VerifyReport:
    """Check every pin (signature, object, digest, size). ``trust_from``: signatures are
    checked against trusted_keys as it was at that revision, never the working tree's."""
    lock = project.load_lock(required=True)
    pol = policy(project, trust_from)
    jobs = jobs or min(4, project.config.jobs)
    rep = VerifyReport()
    if remote:
        _verify_store(project, lock, select(lock, names), pol, jobs, rep)
    else:
        _verify_cache(project, lock, names, pol, jobs, rep)
    rep.ok.sort()
    rep.problems.sort(key=lambda p: p.name)
    return rep


# (name, state, error) of a pin that did not verify; state "missing" or "dropped" (the cached
# object was bad and is gone) with no error, or "" with the error
Failure = tuple[str, str, BaseException | None]


def _verify_cache(project: Project, lock: Lock, names: Sequence[str], pol: Policy, jobs: int,
                  rep: VerifyReport) -> None:
    """Every pin's signatures and cached object, checked on threads: reading, inflating,
    hashing and libsodium's signature check release the GIL."""
    pins, cache, trusted, required, where = lock.pins, project.cache, pol.trusted, pol.required, pol.where
    todo = list(pins) if not names else list(dict.fromkeys(p.name for p in select(lock, names)))  # each once

    def check(name: str) -> Failure | None:
        pin = pins[name]
        try:
            signing.verify_pin(pin, trusted, required=required, where=where, unbound=rep.unbound)
            state = cache.verified(pin.digest, pin.size)  # a bad cached object is dropped
        except Exception as exc:
            return name, "", exc
        return None if state == "ok" else (name, state, None)

    # the collector paused: the checks make no garbage it must find, and its passes cost time
    cache.load()  # the cache's packs, read once before the threads share them
    paused = gc.isenabled()
    gc.disable()
    try:
        results = map_threads(check, todo, jobs)
    finally:
        if paused:
            gc.enable()
    failed = {bad[0]: bad[1:] for bad in results if bad is not None}
    rep.unbound.sort()  # appended by the threads as they finished
    rep.bytes = sum(pins[name].size for name, bad in zip(todo, results, strict=True) if bad is None)
    rep.checked = len(todo) - len(failed)
    rep.ok = [name for name in todo if name not in failed] if failed else todo
    dropped = []
    for name, (state, err) in failed.items():
        pin = pins[name]
        if state == "dropped":
            dropped.append(pin)
            continue
        if state == "missing":
            err = NotFoundError(f"{short(pin.digest)} is not in the local cache (run `casstore pull`)")
        rep.record(pin, err)
    if dropped:
        cache.refresh()  # a check may have rewritten a pack
        _refetch(project, dropped, jobs, rep)


def _refetch(project: Project, dropped: list[Pin], jobs: int, rep: VerifyReport) -> None:
    """Fetch again, verified, the pins whose cached object was corrupt (and dropped)."""
    from ..store.transfer import NullReporter, run_parallel

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

    for pin, _res, err in run_parallel(dropped, refetch, jobs=jobs, describe=lambda *a: "",
                                       reporter=NullReporter(), label="verify"):
        rep.record(pin, err)


def _verify_store(project: Project, lock: Lock, pins: list[Pin], pol: Policy, jobs: int,
                  rep: VerifyReport) -> None:
    """The pins' objects and envelopes in the store, then fsck of the whole store."""
    from ..store.backends import digest_from_key, object_key, signature_key
    from ..store.fsck import fsck_store
    from .repair import read_verified, remedy

    store, trusted, required = project.store, pol.trusted, pol.required
    # signatures first (no request), then the objects in batched reads (neighbours in a
    # pack come in one ranged GET) and the envelopes in one listing
    by_key: dict[str, list[Pin]] = {}
    for pin in pins:
        try:
            signing.verify_pin(pin, trusted, required=required, where=pol.where, unbound=rep.unbound)
        except CasstoreError as exc:
            rep.record(pin, exc)
            continue
        by_key.setdefault(object_key(pin.digest), []).append(pin)
    envelopes = {signature_key(p.digest, s.keyid) for ps in by_key.values() for p in ps for s in p.signatures}
    present = store.exists_many(envelopes) if envelopes else {}

    found = read_verified(store, by_key, jobs, "verify")
    unsure = {key for key in by_key if found.get(key) is not None}  # the next push reads them back again
    for key in by_key:
        problem = found.get(key)
        if isinstance(problem, NotFoundError):
            problem = NotFoundError(f"{short(by_key[key][0].digest)} is missing from {project.remote_url}; "
                                    + remedy(project, by_key[key][0], "uploads"))
        elif isinstance(problem, IntegrityError):
            problem = IntegrityError(f"{problem}; {remedy(project, by_key[key][0], 'replaces')}")
        for pin in by_key[key]:
            missing = [s.keyid for s in pin.signatures if signature_key(pin.digest, s.keyid) not in present]
            if problem is None and missing:
                rep.record(pin, NotFoundError(f"signature envelope {missing[0]} of {short(pin.digest)} "
                                              f"is missing from the store; {remedy(project, pin, 'uploads')}"))
            else:
                rep.record(pin, problem)
    if unsure:
        checked = project.cache.checked(store.url)
        checked.forget(unsure)
        checked.save()
    pinned = lock.digests()
    fs = rep.fsck = fsck_store(store, trusted=trusted, skip_content={p.digest for p in pins}, jobs=jobs)
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
