"""casstore.git.history helpers: provenance for recordings, durations, revision syntax."""

from __future__ import annotations

from pathlib import Path

import pytest

from casstore.errors import UsageError
from casstore.git.history import parse_duration
from casstore.git.provenance import provenance
from casstore.git.repo import GitRepo
from tests.helpers.commands import git
from tests.helpers.gitrepo import commit, pin


def test_provenance_commit_branch_and_dirty(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    assert provenance(repo) == {"commit": None, "branch": "main", "dirty": False}
    (repo / "agent.py").write_text("print('v1')\n")
    git("add", "agent.py", cwd=repo)
    pin(casstore, repo, "triage")
    commit(repo, "one")
    git("add", "tests/cassettes/triage.json", cwd=repo)
    git("commit", "-q", "-m", "cassette copy", cwd=repo)
    sha = git("rev-parse", "HEAD", cwd=repo).stdout.strip()
    assert provenance(repo) == {"commit": sha, "branch": "main", "dirty": False}
    # recording outputs (the lock, the cassette dir) do not make the source dirty
    pin(casstore, repo, "triage", answer="re-recorded")
    assert provenance(repo)["dirty"] is False
    (repo / "untracked.py").write_text("x = 1\n")
    assert provenance(repo)["dirty"] is False  # untracked files are not the recorded code
    (repo / "agent.py").write_text("print('v2')\n")
    assert provenance(repo)["dirty"] is True
    assert provenance(repo / "tests")["commit"] == sha  # from a subfolder too
    git("checkout", "-q", "agent.py", cwd=repo)
    git("checkout", "-q", "--detach", "HEAD", cwd=repo)
    assert provenance(repo) == {"commit": sha, "branch": None, "dirty": False}


def test_provenance_outside_git(tmp_path: Path) -> None:
    assert provenance(tmp_path) == {"commit": None, "branch": None, "dirty": None}


@pytest.mark.parametrize(("text", "seconds"), [("0", 0), ("90s", 90), ("30m", 1800), ("24h", 86400),
                                               ("7d", 604800), ("2w", 1209600), (" 1H ", 3600)])
def test_parse_duration(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1", "1.5h", "-1d", "1y", "h", "1 h"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(UsageError, match="invalid duration"):
        parse_duration(text)


def test_resolve_rev_ancestry(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    shas = []
    for i in range(3):
        pin(casstore, repo, "a", answer=str(i))
        shas.append(commit(repo, str(i)))
    git("checkout", "-q", "-b", "side", shas[0], cwd=repo)
    side = commit(repo, "side")
    git("checkout", "-q", "main", cwd=repo)
    git("merge", "-q", "--no-edit", "-s", "ours", "side", cwd=repo)
    merge = git("rev-parse", "HEAD", cwd=repo).stdout.strip()
    g = GitRepo(repo)
    cases = {"HEAD": merge, "HEAD~1": shas[2], "HEAD^": shas[2], "HEAD~3": shas[0], "HEAD^2": side,
             "HEAD^2~1": shas[0], "main~2^": shas[0], "HEAD^0": merge, merge[:12]: merge}
    for rev, want in cases.items():
        assert g.resolve(rev).decode() == want, rev
        assert git("rev-parse", rev, cwd=repo).stdout.strip() == want  # same meaning as git's
    with pytest.raises(UsageError, match="no such parent"):
        g.resolve("HEAD~9")
    with pytest.raises(UsageError, match="unknown revision"):
        g.resolve("nope~1")
    # what git itself refuses: \d took "١" as 1, "$" a final newline, and int() of 5000
    # digits raised ValueError (Python's digit limit) out of `--since` / `--trust-from`
    for rev in ("HEAD~\u0661", "HEAD^\u0662", "HEAD~1\n", "HEAD~" + "9" * 5000):
        assert git("rev-parse", "--verify", "-q", rev, cwd=repo, check=False).returncode != 0, rev
        with pytest.raises(UsageError, match="unknown revision"):
            g.resolve(rev)
