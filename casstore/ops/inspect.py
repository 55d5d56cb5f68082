"""``casstore ls``, ``show`` and ``status``: what the lock pins, one cassette in detail, and
how the cache, the store and the working copies compare with the lock."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

from ..errors import CasstoreError, RemoteError, UsageError
from ..model.canonical import canonical_json, loads_bounded, sha256_digest
from ..model.cassette import MAX_CASSETTE_BYTES, Cassette
from ..model.fsutil import atomic_write
from ..model.names import not_pinned
from ..project import Project
from ..store import signing
from ..store.backends import digest_from_key, object_key

__all__ = ["ls", "show", "status", "remember_working_copies"]


def ls(project: Project, *, remote: bool = False) -> list[dict[str, Any]]:
    lock = project.load_lock()
    if remote:
        by_digest: dict[str, list[str]] = {}
        for p in lock.pins.values():
            by_digest.setdefault(p.digest, []).append(p.name)
        rows = []
        for inf in project.store.list("objects/"):
            d = digest_from_key(inf.key)
            if d is None:
                continue
            rows.append({"digest": d, "stored_bytes": inf.size, "pinned_as": sorted(by_digest.get(d, []))})
        return rows
    return [
        {
            "name": p.name, "digest": p.digest, "size": p.size, "entries": p.entries,
            "models": list(p.models), "recorded_from": p.recorded_from, "recorded_to": p.recorded_to,
            "signers": [s.signer for s in p.signatures], "cached": project.cache.has(p.digest),
        }
        for p in lock.pins.values()
    ]


def show(project: Project, name: str) -> dict[str, Any]:
    lock = project.load_lock()
    pin = lock.pins.get(name)
    if pin is None:
        raise UsageError(not_pinned([name], lock.pins))
    trusted = project.trusted_keys()
    info: dict[str, Any] = {"name": name, **pin.to_dict()}
    try:
        info["verified_signers"] = signing.verify_pin(pin, trusted, required=project.signatures_required(trusted))
    except CasstoreError as exc:
        info["signature_error"] = str(exc)
    try:
        cas = project.load_pinned(pin, trusted) if "signature_error" not in info else None
    except CasstoreError as exc:
        info["object_error"] = str(exc)
        cas = None
    if cas is not None:
        info["meta"] = cas.meta
        info["redaction"] = cas.redaction
        calls = [
            {"seq": e.get("seq", i), "kind": e.get("kind"), "target": e.get("target"), "identity": e.get("identity")}
            for i, e in enumerate(cas.entries)
        ]
        # what is printed is redacted again (a pin made before a rule covered its target);
        # imported here: the rules' patterns are not `status`'s to compile
        from ..model.redaction import RuleSet
        from ..model.scrub import redact_entries

        info["calls"], _hits = redact_entries(calls, RuleSet.from_config(project.config.redaction))
    return info


def _memo_path(project: Project) -> str:
    key = hashlib.sha256(os.fsencode(project.root.resolve())).hexdigest()[:24]
    return os.path.join(project.cache.root, "worktrees", f"{key}.json")


def _load_memo(path: str) -> dict[str, list[Any]]:
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read())
    except (OSError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) and data.get("v") == 1 else None
    return files if isinstance(files, dict) else {}


def _save_memo(path: str, files: dict[str, list[Any]]) -> None:
    with contextlib.suppress(CasstoreError):  # a read-only cache only costs the next status time
        atomic_write(path, json.dumps({"v": 1, "files": files}).encode(), durable=False)


def status(project: Project, *, remote: bool = True) -> dict[str, Any]:
    """How cache, store and working copies compare with the lock. A working copy's digest is
    remembered by (size, mtime, inode) like git's index, for files older than 50 ms (git's
    "racily clean" rule)."""
    lock = project.load_lock()
    rows = []
    keys = {p.name: object_key(p.digest) for p in lock.pins.values()}  # once per pin, not per use
    pushed: dict[str, int] = {}
    remote_error = None
    if remote and lock.pins:
        try:
            pushed = project.store.exists_many(keys.values())
        except RemoteError:
            raise  # a remote that cannot be used is configuration (exit 2), not "unreachable"
        except CasstoreError as exc:
            remote_error = str(exc)
    pinned_names = set(lock.pins)
    memo_path = _memo_path(project)
    memo = _load_memo(memo_path)
    fresh: dict[str, list[Any]] = {}
    cutoff = time.time_ns() - 50_000_000
    cdir = os.fspath(project.cassette_dir)
    cache = project.cache
    for p in lock.pins.values():  # names in a parsed lock are valid: a plain join is safe
        wc = os.path.join(cdir, p.name + ".json")
        state = "missing"
        try:
            st = os.stat(wc)
        except OSError:
            st = None
        if st is not None and stat.S_ISREG(st.st_mode):
            stamp = [st.st_size, st.st_mtime_ns, st.st_ino]
            known = memo.get(p.name)
            digest: str | None
            if isinstance(known, list) and len(known) == 4 and known[:3] == stamp and isinstance(known[3], str):
                digest = known[3]
            else:
                digest = _working_digest(wc, p.digest)
            if digest is not None and st.st_mtime_ns < cutoff:
                fresh[p.name] = [*stamp, digest]
            state = "invalid" if digest is None else "same" if digest == p.digest else "modified"
        rows.append({
            "name": p.name, "digest": p.digest, "cached": cache.has(p.digest),
            "pushed": None if remote_error or not remote else keys[p.name] in pushed,
            "working_copy": state,
        })
    if fresh != memo:
        _save_memo(memo_path, fresh)
    untracked = [n for n in _working_copies(cdir) if n not in pinned_names]
    return {"remote": project.remote_url, "remote_error": remote_error, "pins": rows, "unpinned": untracked}


def remember_working_copies(project: Project, digests: dict[str, tuple[int, int, int, str]]) -> None:
    """Remember the digests ``add`` computed for working copies (name -> size, mtime_ns, inode
    and digest), so that the status after an add does not read them again (best effort)."""
    if not digests:
        return
    memo_path = _memo_path(project)
    memo = _load_memo(memo_path)
    cutoff = time.time_ns() - 50_000_000
    new = {name: list(row) for name, row in digests.items() if row[1] < cutoff}
    if all(memo.get(name) == row for name, row in new.items()):
        return
    memo.update(new)
    _save_memo(memo_path, memo)


def _working_digest(path: str, pinned: str) -> str | None:
    """The digest of the cassette at ``path``; None if it cannot be read or is not valid. A
    file whose canonical form is the pinned content was validated when pinned: not again."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        if len(raw) > MAX_CASSETTE_BYTES:
            return None
        parsed = loads_bounded(raw, what=path)
        if sha256_digest(canonical_json(parsed)) == pinned:
            return pinned
        return sha256_digest(Cassette.from_dict(parsed, source=path).canonical_bytes())
    except (OSError, ValueError, CasstoreError):
        return None


def _working_copies(top: str) -> list[str]:
    """The names of the ``*.json`` entries under ``top``, in path order (links to folders not followed)."""
    found = [p.relative_to(top).as_posix() for p in sorted(Path(top).rglob("*.json"))]
    return [path if path.endswith("/.json") or path == ".json" else path[:-5] for path in found]
