"""casstore's hooks run by the real pre-commit framework (https://pre-commit.com).

The hook definitions come from casstore's own ``.pre-commit-hooks.yaml``: entry, stages,
pass_filenames and always_run are copied into a ``repo: local`` config with
``language: system``, so pre-commit runs the installed casstore instead of building a
virtualenv from PyPI (the tests use no network). Everything else is what a user has:
``pre-commit install --hook-type pre-push``, then ``git push`` to a bare repository.

pre-commit hands the hook the pushed range in PRE_COMMIT_FROM_REF / PRE_COMMIT_TO_REF, but
on a push that holds the root commit (a repository's first push) it passes no range at all
(only PRE_COMMIT_LOCAL_BRANCH and PRE_COMMIT_REMOTE_NAME): the hook must still upload every
pin of the pushed commits.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers.cassettes import write_cassette
from tests.helpers.commands import REPO, git

pytestmark = pytest.mark.skipif(shutil.which("pre-commit") is None and
                                not (Path(sys.executable).parent / "pre-commit").exists(),
                                reason="pre-commit is in the dev extra")


def _precommit_exe() -> str:
    local = Path(sys.executable).parent / "pre-commit"
    return str(local) if local.exists() else str(shutil.which("pre-commit"))


def _local_config() -> str:
    """casstore's .pre-commit-hooks.yaml as a `repo: local` config (language: system)."""
    manifest = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    hooks = []
    for h in manifest:
        hook = {k: v for k, v in h.items() if k in ("id", "name", "entry", "pass_filenames", "always_run", "stages")}
        hook["language"] = "system"
        hooks.append(hook)
    return yaml.safe_dump({"repos": [{"repo": "local", "hooks": hooks}]}, sort_keys=False)


def _objects(store: Path) -> set[str]:
    base = store / "objects" / "sha256"
    return {"sha256:" + p.parent.name + p.name for p in base.glob("*/*")} if base.exists() else set()


def _pinned(repo: Path, env: dict[str, str]) -> set[str]:
    res = subprocess.run([sys.executable, "-m", "casstore.cli", "ls", "--json"], cwd=repo, env=env,
                         capture_output=True, text=True, check=True)
    return {row["digest"] for row in yaml.safe_load(res.stdout)}


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def framework_repo(tmp_path: Path, isolated_user: Path) -> tuple[Path, Path, dict[str, str]]:
    """A repository using the pre-commit framework's pre-push hook, a bare origin, a folder store."""
    env = os.environ.copy()
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    env.pop("PRE_COMMIT", None)
    work, store, origin = tmp_path / "work", tmp_path / "shared-store", tmp_path / "origin.git"
    work.mkdir()
    git("init", "-q", "--bare", str(origin), cwd=tmp_path)
    git("init", "-q", cwd=work)
    git("remote", "add", "origin", str(origin), cwd=work)
    res = _run([sys.executable, "-m", "casstore.cli", "init", "--remote", str(store)], work, env)
    assert res.returncode == 0, res.stderr
    (work / ".pre-commit-config.yaml").write_text(_local_config(), encoding="utf-8")
    res = _run([_precommit_exe(), "install", "--hook-type", "pre-push"], work, env)
    assert res.returncode == 0, res.stdout + res.stderr
    return work, store, env


def _pin_and_commit(work: Path, env: dict[str, str], *names: str) -> None:
    paths = [str(write_cassette(work, n)) for n in names]
    res = _run([sys.executable, "-m", "casstore.cli", "add", *paths], work, env)
    assert res.returncode == 0, res.stderr
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "pin " + " ".join(names), cwd=work)


def test_first_push_of_a_root_commit_uploads_every_pin(framework_repo) -> None:  # type: ignore[no-untyped-def]
    work, store, env = framework_repo
    _pin_and_commit(work, env, "alpha", "beta")
    pinned = _pinned(work, env)
    assert len(pinned) == 2 and not _objects(store)
    res = _run(["git", "push", "-q", "origin", "main"], work, env)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "casstore upload of pinned cassettes" in out, out  # the framework ran casstore's hook
    assert _objects(store) == pinned, out


def test_new_branch_pushes_upload_only_the_new_pins(framework_repo) -> None:  # type: ignore[no-untyped-def]
    work, store, env = framework_repo
    _pin_and_commit(work, env, "alpha")
    assert _run(["git", "push", "-q", "origin", "main"], work, env).returncode == 0
    first = _objects(store)
    assert len(first) == 1
    git("checkout", "-q", "-b", "feature", cwd=work)
    _pin_and_commit(work, env, "gamma")
    res = _run(["git", "push", "-q", "origin", "feature"], work, env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _objects(store) == _pinned(work, env) and len(_objects(store)) == 2


def test_a_failed_upload_refuses_the_first_push(framework_repo) -> None:  # type: ignore[no-untyped-def]
    work, store, env = framework_repo
    _pin_and_commit(work, env, "alpha")
    store.mkdir()
    (store / "objects").write_text("not a folder")  # the store cannot take objects
    res = _run(["git", "push", "-q", "origin", "main"], work, env)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "push refused" in out, out  # casstore's own refusal, not the framework's status word
    assert git("ls-remote", str(work.parent / "origin.git"), cwd=work).stdout.strip() == ""
