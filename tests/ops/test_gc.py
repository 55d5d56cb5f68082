"""`casstore gc`: history-aware, grace-period sweeping of the cache and the store.

The repositories are real (the `git` command makes every branch, tag and ref); the stores
are a local folder and the moto S3 server on loopback. Objects are made old the way a
store would see them: os.utime locally, the server's LastModified on S3.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from casstore.model.lock import parse_lock
from casstore.store.backends import open_store
from tests.helpers.commands import git
from tests.helpers.gitrepo import age_tree, commit, hexpath, pin
from tests.helpers.s3 import S3Server, age_s3_bucket

DAY = 86400


def _push(casstore, repo: Path) -> None:  # type: ignore[no-untyped-def]
    r = casstore("push", "-q", cwd=repo)
    assert r.exit_code == 0, r.stderr


def build_history(casstore, repo: Path) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Three branches, a tag on a deleted branch, deleted branches, a remote-tracking ref,
    a staged and a working lock. Returns label -> digest; every object is pushed except X."""
    d: dict[str, str] = {}
    d["A1"] = pin(casstore, repo, "a", answer="a1")
    commit(repo, "a1")
    _push(casstore, repo)
    d["A2"] = pin(casstore, repo, "a", answer="a2")  # A1 is now only in main's history
    commit(repo, "a2")
    _push(casstore, repo)

    def branch(name: str, label: str, cassette: str, *, push: bool = True) -> str:
        git("checkout", "-q", "-b", name, "main", cwd=repo)
        d[label] = pin(casstore, repo, cassette, answer=label)
        sha = commit(repo, label)
        if push:
            _push(casstore, repo)
        git("checkout", "-q", "main", cwd=repo)
        return sha

    branch("feat", "B", "b")
    branch("exp", "C", "c")
    branch("release", "T", "t")
    git("tag", "v1", "release", cwd=repo)
    shared = branch("shared-work", "R", "r")
    git("update-ref", "refs/remotes/origin/shared-work", shared, cwd=repo)
    branch("gone", "G", "g")
    branch("gone-young", "Y", "y")
    branch("gone-unpushed", "X", "x", push=False)
    for name in ("release", "shared-work", "gone", "gone-young", "gone-unpushed"):
        git("branch", "-q", "-D", name, cwd=repo)
    # the staged lock pins S; the working lock (which no longer has S) pins W
    head_lock = (repo / "casstore.lock").read_text()
    d["S"] = pin(casstore, repo, "s", answer="S")
    _push(casstore, repo)
    git("add", "casstore.lock", cwd=repo)
    (repo / "casstore.lock").write_text(head_lock)
    d["W"] = pin(casstore, repo, "w", answer="W")
    _push(casstore, repo)
    return d


def _store_digests(store_url: str, repo: Path) -> set[str]:
    store = open_store(store_url, base=repo)
    return {"sha256:" + i.key.split("/", 2)[2].replace("/", "") for i in store.list("objects/")}


def _envelopes(store_url: str, repo: Path, digest: str) -> list[str]:
    return [i.key for i in open_store(store_url, base=repo).list(f"signatures/sha256/{hexpath(digest)}/")]


def _check_gc(casstore, repo: Path, store_url: str, cache: Path, d: dict[str, str], age) -> None:  # type: ignore[no-untyped-def]
    every = set(d.values())
    assert _store_digests(store_url, repo) == every - {d["X"]}
    assert _envelopes(store_url, repo, d["G"]), "pushed objects carry their signature envelopes"
    age(young={d["Y"]})
    age_tree(cache, 10 * DAY)
    age_tree(cache / "objects" / "sha256" / hexpath(d["Y"]).split("/")[0], 0)  # Y: young in the cache too

    dry = casstore("gc", "--dry-run", "--remote", cwd=repo)
    assert dry.exit_code == 0, dry.stderr
    listed = [line for line in dry.stdout.splitlines() if line.startswith("would delete ")]
    assert {(line.split()[2], line.split()[3]) for line in listed[:-1]} == {("store", d["G"]), ("cache", d["G"])}
    sizes = [int(line.split()[4]) for line in listed[:-1]]
    assert f"would delete 2 object(s), {sum(sizes)} bytes" in listed[-1]
    assert "1 only in the cache" in dry.stdout  # X: never pushed, kept
    assert _store_digests(store_url, repo) == every - {d["X"]}, "a dry run deleted something"

    real = casstore("gc", "--remote", "--json", cwd=repo)
    assert real.exit_code == 0, real.stderr
    rep = real.json
    assert sorted((i["where"], i["digest"]) for i in rep["deleted"]) == [("cache", d["G"]), ("store", d["G"])]
    assert rep["kept_young"] >= 1 and rep["kept_unpushed"] == 1
    assert _store_digests(store_url, repo) == every - {d["X"], d["G"]}
    assert _envelopes(store_url, repo, d["G"]) == []
    assert not (cache / "objects" / "sha256" / hexpath(d["G"])).exists()
    assert (cache / "objects" / "sha256" / hexpath(d["X"])).exists()

    # with no grace period the young orphan goes too; nothing any ref reaches ever does
    zero = casstore("gc", "--remote", "--grace", "0", "--json", cwd=repo)
    assert zero.exit_code == 0, zero.stderr
    assert {i["digest"] for i in zero.json["deleted"]} == {d["Y"]}
    assert _store_digests(store_url, repo) == every - {d["X"], d["G"], d["Y"]}
    again = casstore("gc", "--remote", "--grace", "0", "--json", cwd=repo)
    assert again.json["deleted"] == []
    left = _store_digests(store_url, repo)
    for ref in ("main", "main~1", "feat", "exp", "v1", "origin/shared-work", ":0"):  # :0 = the index
        spec = f"{ref}:casstore.lock" if ref != ":0" else ":0:casstore.lock"
        pinned = parse_lock(git("show", spec, cwd=repo).stdout).digests()
        assert pinned and pinned <= left, ref
    assert d["W"] in left and d["S"] in left
    assert casstore("verify", "--remote", cwd=repo).exit_code == 0


