"""`casstore log NAME`: the history of a cassette's pins, read from real commits."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from casstore.model.lock import format_lock, parse_lock
from tests.helpers.commands import git, run_casstore_subprocess
from tests.helpers.gitrepo import commit, pin


def test_log_lists_each_change_of_the_pin_newest_first(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    d1 = pin(casstore, repo, "triage", answer="one")
    c1 = commit(repo, "record triage")
    pin(casstore, repo, "other", answer="x")
    commit(repo, "record other")  # does not touch triage: not listed
    d2 = pin(casstore, repo, "triage", answer="two", n=3)
    c3 = commit(repo, "re-record triage")
    lock = parse_lock((repo / "casstore.lock").read_bytes())
    (repo / "casstore.lock").write_text(format_lock(lock.without("triage")))
    c4 = commit(repo, "drop triage")

    r = run_casstore_subprocess("log", "triage", cwd=repo)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [c4[:12], c3[:12], c1[:12]]
    assert "removed" in lines[0] and d2[:19] in lines[0]
    assert "re-pinned" in lines[1] and d2[:19] in lines[1] and "3 entries" in lines[1]
    assert "signed by tester@example.com" in lines[1] and lines[1].endswith("re-record triage")
    assert "pinned" in lines[2] and d1[:19] in lines[2] and "2 entries" in lines[2]

    rows = casstore("log", "triage", "--json", cwd=repo).json
    assert [(x["commit"], x["action"], x["digest"], x["entries"]) for x in rows] == [
        (c4, "removed", d2, 3), (c3, "re-pinned", d2, 3), (c1, "pinned", d1, 2)]
    assert rows[2]["signers"] == ["tester@example.com"]
    stamp = dt.datetime.fromisoformat(rows[0]["date"])
    assert abs(stamp.timestamp() - dt.datetime.now().timestamp()) < 600
    # --rev walks another starting point
    older = casstore("log", "triage", "--rev", "HEAD~2", "--json", cwd=repo).json
    assert [x["commit"] for x in older] == [c1]


def test_log_through_a_merge(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    pin(casstore, repo, "triage", answer="base")
    base = commit(repo, "base")
    git("checkout", "-q", "-b", "topic", cwd=repo)
    d = pin(casstore, repo, "triage", answer="topic")
    topic = commit(repo, "topic re-records triage")
    git("checkout", "-q", "main", cwd=repo)
    pin(casstore, repo, "other", answer="o")
    commit(repo, "main pins other")
    git("merge", "-q", "--no-edit", "topic", cwd=repo, check=False)
    if (repo / ".git" / "MERGE_HEAD").exists():  # no merge driver here: the text merge may stop
        lock = parse_lock(git("show", "topic:casstore.lock", cwd=repo).stdout)
        lock = lock.with_pin(parse_lock(git("show", "main:casstore.lock", cwd=repo).stdout).pins["other"])
        (repo / "casstore.lock").write_text(format_lock(lock))
        git("add", "casstore.lock", cwd=repo)
        git("commit", "-q", "--no-edit", cwd=repo)
    rows = casstore("log", "triage", "--json", cwd=repo).json
    # the merge took topic's pin as it was: only the commits that changed it are listed
    assert [(x["commit"], x["action"]) for x in rows] == [(topic, "re-pinned"), (base, "pinned")]
    assert rows[0]["digest"] == d


def test_log_of_an_unknown_cassette_is_one_line(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    pin(casstore, repo, "triage")
    commit(repo, "one")
    r = casstore("log", "triag", cwd=repo)
    assert r.exit_code == 2  # an unknown name is a usage error (docs/cli.md)
    assert r.stderr.strip() == ("error: 'triag' is not pinned in any casstore.lock in the history of HEAD; "
                                "did you mean triage? (see `casstore ls`)")
    outside = casstore("log", "triage", "--rev", "no-such-branch", cwd=repo)
    assert outside.exit_code == 2 and "unknown revision" in outside.stderr


def test_log_in_a_repository_without_commits_says_so(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    pin(casstore, repo, "triage")
    r = casstore("log", "triage", cwd=repo)
    assert r.exit_code == 2 and r.stderr.startswith("error: ") and "no commits yet" in r.stderr, r.stderr
    assert "KeyError" not in r.stderr
