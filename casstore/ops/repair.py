"""A corrupt object in the store: found and replaced by ``push`` with the verified local copy
(an object that verifies is never overwritten), its remedy said by ``verify``."""

from __future__ import annotations

import hashlib
from typing import Any

from ..errors import CasstoreError, IntegrityError, NotFoundError
from ..model.blob import max_frame_size, verify_frame
from ..model.lock import Pin
from ..project import Project
from ..store.backends import Store
from ..store.cache import CheckedObjects
from ..store.packs import PackedStore, ReadTask, plan_reads
from ..store.transfer import NullReporter, Reporter, run_parallel
from .results import Problem, TransferReport, short

__all__ = ["read_verified", "corrupt_present", "repair", "remedy"]


def read_verified(store: Store, pins: dict[str, list[Pin]], jobs: int, label: str) -> dict[str, BaseException | None]:
    """Each key's stored object read (in planned reads) and verified against its first pin: None
    when it verifies, else the read's error, or an IntegrityError ("corrupt in the store: ...")."""
    def check(task: ReadTask) -> dict[str, BaseException | None]:
        out: dict[str, BaseException | None] = {}
        for key, got in task.run().items():
            out[key] = got if isinstance(got, BaseException) else None
            if isinstance(got, bytes):
                try:
                    verify_frame(got, pins[key][0].digest, pins[key][0].size)
                except IntegrityError as exc:
                    out[key] = IntegrityError(f"corrupt in the store: {exc}")
                except CasstoreError as exc:
                    out[key] = exc
        return out

    found: dict[str, BaseException | None] = {}
    limits = {k: max_frame_size(ps[0].size) for k, ps in pins.items()}
    for task, res, err in run_parallel(plan_reads(store, pins, limits), check, jobs=jobs, describe=lambda *a: "",
                                       reporter=NullReporter(), label=label):
        found.update({key: err for key in task.keys} if err is not None else res or {})
    return found


def corrupt_present(store: Store, present: dict[str, tuple[Pin, bytes]], infos: dict[str, Any], *,
                    jobs: int = 8, checked: CheckedObjects | None = None) -> set[str]:
    """The keys of ``present`` whose stored object does not verify; not read: one whose ETag is
    the MD5 of our frame, or in ``checked`` (verified before, same size and stamp since)."""
    to_read: dict[str, list[Pin]] = {}
    for key, (pin, frame) in present.items():
        etag = infos[key].etag
        if etag and "-" not in etag and etag == hashlib.md5(frame, usedforsecurity=False).hexdigest():
            continue
        if checked is not None and checked.has(infos[key]):
            continue
        to_read[key] = [pin]
    bad: set[str] = set()
    good: list[Any] = []
    for key, got in read_verified(store, to_read, jobs, "push check").items():
        if got is None:
            good.append(infos[key])
        elif isinstance(got, (NotFoundError, IntegrityError)):
            bad.add(key)  # corrupt, or gone since the listing: upload it
        # another read error: cannot tell; the object stays as it is (verify --remote reports it)
    if checked is not None:
        checked.add(good)
        checked.forget(bad)
        checked.save()
    return bad


def repair(store: Store, repairs: list[tuple[Pin, str, bytes]], report: TransferReport, *, jobs: int,
            reporter: Reporter) -> None:
    """Replace corrupt stored objects with the verified local copies: always a loose write
    (a reader tries the loose key first), then the damaged pack members are dropped."""
    def put(item: tuple[Pin, str, bytes]) -> bool:
        target = store.inner if isinstance(store, PackedStore) else store
        return target.write_once(item[1], item[2], checked=True)

    def describe(item: tuple[Pin, str, bytes], res: bool | None, err: BaseException | None) -> str:
        pin, key, data = item
        return f"{'FAILED ' if err else ''}repair {pin.name} {short(pin.digest)} ({len(data)} B)" + (f": {err}" if err else "")

    for (pin, key, data), _res, err in run_parallel(repairs, put, jobs=jobs, describe=describe, reporter=reporter,
                                                     label=None, weigh=lambda it: (1, len(it[2]))):
        if err is not None:
            report.problems.append(Problem(pin.name, pin.digest, f"{pin.name}: replacing the corrupt {key} failed: {err}"))
            continue
        report.repaired.append(pin.name)
        report.bytes += len(data)
        if isinstance(store, PackedStore) and store.packed(key):
            store.forget_member(key)
    if isinstance(store, PackedStore):
        for problem in store.flush():
            report.problems.append(Problem("*", "", f"the corrupt copy stays in a pack: {problem}"))
    report.repaired.sort()


def remedy(project: Project, pin: Pin, verb: str) -> str:
    """Which command repairs a pin's object in the store: push, from here or from a clone that holds it."""
    if project.cache.verified(pin.digest, pin.size) == "ok":
        return f"`casstore push` {verb} it from the verified copy in your cache"
    return (f"`casstore push` from a clone whose cache holds it {verb} it (or `casstore pull` it there first; "
            "else `casstore add` its working copy, then `casstore push`)")
