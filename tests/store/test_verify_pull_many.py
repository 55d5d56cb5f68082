"""`casstore verify` and `pull` over many pins, checked on threads: the same problems as one
check at a time (a bad signature, a corrupt cached copy refetched, a missing one), and a
check that fails unexpectedly never lets the command report success.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from casstore.model.lock import parse_lock
from casstore.store.cache import Cache
from tests.helpers.cassettes import damage_cached, write_cassette
from tests.helpers.commands import run_casstore_subprocess

N = 220  # many chunks on every thread


def _many_pushed(repo: Path, casstore) -> tuple[dict, list[str], Path]:  # type: ignore[no-untyped-def]
    """N cassettes added and pushed: (pins, names, cache); the last 20 added on their own,
    so loose in the cache (the others packed)."""
    for i in range(N):
        if i == N - 20:
            assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
        write_cassette(repo, f"many/c{i:04d}")
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    assert casstore("push", cwd=repo).exit_code == 0
    pins = parse_lock((repo / "casstore.lock").read_bytes()).pins
    return pins, sorted(f"many/c{i:04d}" for i in range(N)), Path(os.environ["CASSTORE_CACHE_DIR"])


def test_verify_of_many_pins_reports_every_problem_once(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    pins, names, cache = _many_pushed(repo, casstore)
    lock = (repo / "casstore.lock").read_text()
    corrupt, forged, gone = pins[names[-30]], pins[names[-1]], pins[names[-50]]
    assert damage_cached(cache, corrupt.digest) == "packed"
    Cache(cache).drop(gone.digest)  # gone from the cache (its pack rewritten without it)
    sig = forged.signatures[0].sig
    bad = ("A" if sig[0] != "A" else "B") + sig[1:]
    (repo / "casstore.lock").write_text(lock.replace(sig, bad))
    r = run_casstore_subprocess("verify", "--json", cwd=repo)
    assert r.returncode == 1, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    assert rep["checked"] == N and [p["name"] for p in rep["problems"]] == [gone.name, forged.name]
    assert "not in the local cache" in rep["problems"][0]["message"]
    assert "bad signature" in rep["problems"][1]["message"]
    assert len(rep["ok"]) == N - 2 and gone.name not in rep["ok"] and corrupt.name in rep["ok"]
    assert rep["refetched"] == [corrupt.name]  # dropped, fetched again from the store
    assert Cache(cache).verified(corrupt.digest, corrupt.size) == "ok"  # the refetched copy


def test_verify_of_named_pins_checks_each_once(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    for name in ("named/a", "named/b", "named/c"):
        write_cassette(repo, name)
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    rep = casstore("verify", "named/b", "named/a", "named/b", "--json", cwd=repo).json
    assert rep["checked"] == 2 and rep["ok"] == ["named/a", "named/b"] and rep["problems"] == []
    assert casstore("verify", "named/zzz", cwd=repo).exit_code == 2  # not pinned: a usage error


@pytest.mark.parametrize("where", ["loose", "packed"])
def test_a_pull_of_many_pins_refetches_every_corrupt_cached_copy(repo: Path, casstore, where: str) -> None:  # type: ignore[no-untyped-def]
    pins, names, cache = _many_pushed(repo, casstore)
    corrupt = [pins[n] for n in (names[-5:] if where == "loose" else names[-30:-25])]
    for pin in corrupt:
        assert damage_cached(cache, pin.digest) == where
    r = casstore("pull", "--json", cwd=repo)
    assert r.exit_code == 0, r.stdout + r.stderr
    want = sorted(p.name for p in corrupt)
    assert r.json["refetched"] == want and r.json["done"] == want, r.stdout
    for pin in corrupt:
        assert f"note: {pin.name}: the cached object was corrupt" in r.stderr
        assert Cache(cache).verified(pin.digest, pin.size) == "ok"  # fetched again


@pytest.fixture
def one_check_fails(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The cache check of the first digest appended to the returned list raises (a bug, a
    MemoryError): what a worker that dies does to its share."""
    failing: list[str] = []
    real = Cache.verified

    def verified(self: Cache, digest: str, size: int) -> str:
        if digest in failing:
            raise MemoryError("a check that dies")
        return real(self, digest, size)

    monkeypatch.setattr(Cache, "verified", verified)
    return failing


def test_a_check_that_dies_never_lets_verify_or_pull_report_success(
        repo: Path, casstore, one_check_fails: list[str]) -> None:  # type: ignore[no-untyped-def]
    pins, names, _cache = _many_pushed(repo, casstore)
    victim = pins[names[N // 2]]
    one_check_fails.append(victim.digest)
    r = casstore("verify", "--json", cwd=repo)
    assert r.exit_code == 1 and [p["name"] for p in r.json["problems"]] == [victim.name], r.stdout
    assert victim.name not in r.json["ok"] and len(r.json["ok"]) == N - 1
    with pytest.raises(MemoryError, match="a check that dies"):
        casstore("pull", cwd=repo)
    one_check_fails.clear()
    assert casstore("verify", cwd=repo).exit_code == 0  # nothing was lost: every pin still verifies
    assert (repo / "casstore.lock").read_text().count("[cassettes.") == N
