"""``casstore add``: validate, canonicalize, hash, sign, cache and pin cassette files."""

from __future__ import annotations

import functools
import os
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .. import signing
from ..errors import CheckFailed, StoreError, UsageError
from ..model.blob import compress, digest_and_size
from ..model.cassette import load_file
from ..model.lock import Pin, Signature
from ..project import Project
from .findings import SecretScanner
from .inspect import remember_working_copies

__all__ = ["Added", "add"]


@dataclass
class Added:
    name: str
    digest: str
    size: int
    entries: int
    changed: bool
    signed_by: str | None


def _expand(paths: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(sorted(x for x in p.rglob("*.json") if x.is_file()))
        else:
            out.append(p)
    return out


def _rel_posix(path: Path, root: Path) -> str:
    """``path`` as a finding names it: relative to the project root."""
    return path.resolve().relative_to(root).as_posix()


def _check_inside(project: Project, files: list[Path]) -> None:
    """Project.check_inside for every file, resolving each folder once: a file that is not a
    symlink resolves to its resolved folder + its name (one lstat instead of one per part)."""
    root = project.root.resolve()
    folders: dict[Path, Path] = {}
    for f in files:
        folder = folders.get(f.parent)
        if folder is None:
            folder = folders[f.parent] = f.parent.resolve()
        if f.is_symlink() or f.name in ("", ".", ".."):
            project.check_inside(f)
        elif folder != root and root not in folder.parents:
            project.check_inside(f)  # raises with the usual message


def add(project: Project, paths: Sequence[Path], *, jobs: int | None = None) -> list[Added]:
    """Validate, canonicalize, hash, sign, cache and pin each cassette file.

    All or nothing for the lock: it is written once, at the end, when every file was
    valid. Objects go into the local cache as each file is done (compression, signing
    and the file writes run on ``jobs`` threads while the next files are parsed), so a
    failed add may leave verified objects in the cache, never a pin. Each file is
    scanned for secrets with the rules of ``casstore check`` first: a file with a finding
    never enters the cache, and any finding refuses the whole add (``CheckFailed``, one
    line per finding).
    """
    files = _expand(paths)
    if not files:
        raise UsageError("no cassette files given (pass files or folders of .json cassettes)")
    trusted = project.trusted_keys()
    required = project.signatures_required(trusted)
    key = signing.load_signing_key(required=required)
    if key is not None and required and key.keyid not in trusted.by_id():
        raise UsageError(
            f"your signing key {key.keyid} ({key.identity}) is not in {project.config.trusted_keys_file}; "
            "run `casstore keys trust` with it, or ask a maintainer to"
        )
    _check_inside(project, files)  # a symlink (or a path) leading out of the repository is refused
    cache, level = project.cache, project.config.zstd_level
    key_trusted = key is not None and key.keyid in trusted.by_id()

    def store(pin: Pin, data: bytes) -> Signature | None:
        try:
            cache.put_frame(pin.digest, pin.size, compress(data, level))
        except StoreError as exc:  # a full disk, a symlink out of the cache: name the cassette
            raise StoreError(f"{pin.name}: {exc}") from exc
        if key is None:
            return None
        sig = key.sign_pin(pin)
        if not key_trusted:  # push rebuilds a trusted key's envelope from the lock (same bytes)
            cache.put_signature(pin.digest, sig.keyid, signing.make_envelope(pin, key, sig))
        return sig

    jobs = jobs or max(1, min(4, os.cpu_count() or 1))
    seen: dict[str, Path] = {}
    scanner = SecretScanner(project)
    root = project.root.resolve()
    findings: list[str] = []
    cdir = os.fspath(project.cassette_dir)
    remembered: dict[str, tuple[os.stat_result, str]] = {}  # for the next `status`
    done: list[tuple[Pin, Future[Signature | None]]] = []
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="casstore-add") as pool:
        pending: deque[Future[Signature | None]] = deque()
        for f in files:
            try:
                st: os.stat_result | None = os.stat(f)  # before the read: a later write shows in it
            except OSError:
                st = None  # load_file says what is wrong
            cas = load_file(f)
            if cas.name in seen:
                raise UsageError(f"{f} and {seen[cas.name]} both hold cassette {cas.name!r}")
            seen[cas.name] = f
            # what is pinned is scanned with the rules of `casstore check`
            found = scanner(functools.partial(_rel_posix, f, root), cas.to_dict(), cas.name)
            if found or findings:
                findings += [x.line() for x in found]
                continue  # nothing more goes into the cache: the add is refused below
            data = cas.canonical_bytes()
            digest, size = digest_and_size(data)
            if st is not None and os.path.abspath(f) == os.path.join(cdir, cas.name + ".json"):
                remembered[cas.name] = (st, digest)
            lo, hi = cas.recorded_range()
            pin = Pin(
                name=cas.name, digest=digest, size=size, entries=len(cas.entries),
                recorded_from=lo, recorded_to=hi, models=tuple(cas.models()),
            )
            fut = pool.submit(store, pin, data)
            done.append((pin, fut))
            pending.append(fut)
            while len(pending) > 4 * jobs:  # bounded: at most a few cassettes' bytes in memory
                pending.popleft().result()
        if findings:
            raise CheckFailed("\n".join(findings) + f"\nnothing pinned: {len(findings)} secret(s) found. Redact "
                              "them (re-record, or edit the working copy), or accept a false positive in "
                              "casstore.toml with [redaction] allow (see docs/security.md)")
        results = []
        new_pins = []
        with project.locked():
            lock = project.load_lock()
            for pin, fut in done:
                sig = fut.result()  # a failed write raises here, before the lock is touched
                old = lock.pins.get(pin.name)
                sigs = list(old.signatures) if old is not None and old.digest == pin.digest else []
                if sig is not None:
                    sigs = signing.merge_signatures(sigs, sig)
                new = pin.with_signatures(sigs)
                if old is not None and old.extra:
                    new = Pin(**{**new.__dict__, "extra": dict(old.extra)})
                new_pins.append(new)
                results.append(Added(pin.name, pin.digest, pin.size, pin.entries,
                                     old is None or old.digest != pin.digest,
                                     key.identity if key is not None else None))
            project.save_lock(lock.with_pins(new_pins))
    remember_working_copies(project, remembered)
    return results
