"""``casstore add``: validate, canonicalize, hash, sign, cache and pin cassette files."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import signing
from ..errors import CheckFailed, StoreError, UsageError
from ..forking import processes_for, run_forked, split
from ..model.blob import compress, decompress_verified, digest_and_size
from ..model.cassette import load_file
from ..model.lock import Pin, Signature
from ..project import Project
from ..store.backends import object_key, signature_key
from ..store.cache import CACHE_PACK_THRESHOLD, CacheWriter
from .findings import SecretScanner
from .inspect import remember_working_copies

__all__ = ["Added", "add"]


@dataclass
class _Done:
    """What became of one file: its pin and signature, its findings, or the error."""

    name: str | None
    pin: Pin | None = None
    sig: Signature | None = None
    findings: list[str] = field(default_factory=list)
    error: BaseException | None = None
    stat: os.stat_result | None = None  # the file's, taken before it was read


@dataclass
class Added:
    name: str
    digest: str
    size: int
    entries: int
    changed: bool
    signed_by: str | None


def _walk(folder: str, out: list[tuple[str, bool]]) -> None:
    """``(path, is a symlink)`` of every ``*.json`` file under ``folder``, as ``rglob`` finds
    them (symlinked folders not entered, symlinked files kept, unreadable folders skipped),
    from the directory entries: no stat per file."""
    try:
        with os.scandir(folder) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    _walk(e.path, out)
                elif e.name.endswith(".json") and e.is_file():
                    out.append((e.path, e.is_symlink()))
    except PermissionError:
        pass


def _expand(paths: Iterable[Path]) -> tuple[list[Path], set[Path]]:
    """The files to add, and those of them a folder walk found to be plain files (no symlink)."""
    out: list[Path] = []
    plain: set[Path] = set()
    for p in paths:
        if p.is_dir():
            found: list[tuple[str, bool]] = []
            _walk(os.fspath(p), found)
            walked = sorted((Path(f), link) for f, link in found)
            out.extend(f for f, _ in walked)
            plain.update(f for f, link in walked if not link)
        else:
            out.append(p)
    return out, plain


def _rel_posix(path: Path, root: Path) -> str:
    """``path`` as a finding names it: relative to the project root."""
    return path.resolve().relative_to(root).as_posix()


def _check_inside(project: Project, files: list[Path], plain: set[Path]) -> None:
    """Project.check_inside for every file, resolving each folder once: a file that is not a
    symlink (``plain``: known from the walk, else one lstat) resolves to its resolved folder
    + its name."""
    root = project.root.resolve()
    inside: dict[Path, bool] = {}  # folder as given -> whether it resolves inside the root
    for f in files:
        ok = inside.get(f.parent)
        if ok is None:
            folder = f.parent.resolve()
            ok = inside[f.parent] = folder == root or root in folder.parents
        if f.name in ("", ".", "..") or (f not in plain and f.is_symlink()) or not ok:
            project.check_inside(f)  # raises with the usual message if it leads out


def add(project: Project, paths: Sequence[Path], *, jobs: int | None = None) -> list[Added]:
    """Validate, canonicalize, hash, sign, cache and pin each cassette file.

    All or nothing for the lock: it is written once, at the end, when every file was
    valid. Objects go into the local cache as each file is done (the files are split over
    ``jobs`` forked processes, see :mod:`casstore.forking`, or threads where forking is
    not safe), so a failed add may leave verified objects in the cache, never a pin. Each
    file is scanned for secrets with the rules of ``casstore check`` first: a file with a
    finding never enters the cache, and any finding refuses the whole add
    (``CheckFailed``, one line per finding).
    """
    files, plain = _expand(paths)
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
    _check_inside(project, files, plain)  # a symlink (or a path) leading out of the repository is refused
    cache, level = project.cache, project.config.zstd_level
    key_trusted = key is not None and key.keyid in trusted.by_id()

    def store(pin: Pin, data: bytes, writer: CacheWriter) -> Signature | None:
        try:
            # a good cached copy stays (a bad one is dropped); has() is one stat + a lookup
            if not cache.has(pin.digest) or cache.verified(pin.digest, pin.size) != "ok":
                frame = compress(data, level)
                decompress_verified(frame, pin.digest, pin.size)  # only verified objects enter the cache
                writer.add(object_key(pin.digest), frame)
        except StoreError as exc:  # a symlink out of the cache: name the cassette
            raise StoreError(f"{pin.name}: {exc}") from exc
        if key is None:
            return None
        sig = key.sign_pin(pin)
        if not key_trusted:  # push rebuilds a trusted key's envelope from the lock (same bytes)
            writer.add(signature_key(pin.digest, sig.keyid), signing.make_envelope(pin, key, sig))
        return sig

    jobs = jobs or max(1, min(4, os.cpu_count() or 1))
    scanner = SecretScanner(project)
    root = project.root.resolve()

    def one(f: Path, writer: CacheWriter) -> _Done:
        """All add does to one file but pin it and write its object (collected by
        ``writer``); nothing raised (the error is returned)."""
        try:
            try:
                st: os.stat_result | None = os.stat(f)  # before the read: a later write shows in it
            except OSError:
                st = None  # load_file says what is wrong
            cas = load_file(f)
            # what is pinned is scanned with the rules of `casstore check`
            found = scanner(functools.partial(_rel_posix, f, root), cas.to_dict(), cas.name)
            if found:  # never enters the cache: the add is refused below
                return _Done(cas.name, findings=[x.line() for x in found])
            data = cas.canonical_bytes()
            digest, size = digest_and_size(data)
            lo, hi = cas.recorded_range()
            pin = Pin(
                name=cas.name, digest=digest, size=size, entries=len(cas.entries),
                recorded_from=lo, recorded_to=hi, models=tuple(cas.models()),
            )
            return _Done(cas.name, pin=pin, sig=store(pin, data, writer), stat=st)
        except Exception as exc:
            return _Done(None, error=exc)

    def part(fs: Sequence[Path]) -> list[_Done]:
        """One process's files: their objects written together (one pack, or loose when few)."""
        # packed from CACHE_PACK_THRESHOLD new objects in the whole add: this slice's share of it
        writer = CacheWriter(cache, threshold=max(1, CACHE_PACK_THRESHOLD * len(fs) // len(files)))
        done = [one(f, writer) for f in fs]
        failed = writer.close()  # a full disk, a symlink out of the cache: name the cassette
        for d in done:
            if d.pin is not None and object_key(d.pin.digest) in failed:
                d.error = StoreError(f"{d.pin.name}: {failed[object_key(d.pin.digest)]}")
        return done

    # parsing, the scan, hashing and signing hold the GIL: the files are split over forked
    # processes (threads where that is not safe), each writing its objects as one pack
    cache.load()  # the packs' catalog, read once before the fork
    seen: dict[str, Path] = {}
    findings: list[str] = []
    done: list[tuple[Pin, Signature | None]] = []
    cdir = os.fspath(project.cassette_dir)
    remembered: dict[str, tuple[os.stat_result, str]] = {}  # for the next `status`
    n = processes_for(len(files), jobs)
    parts = split(files, n) if n > 1 else [files]
    outcomes = run_forked(part, parts, accept=lambda fs, got: isinstance(got, list) and len(got) == len(fs),
                          threads=True)
    for f, res in zip(files, [d for got in outcomes for d in got], strict=True):
        if res.error is not None:
            raise res.error
        assert res.name is not None
        if res.name in seen:
            raise UsageError(f"{f} and {seen[res.name]} both hold cassette {res.name!r}")
        seen[res.name] = f
        findings += res.findings
        if res.pin is not None:
            done.append((res.pin, res.sig))
            if res.stat is not None and os.path.abspath(f) == os.path.join(cdir, res.name + ".json"):
                remembered[res.name] = (res.stat, res.pin.digest)
    if findings:
        raise CheckFailed("\n".join(findings) + f"\nnothing pinned: {len(findings)} secret(s) found. Redact "
                          "them (re-record, or edit the working copy), or accept a false positive in "
                          "casstore.toml with [redaction] allow (see docs/security.md)")
    results = []
    new_pins = []
    with project.locked():
        lock = project.load_lock()
        for pin, sig in done:
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
