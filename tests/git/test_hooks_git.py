"""The git hooks in real repositories, fired by the real `git` command.

The hooks are installed by `casstore hooks install` run in this process, so their
INSTALL_PYTHON is this interpreter (sys.executable): the hook runs this casstore. The
environment (isolated cache/config dirs, fake AWS credentials, the loopback S3 endpoint)
is inherited by git and so by the hooks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from casstore.git import hooks as hooks_mod
from tests.helpers.cassettes import leaky, write_cassette
from tests.helpers.commands import REPO, git, run_casstore_subprocess
from tests.helpers.fakes import ago, aws_key, openai_key
from tests.helpers.faultproxy import FaultPlan, FaultProxy


def try_commit(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return git("commit", "-q", "-m", "test commit", *args, cwd=repo, check=False)


def head_files(repo: Path) -> list[str]:
    res = git("ls-tree", "-r", "--name-only", "HEAD", cwd=repo, check=False)
    return res.stdout.split() if res.returncode == 0 else []


@pytest.fixture
def hooked(repo: Path, casstore) -> Path:  # type: ignore[no-untyped-def]
    """`repo` with casstore's hooks installed and casstore's own files committed."""
    r = casstore("hooks", "install", cwd=repo)
    assert r.exit_code == 0, r.stderr
    git("add", "-A", cwd=repo)
    res = try_commit(repo)
    assert res.returncode == 0, res.stdout + res.stderr
    return repo


# -- the scripts ---------------------------------------------------------------------------
def test_shipped_scripts_are_identical_to_the_package_copies() -> None:
    for name, text in hooks_mod.SCRIPTS.items():
        path = REPO / "hooks" / name
        assert path.read_text(encoding="utf-8") == text, f"hooks/{name} differs: run `python -m casstore.git.hooks hooks`"
        assert os.access(path, os.X_OK)
        assert "INSTALL_PYTHON=''" in text


def test_pre_commit_framework_manifest_lists_both_hooks() -> None:
    import yaml

    manifest = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    by_id = {h["id"]: h for h in manifest}
    assert by_id["casstore-check"]["entry"] == "casstore check --staged"
    assert by_id["casstore-check"]["pass_filenames"] is False
    assert by_id["casstore-pre-push"]["stages"] == ["pre-push"]
    assert all(h["language"] == "python" for h in manifest)


# -- pre-commit ----------------------------------------------------------------------------
@pytest.mark.parametrize("make_secret,rule", [(aws_key, "aws-access-key-id"), (openai_key, "openai-key")])
def test_commit_with_a_key_in_a_response_is_refused(hooked: Path, make_secret, rule) -> None:  # type: ignore[no-untyped-def]
    secret = make_secret()
    p = leaky(hooked, "leak", secret, recorded_at=ago(1))
    git("add", str(p), cwd=hooked)
    res = try_commit(hooked)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "tests/cassettes/leak.json" in out and f"({rule})" in out
    assert secret not in out and secret[4:12] not in out
    assert "tests/cassettes/leak.json" not in head_files(hooked)


def test_clean_cassette_commits(hooked: Path) -> None:
    p = write_cassette(hooked, "clean", recorded_at=ago(1))
    git("add", str(p), cwd=hooked)
    res = try_commit(hooked)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "tests/cassettes/clean.json" in head_files(hooked)


def test_stale_cassette_is_refused(hooked: Path) -> None:
    p = write_cassette(hooked, "stale", recorded_at=ago(200))
    git("add", str(p), cwd=hooked)
    res = try_commit(hooked)
    assert res.returncode != 0
    assert "tests/cassettes/stale.json: stale: entries were recorded 200 days ago" in res.stdout + res.stderr
    assert "tests/cassettes/stale.json" not in head_files(hooked)


def test_no_verify_gets_around_it_and_check_in_ci_catches_it(hooked: Path, tmp_path: Path) -> None:
    secret = aws_key()
    p = leaky(hooked, "sneaky", secret, recorded_at=ago(1))
    git("add", str(p), cwd=hooked)
    assert try_commit(hooked).returncode != 0
    res = try_commit(hooked, "--no-verify")
    assert res.returncode == 0, res.stderr
    # CI: a fresh clone, `casstore check` as a real process
    ci = tmp_path / "ci"
    git("clone", "-q", str(hooked), str(ci), cwd=tmp_path)
    env = dict(os.environ, CI="1")
    r = run_casstore_subprocess("check", cwd=ci, env=env)
    assert r.returncode == 1
    assert "tests/cassettes/sneaky.json: secret (aws-access-key-id)" in r.stdout
    assert secret not in r.stdout + r.stderr


def test_hook_reads_what_is_staged(hooked: Path) -> None:
    secret = aws_key()
    p = leaky(hooked, "c", secret, recorded_at=ago(1))
    git("add", str(p), cwd=hooked)
    write_cassette(hooked, "c", recorded_at=ago(1))  # clean in the working tree only
    assert try_commit(hooked).returncode != 0
    git("add", str(p), cwd=hooked)  # stage the clean one
    leaky(hooked, "c", secret, recorded_at=ago(1))  # the leak is only in the working tree now
    res = try_commit(hooked)
    assert res.returncode == 0, res.stdout + res.stderr


# -- installing --------------------------------------------------------------------------------
def test_existing_hook_is_chained_never_clobbered_and_install_is_idempotent(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    hooks_dir = repo / ".git" / "hooks"
    own = hooks_dir / "pre-commit"
    own.write_text("#!/bin/sh\necho 'team hook ran'\nexit ${TEAM_HOOK_EXIT:-0}\n")
    own.chmod(0o755)
    r = casstore("hooks", "install", cwd=repo)
    assert "pre-commit: installed; the existing hook now runs first as pre-commit.pre-casstore" in r.stdout
    first = own.read_text()
    r = casstore("hooks", "install", cwd=repo)
    assert "pre-commit: already installed" in r.stdout and "pre-push: already installed" in r.stdout
    assert own.read_text() == first
    assert (hooks_dir / "pre-commit.pre-casstore").read_text().startswith("#!/bin/sh\necho 'team hook ran'")
    assert f"INSTALL_PYTHON={sys.executable}" in first or f"INSTALL_PYTHON='{sys.executable}'" in first

    git("add", "-A", cwd=repo)
    res = try_commit(repo)
    assert res.returncode == 0 and "team hook ran" in res.stdout + res.stderr
    # the chained hook failing stops the commit before casstore runs
    p = write_cassette(repo, "x", recorded_at=ago(1))
    git("add", str(p), cwd=repo)
    res = subprocess.run(["git", "commit", "-q", "-m", "x"], cwd=repo, capture_output=True, text=True,
                         env=dict(os.environ, TEAM_HOOK_EXIT="3"))
    assert res.returncode != 0 and "checked" not in res.stdout

    r = casstore("hooks", "install", "--uninstall", cwd=repo)
    assert "pre-commit: restored the previous hook" in r.stdout
    assert own.read_text().startswith("#!/bin/sh\necho 'team hook ran'")
    assert not (hooks_dir / "pre-push").exists() and not (hooks_dir / "pre-commit.pre-casstore").exists()


def test_install_refuses_when_both_a_hook_and_a_chained_hook_exist(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    d = repo / ".git" / "hooks"
    (d / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (d / "pre-commit.pre-casstore").write_text("#!/bin/sh\nexit 0\n")
    r = casstore("hooks", "install", cwd=repo)
    assert r.exit_code == 2 and "refusing to overwrite" in r.stderr
    assert (d / "pre-commit").read_text() == "#!/bin/sh\nexit 0\n"


def test_core_hooks_path_is_honoured(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    git("config", "core.hooksPath", ".githooks", cwd=repo)
    r = casstore("hooks", "install", cwd=repo)
    assert r.exit_code == 0
    assert (repo / ".githooks" / "pre-commit").is_file() and not (repo / ".git/hooks/pre-commit").exists()
    git("add", "-A", cwd=repo)
    assert try_commit(repo).returncode == 0
    p = leaky(repo, "leak", aws_key(), recorded_at=ago(1))
    git("add", str(p), cwd=repo)
    res = try_commit(repo)
    assert res.returncode != 0 and "(aws-access-key-id)" in res.stdout + res.stderr


def test_hooks_install_outside_git_is_a_usage_error(tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "casstore.toml").write_text('cassette_dir = "tests/cassettes"\n')
    r = casstore("hooks", "install", cwd=tmp_path)
    assert r.exit_code == 2 and "not inside a git repository" in r.stderr


# -- pre-push --------------------------------------------------------------------------------
@pytest.fixture
def counting_s3(s3_server, s3_url: str, monkeypatch):  # type: ignore[no-untyped-def]
    """The moto server behind a counting proxy on loopback; the hooks' AWS_ENDPOINT_URL points at the proxy."""
    proxy = FaultProxy(s3_server.endpoint).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    monkeypatch.setenv("CASSTORE_RETRY_ATTEMPTS", "1")
    try:
        yield proxy, s3_url
    finally:
        proxy.stop()


