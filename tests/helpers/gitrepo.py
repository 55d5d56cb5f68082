"""Helpers for tests that drive real repositories with the real ``git`` command."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from casstore.git.drivers import register
from casstore.store.backends import object_key
from tests.helpers.cassettes import make_cassette
from tests.helpers.commands import git

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


def hexpath(digest: str) -> str:
    """``sha256:abcd…`` -> ``ab/cd…``, the tail of its object (and envelope folder) key."""
    return object_key(digest).removeprefix("objects/sha256/")
