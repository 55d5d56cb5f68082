"""Helpers for tests that drive real repositories with the real ``git`` command."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from casstore.git.drivers import register
from tests.conftest import git, make_cassette

TRACKED = ["casstore.toml", "casstore.lock", ".gitignore", ".gitattributes", ".casstore/trusted_keys"]


def commit(repo: Path, message: str) -> str:
    """Commit the casstore files (not the working copies of cassettes); return the sha."""
    present = [p for p in TRACKED if (repo / p).exists()]
    git("add", "--", *present, cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", message, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo).stdout.strip()


def pin(casstore, repo: Path, name: str, *, answer: str | None = None, n: int = 2,  # type: ignore[no-untyped-def]
        prompts: list[str] | None = None) -> str:
    """Record (write) cassette ``name`` and ``casstore add`` it; return its digest.

    ``answer`` changes every response; ``prompts`` changes the requests (and so identities).
    """
    data = make_cassette(name, n=n, body={"choices": [{"message": {"content": answer}}]} if answer else None)
    if prompts is not None:
        import hashlib

        for e, prompt in zip(data["entries"], prompts, strict=True):
            e["request"]["body"]["messages"][0]["content"] = prompt
            e["identity"] = hashlib.sha256(json.dumps(e["request"], sort_keys=True).encode()).hexdigest()
    path = repo / "tests" / "cassettes" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    r = casstore("add", "--json", str(path), cwd=repo)
    assert r.exit_code == 0, r.stderr
    return r.json[0]["digest"]


def setup_drivers(repo: Path) -> None:
    changed = register(repo)
    assert changed, "a fresh repository had nothing to register"
    assert register(repo) == [], "register is not idempotent"


def age_tree(root: Path, seconds: float) -> None:
    """Set the mtime of every file under ``root`` ``seconds`` into the past."""
    t = time.time() - seconds
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            os.utime(Path(dirpath) / f, (t, t))


def age_s3_bucket(bucket: str, seconds: float, *, keep_young: set[str] = frozenset()) -> int:  # type: ignore[assignment]
    """Make the moto server report objects as ``seconds`` old (its LastModified).

    The moto server runs in this process; moving a key's stored timestamp back is the S3
    counterpart of ``os.utime`` on a local store. Keys containing any string of
    ``keep_young`` keep their real timestamps. Returns how many keys were aged.
    """
    import datetime as dt

    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    past = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - dt.timedelta(seconds=seconds)
    aged = 0
    for key in backend.buckets[bucket].keys.values():
        if any(y in key.name for y in keep_young):
            continue
        key.last_modified = past
        aged += 1
    return aged


def hexpath(digest: str) -> str:
    """``sha256:abcd…`` -> ``ab/cd…``, the tail of its object (and envelope folder) key."""
    h = digest.split(":", 1)[1]
    return f"{h[:2]}/{h[2:]}"