def test_gc_on_the_local_store(repo: Path, casstore, isolated_user: Path) -> None:  # type: ignore[no-untyped-def]
    d = build_history(casstore, repo)
    store = repo / ".casstore" / "store"

    def age(young: set[str]) -> None:
        age_tree(store, 10 * DAY)
        for digest in young:
            age_tree(store / "objects" / "sha256" / hexpath(digest).split("/")[0], 0)
            age_tree(store / "signatures" / "sha256" / hexpath(digest), 0)

    _check_gc(casstore, repo, ".casstore/store", isolated_user / "cache", d, age)


def test_gc_on_s3(tmp_path: Path, casstore, s3_url: str, s3_server: S3Server, isolated_user: Path) -> None:  # type: ignore[no-untyped-def]
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    assert casstore("init", "--remote", s3_url, cwd=repo).exit_code == 0
    d = build_history(casstore, repo)
    bucket = s3_url.split("/")[2]

    def age(young: set[str]) -> None:
        assert age_s3_bucket(bucket, 10 * DAY, keep_young={hexpath(y).replace("/", "/") for y in young}) > 0

    _check_gc(casstore, repo, s3_url, isolated_user / "cache", d, age)


def test_gc_keeps_everything_without_the_grace_period_passing(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    pin(casstore, repo, "a", answer="1")
    commit(repo, "1")
    _push(casstore, repo)
    pin(casstore, repo, "a", answer="2")
    _push(casstore, repo)
    git("checkout", "-q", "casstore.lock", cwd=repo)  # the re-pin is abandoned: its object is an orphan
    r = casstore("gc", "--remote", cwd=repo)  # default grace 24h: the orphan is minutes old
    assert r.exit_code == 0, r.stderr
    assert "deleted 0 object(s), 0 bytes" in r.stdout and "younger than 24h" in r.stdout


# "\u0667d": \d and int() take Unicode digits (it was read as 7 days); 400 ones overflowed the float cutoff
@pytest.mark.parametrize("bad", ["3x", "-1h", "1.5h", "h", "", "\u0667d", "1" * 400 + "s"])
def test_gc_refuses_bad_durations(repo: Path, casstore, bad: str) -> None:  # type: ignore[no-untyped-def]
    r = casstore("gc", "--grace", bad, cwd=repo)
    assert r.exit_code == 2 and "invalid duration" in r.stderr and "Traceback" not in r.stderr


def test_gc_refuses_a_shallow_clone(repo: Path, casstore, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for i in range(3):
        pin(casstore, repo, "a", answer=str(i))
        commit(repo, str(i))
    clone = tmp_path / "shallow"
    git("clone", "-q", "--depth", "1", f"file://{repo}", str(clone), cwd=tmp_path)
    r = casstore("gc", "--dry-run", cwd=clone)
    assert r.exit_code == 2 and "history is incomplete" in r.stderr and "--unshallow" in r.stderr


def test_gc_keeps_what_other_worktrees_pin(tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    """A linked worktree's detached commits and uncommitted lock count, from either worktree."""
    main, wt, shared = tmp_path / "main", tmp_path / "wt", tmp_path / "shared-store"
    main.mkdir()
    git("init", "-q", cwd=main)
    assert casstore("init", "--remote", str(shared), cwd=main).exit_code == 0
    pin(casstore, main, "a")
    commit(main, "a")
    git("worktree", "add", "-q", "-b", "side", str(wt), cwd=main)
    d = {"w1": pin(casstore, wt, "w1", answer="on branch side")}
    commit(wt, "w1")
    git("checkout", "-q", "--detach", cwd=wt)
    d["w2"] = pin(casstore, wt, "w2", answer="detached commit")
    commit(wt, "w2")
    d["w3"] = pin(casstore, wt, "w3", answer="uncommitted")
    _push(casstore, wt)
    orphan = pin(casstore, main, "o", answer="orphan")
    _push(casstore, main)
    git("checkout", "-q", "casstore.lock", cwd=main)
    for where in (main, wt):
        r = casstore("gc", "--remote", "--grace", "0", "--json", cwd=where)
        assert r.exit_code == 0, r.stderr
        left = _store_digests(str(shared), where)
        assert set(d.values()) <= left and orphan not in left


def test_gc_outside_git_is_one_clear_line(tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    assert casstore("init", cwd=tmp_path).exit_code == 0
    r = casstore("gc", "--dry-run", cwd=tmp_path)
    assert r.exit_code == 2 and "is not inside a git repository" in r.stderr and "Traceback" not in r.stderr


def test_gc_removes_temp_files_of_killed_writes(repo: Path, casstore, isolated_user: Path) -> None:  # type: ignore[no-untyped-def]
    pin(casstore, repo, "a", answer="1")
    commit(repo, "1")
    _push(casstore, repo)
    cache_dir = isolated_user / "cache" / "objects" / "sha256" / "ab"
    store_dir = repo / ".casstore" / "store" / "objects" / "sha256" / "cd"
    old_tmp, young_tmp, store_tmp = cache_dir / ".x.abc.tmp", cache_dir / ".y.def.tmp", store_dir / ".z.ghi.tmp"
    for p in (old_tmp, young_tmp, store_tmp):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"half a frame")
    for p in (old_tmp, store_tmp):
        os.utime(p, (time.time() - 2 * 3600, time.time() - 2 * 3600))
    r = casstore("gc", "--dry-run", cwd=repo)
    assert r.exit_code == 0 and "would delete 1 temp file(s)" in r.stdout, r.stdout
    assert old_tmp.exists()
    r = casstore("gc", cwd=repo)  # the cache only: the store's temp file stays
    assert r.exit_code == 0 and "deleted 1 temp file(s)" in r.stdout, r.stdout
    assert not old_tmp.exists() and young_tmp.exists() and store_tmp.exists()
    r = casstore("gc", "--remote", cwd=repo)
    assert r.exit_code == 0 and "deleted 1 temp file(s)" in r.stdout, r.stdout
    assert not store_tmp.exists() and young_tmp.exists()
    assert casstore("verify", "--remote", cwd=repo).exit_code == 0


def test_gc_keeps_what_every_stash_entry_pins(repo: Path, casstore, isolated_user: Path) -> None:  # type: ignore[no-untyped-def]
    """stash@{1} and older live only in refs/stash's reflog: they are roots like refs/stash."""
    pin(casstore, repo, "base", answer="base")
    commit(repo, "base")
    _push(casstore, repo)
    stashed = {}
    for label in ("v1", "v2", "v3"):  # stash@{2} = v1 ... stash@{0} = v3
        stashed[label] = pin(casstore, repo, "a", answer=label)
        _push(casstore, repo)
        git("stash", "-q", cwd=repo)
    assert len(git("stash", "list", cwd=repo).stdout.splitlines()) == 3
    age_tree(repo / ".casstore" / "store", 10 * DAY)
    age_tree(isolated_user / "cache", 10 * DAY)
    r = casstore("gc", "--remote", "--grace", "1h", cwd=repo)
    assert r.exit_code == 0, r.stderr
    kept = _store_digests(".casstore/store", repo)
    assert set(stashed.values()) <= kept, r.stdout
    git("stash", "drop", "-q", "stash@{2}", cwd=repo)  # v1 is no longer pinned by anything
    r = casstore("gc", "--remote", "--grace", "1h", cwd=repo)
    assert r.exit_code == 0, r.stderr
    kept = _store_digests(".casstore/store", repo)
    assert stashed["v1"] not in kept and {stashed["v2"], stashed["v3"]} <= kept
    git("stash", "apply", "-q", "stash@{1}", cwd=repo)  # v2 comes back and pulls from the store
    r = casstore("pull", "--frozen", cwd=repo)
    assert r.exit_code == 0, r.stderr
