"""Recording fills meta.git (commit, branch, dirty) and the recorder; `casstore show` prints them."""

import json

import casstore
from tests.helpers.commands import git


def _record(repo, name):  # type: ignore[no-untyped-def]
    with casstore.use(name, mode="record"):
        casstore.tool("double", lambda x: 2 * x)(21)
    return json.loads((repo / "tests" / "cassettes" / f"{name}.json").read_text())


def test_recording_carries_git_provenance(repo, casstore, monkeypatch):  # type: ignore[no-untyped-def]
    (repo / "app.py").write_text("print('v1')\n")
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "v1", cwd=repo)
    head = git("rev-parse", "HEAD", cwd=repo).stdout.strip()
    monkeypatch.chdir(repo)
    meta = _record(repo, "clean")["meta"]
    assert meta["git"] == {"commit": head, "branch": "main", "dirty": False}
    assert meta["recorder"].startswith("casstore/")

    (repo / "app.py").write_text("print('v2, not committed')\n")
    assert _record(repo, "dirty")["meta"]["git"]["dirty"] is True

    assert casstore("add", "tests/cassettes/dirty.json", cwd=repo).exit_code == 0
    out = casstore("show", "dirty", cwd=repo).stdout
    assert f"git:      {head} on main (dirty)" in out
    assert "signed:   tester@example.com" in out
