"""``casstore add``: validate, canonicalize, hash, sign, cache and pin cassette files."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CasstoreError, CheckFailed, StoreError, UsageError
from ..model.blob import compress_checked, digest_and_size
from ..model.cassette import load_bytes, read_file
from ..model.lock import Pin, Signature, format_pin
from ..project import Project
from ..store import signing
from ..store.backends import object_key, signature_key
from ..store.cache import CacheWriter
from .findings import SecretScanner
from .parallel import map_threads

__all__ = ["Added", "add", "add_each"]

# what became of one file: ("ok", name, digest, size, entries,
# recorded_from, recorded_to, models, signature or None, the pin's lock block, (size,
# mtime_ns, inode) of a working copy or None)
# | ("found", name, finding lines) | ("error", exc)
_Done = tuple[Any, ...]


@dataclass
class Added:
    name: str
    digest: str
    size: int
    entries: int
    changed: bool
    signed_by: str | None


def _expand(paths: Iterable[Path]) -> list[str]:
    out: list[str] = []
    for p in paths:
        if p.is_dir():
            out.extend(os.fspath(f) for f in sorted(p.rglob("*.json")) if f.is_file())
        else:
            out.append(os.fspath(p))
    return out


def add(project: Project, paths: Sequence[Path], *, jobs: int | None = None) -> list[Added]:
    """Validate, canonicalize, hash, sign, cache and pin each cassette file: all or nothing for
    the lock; a file with a secret (``check``'s rules) never enters the cache and refuses the add."""
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
    for f in files:  # a symlink (or a path) leading out of the repository is refused
        project.check_inside(Path(f))
    cache, level = project.cache, project.config.zstd_level
    key_trusted = key is not None and key.keyid in trusted.by_id()

    def store(pin: Pin, data: bytes, writer: CacheWriter) -> Signature | None:
        try:
            # a good cached copy stays (a bad one is dropped)
            if not cache.has(pin.digest) or cache.verified(pin.digest, pin.size) != "ok":
                # only verified objects enter the cache: the frame inflates to these bytes
                writer.add(object_key(pin.digest), compress_checked(data, level))
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
    cdir = os.fspath(project.cassette_dir)
    cwd = os.getcwd()  # os.path.abspath's, once (it asks the kernel on every call)

    def one(f: str, writer: CacheWriter) -> _Done:
        """All add does to one file but pin it and write its object (collected by
        ``writer``); nothing raised (the error is returned)."""
        try:
            data, st = read_file(f)  # the stat before the read: a later write shows in it
            cas = load_bytes(data, source=f)
            # what is pinned is scanned with the rules of `casstore check` (findings name the file from the root)
            found = scanner(lambda: Path(f).resolve().relative_to(root).as_posix(), cas.to_dict(), cas.name)
            if found:  # never enters the cache: the add is refused below
                return ("found", cas.name, [x.line() for x in found])
            data = cas.canonical_bytes()
            digest, size = digest_and_size(data)
            lo, hi = cas.recorded_range()
            fields: dict[str, Any] = {"name": cas.name, "digest": digest, "size": size, "entries": len(cas.entries),
                      "recorded_from": lo, "recorded_to": hi, "models": tuple(cas.models())}
            pin = Pin(**fields)
            sig = store(pin, data, writer)
            # the pin's block of the lock as it reads when the lock held no pin of this
            # name or one of other bytes (most adds): written here, beside the other work
            signed = pin if sig is None else Pin(**fields, signatures=(sig,))
            block = format_pin(signed)
            working = os.path.normpath(os.path.join(cwd, f)) == os.path.join(cdir, cas.name + ".json")
            return ("ok", cas.name, digest, size, pin.entries, lo, hi, pin.models,
                    None if sig is None else sig.sig, block,
                    (st.st_size, st.st_mtime_ns, st.st_ino) if working else None)
        except Exception as exc:
            return ("error", exc)

    cache.load()  # the packs' catalog, read once before the threads share it
    if key is not None:
        key.sign_message(b"")  # libsodium and the key loaded once, before the threads
    # parsing and the scan hold the GIL; hashing, zstd and signing release it
    writer = CacheWriter(cache)  # the new objects: one pack, or loose files when few
    outcomes = map_threads(lambda f: one(f, writer), files, jobs)
    failed = writer.close()  # a full disk, a symlink out of the cache: name the cassette
    seen: dict[str, str] = {}
    findings: list[str] = []
    done: list[_Done] = []
    for f, res in zip(files, outcomes, strict=True):
        if res[0] == "ok" and object_key(res[2]) in failed:
            raise StoreError(f"{res[1]}: {failed[object_key(res[2])]}")
        if res[0] == "error":
            raise res[1]
        name = res[1]
        if name in seen:
            raise UsageError(f"{f} and {seen[name]} both hold cassette {name!r}")
        seen[name] = f
        if res[0] == "found":
            findings += res[2]
        else:
            done.append(res)
    if findings:
        raise CheckFailed("\n".join(findings) + f"\nnothing pinned: {len(findings)} secret(s) found. Redact "
                          "them (re-record, or edit the working copy), or accept a false positive in "
                          "casstore.toml with [redaction] allow (see docs/security.md)")
    results = []
    merged = []  # pins of names the lock holds, whose block is written here
    blocks: dict[str, str] = {}  # the workers' blocks of pins pinned as they made them (no Pin built)
    remembered: dict[str, tuple[int, int, int, str]] = {}  # for the next `status`
    keyid, signer = (key.keyid, key.identity) if key is not None else ("", None)
    with project.locked():
        lock = project.load_lock()
        pins = lock.pins
        for _ok, name, digest, size, entries, lo, hi, models, sig_text, block, stamp in done:
            old = pins.get(name)
            if old is None or (old.digest != digest and not old.extra):
                blocks[name] = block
            else:  # the same bytes keep their signatures (merged with this one); unknown keys stay
                sigs = () if sig_text is None or signer is None else (Signature(keyid=keyid, signer=signer, sig=sig_text),)
                new = Pin(name=name, digest=digest, size=size, entries=entries, recorded_from=lo, recorded_to=hi,
                          models=models, signatures=sigs)
                kept = {s.keyid: s for s in (old.signatures if old.digest == digest else ())}
                new = new.with_signatures(list({**kept, **{s.keyid: s for s in sigs}}.values()))
                if old.extra:
                    new = Pin(**{**new.__dict__, "extra": dict(old.extra)})
                merged.append(new)
            results.append(Added(name, digest, size, entries, old is None or old.digest != digest, signer))
            if stamp is not None:
                remembered[name] = (*stamp, digest)
        project.save_lock(lock.with_pins(merged) if merged else lock, blocks)
    from .inspect import remember_working_copies

    remember_working_copies(project, remembered)
    return results


def add_each(project: Project, paths: Sequence[Path], *,
             jobs: int | None = None) -> tuple[list[Added], list[tuple[Path, CasstoreError]]]:
    """:func:`add` of ``paths`` in one go, else of each file on its own (a refused file costs
    its own pin only): what was pinned, and each refused file with its refusal."""
    try:
        return add(project, paths, jobs=jobs), []
    except CasstoreError as exc:
        if len(paths) == 1:
            return [], [(paths[0], exc)]
    added: list[Added] = []
    refused: list[tuple[Path, CasstoreError]] = []
    for path in paths:
        try:
            added += add(project, [path], jobs=jobs)
        except CasstoreError as exc:
            refused.append((path, exc))
    return added, refused
