"""``casstore add``: validate, canonicalize, hash, sign, cache and pin cassette files."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import signing
from ..errors import UsageError
from ..model.blob import compress, digest_and_size
from ..model.cassette import load_file
from ..model.lock import Pin
from ..project import Project

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


def add(project: Project, paths: Sequence[Path]) -> list[Added]:
    """Validate, canonicalize, hash, sign, cache and pin each cassette file.

    All or nothing: every file is validated first; the lock is written once at the end.
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
    prepared = []
    seen: dict[str, Path] = {}
    for f in files:
        project.check_inside(f)  # a symlink (or a path) leading out of the repository is refused
        cas = load_file(f)
        if cas.name in seen:
            raise UsageError(f"{f} and {seen[cas.name]} both hold cassette {cas.name!r}")
        seen[cas.name] = f
        data = cas.canonical_bytes()
        digest, size = digest_and_size(data)
        lo, hi = cas.recorded_range()
        pin = Pin(
            name=cas.name, digest=digest, size=size, entries=len(cas.entries),
            recorded_from=lo, recorded_to=hi, models=tuple(cas.models()),
        )
        prepared.append((pin, data))
    results = []
    with project.locked():
        lock = project.load_lock()
        for pin, data in prepared:
            project.cache.put_frame(pin.digest, pin.size, compress(data, project.config.zstd_level))
            old = lock.pins.get(pin.name)
            sigs = list(old.signatures) if old is not None and old.digest == pin.digest else []
            signer = None
            if key is not None:
                sig = key.sign_pin(pin)
                sigs = signing.merge_signatures(sigs, sig)
                project.cache.put_signature(pin.digest, sig.keyid, signing.make_envelope(pin, key, sig))
                signer = key.identity
            new = pin.with_signatures(sigs)
            if old is not None and old.extra:
                new = Pin(**{**new.__dict__, "extra": dict(old.extra)})
            lock = lock.with_pin(new)
            results.append(
                Added(pin.name, pin.digest, pin.size, pin.entries, old is None or old.digest != pin.digest, signer)
            )
        project.save_lock(lock)
    return results