def _objects(s3_server, s3_url: str) -> list[str]:  # type: ignore[no-untyped-def]
    bucket = s3_url.split("/")[2]
    res = s3_server.client().list_objects_v2(Bucket=bucket)
    return sorted(o["Key"] for o in res.get("Contents", []))


def test_push_uploads_pinned_objects_and_a_push_without_new_pins_makes_no_request(
        tmp_path: Path, casstore, s3_server, counting_s3) -> None:  # type: ignore[no-untyped-def]
    proxy, url = counting_s3
    root = tmp_path / "work"
    root.mkdir()
    git("init", "-q", cwd=root)
    assert casstore("init", "--remote", url, cwd=root).exit_code == 0
    assert casstore("hooks", "install", cwd=root).exit_code == 0
    bare = tmp_path / "origin.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    git("remote", "add", "origin", str(bare), cwd=root)

    p = write_cassette(root, "triage", recorded_at=ago(1))
    r = casstore("add", str(p), cwd=root)
    assert r.exit_code == 0
    digest = r.stdout.split()[2]  # "pinned triage sha256:abcd… …"
    git("add", "-A", cwd=root)
    seen = proxy.counters.seen
    assert try_commit(root).returncode == 0
    assert proxy.counters.seen == seen, "the pre-commit check found the object in the cache"

    res = git("push", "-q", "origin", "main", cwd=root, check=False)
    assert res.returncode == 0, res.stderr
    keys = _objects(s3_server, url)
    objs = [k for k in keys if "/objects/sha256/" in k]
    assert len(objs) == 1 and objs[0].split("/")[-2] == digest[7:9]
    assert any("/signatures/sha256/" in k for k in keys)
    assert "uploaded 1" in res.stderr

    # a push that changes no pins: not a single request reaches the store
    (root / "README.md").write_text("hello\n")
    git("add", "README.md", cwd=root)
    assert try_commit(root).returncode == 0
    seen = proxy.counters.seen
    res = git("push", "-q", "origin", "main", cwd=root, check=False)
    assert res.returncode == 0, res.stderr
    git("switch", "-q", "-c", "feature", cwd=root)
    (root / "README.md").write_text("hello again\n")
    git("commit", "-qam", "readme", cwd=root)
    res = git("push", "-q", "origin", "feature", cwd=root, check=False)  # a new branch, no new pins
    assert res.returncode == 0, res.stderr
    assert proxy.counters.seen == seen

    # a failing upload refuses the push; the remote branch does not move
    q = write_cassette(root, "second", recorded_at=ago(1))
    assert casstore("add", str(q), cwd=root).exit_code == 0
    git("add", "-A", cwd=root)
    assert try_commit(root).returncode == 0
    proxy.set_plan(FaultPlan(share=1.0, kinds=("500",), methods=("PUT",)))
    before = git("rev-parse", "feature", cwd=bare).stdout
    res = git("push", "-q", "origin", "feature", cwd=root, check=False)
    assert res.returncode != 0
    assert "push refused" in res.stderr and "second" in res.stderr
    assert git("rev-parse", "feature", cwd=bare).stdout == before
    proxy.set_plan(FaultPlan())
    res = git("push", "-q", "origin", "feature", cwd=root, check=False)
    assert res.returncode == 0, res.stderr
    assert len([k for k in _objects(s3_server, url) if "/objects/sha256/" in k]) == 2


def test_push_of_a_pin_whose_object_nobody_has_is_refused(tmp_path: Path, casstore, isolated_user: Path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    root = tmp_path / "work"
    root.mkdir()
    git("init", "-q", cwd=root)
    assert casstore("init", cwd=root).exit_code == 0  # local store .casstore/store
    assert casstore("hooks", "install", cwd=root).exit_code == 0
    bare = tmp_path / "origin.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    git("remote", "add", "origin", str(bare), cwd=root)
    p = write_cassette(root, "lost", recorded_at=ago(1))
    assert casstore("add", str(p), cwd=root).exit_code == 0
    git("add", "-A", cwd=root)
    assert try_commit(root).returncode == 0
    shutil.rmtree(isolated_user / "cache")  # neither cached nor pushed
    res = git("push", "-q", "origin", "main", cwd=root, check=False)
    assert res.returncode != 0
    assert "lost" in res.stderr and "not in the local cache" in res.stderr


def test_pre_push_reads_the_range_from_the_pre_commit_framework_env(repo: Path, casstore, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    p = write_cassette(repo, "fw", recorded_at=ago(1))
    assert casstore("add", str(p), cwd=repo).exit_code == 0
    git("add", "-A", cwd=repo)
    git("commit", "-q", "--no-verify", "-m", "pin", cwd=repo)
    head = git("rev-parse", "HEAD", cwd=repo).stdout.strip()
    store = repo / ".casstore" / "store"
    monkeypatch.setenv("PRE_COMMIT_FROM_REF", "0" * 40)
    monkeypatch.setenv("PRE_COMMIT_TO_REF", head)
    r = casstore("hooks", "pre-push", "origin", "ignored-url", "-q", cwd=repo, input="")
    assert r.exit_code == 0, r.stderr
    assert "uploaded 1" in r.stderr and len(list((store / "objects").rglob("*"))) >= 1
    # the same range again, seen from the remote side: nothing new, the store is not touched
    monkeypatch.setenv("PRE_COMMIT_FROM_REF", head)
    (repo / "x.txt").write_text("x")
    git("add", "x.txt", cwd=repo)
    git("commit", "-q", "--no-verify", "-m", "x", cwd=repo)
    monkeypatch.setenv("PRE_COMMIT_TO_REF", git("rev-parse", "HEAD", cwd=repo).stdout.strip())
    import shutil

    shutil.rmtree(store)
    r = casstore("hooks", "pre-push", "origin", cwd=repo, input="")
    assert r.exit_code == 0 and r.stderr == "" and not store.exists()
