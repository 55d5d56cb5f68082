"""`git merge` of casstore.lock through the merge driver, in real repositories."""

from __future__ import annotations

from pathlib import Path

from casstore.model.lock import parse_lock
from tests.helpers.commands import git
from tests.helpers.gitrepo import commit, pin, setup_drivers


def _two_branches(casstore, repo: Path, left: tuple[str, str], right: tuple[str, str]) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """main has `triage`; branch `left` pins left=(name, answer), branch `right` pins right."""
    pin(casstore, repo, "triage", answer="base")
    commit(repo, "base")
    git("checkout", "-q", "-b", "left", cwd=repo)
    dl = pin(casstore, repo, left[0], answer=left[1])
    commit(repo, f"left pins {left[0]}")
    git("checkout", "-q", "main", cwd=repo)
    git("checkout", "-q", "-b", "right", cwd=repo)
    dr = pin(casstore, repo, right[0], answer=right[1])
    commit(repo, f"right pins {right[0]}")
    return dl, dr


def _unmerged(repo: Path) -> list[str]:
    """Paths the index holds in conflict (`git ls-files -u`, plumbing: stable output)."""
    out = git("ls-files", "-u", "-z", cwd=repo).stdout
    return sorted({rec.split("\t", 1)[1] for rec in out.split("\0") if rec})


def test_branches_pinning_different_cassettes_merge_cleanly(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    setup_drivers(repo)
    da, db = _two_branches(casstore, repo, ("alpha", "a"), ("beta", "b"))
    m = git("merge", "--no-edit", "left", cwd=repo, check=False)
    assert m.returncode == 0, m.stdout + m.stderr
    assert _unmerged(repo) == []
    lock = parse_lock((repo / "casstore.lock").read_bytes())
    assert {n: p.digest for n, p in lock.pins.items() if n != "triage"} == {"alpha": da, "beta": db}
    assert all(p.signatures for p in lock.pins.values())
    assert git("status", "--porcelain", "--untracked-files=no", cwd=repo).stdout.strip() == ""
    v = casstore("verify", cwd=repo)
    assert v.exit_code == 0, v.stderr


def test_without_the_driver_the_same_merge_conflicts(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    """The control: plain text merging of the two adjacent new blocks stops (so the driver matters)."""
    _two_branches(casstore, repo, ("alpha", "a"), ("beta", "b"))
    m = git("merge", "--no-edit", "left", cwd=repo, check=False)
    assert m.returncode != 0, m.stdout + m.stderr
    assert _unmerged(repo) == ["casstore.lock"], m.stdout  # the index, not git's wording
    git("merge", "--abort", cwd=repo)


def test_branches_repinning_the_same_cassette_differently_conflict(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    setup_drivers(repo)
    dl, dr = _two_branches(casstore, repo, ("triage", "left answer"), ("triage", "right answer"))
    m = git("merge", "--no-edit", "left", cwd=repo, check=False)
    out = m.stdout + m.stderr
    assert m.returncode != 0 and _unmerged(repo) == ["casstore.lock"], out
    # the driver's message names the cassette and both digests
    assert f"cassette 'triage' changed on both sides: ours {dr}, theirs {dl}" in out, out
    text = (repo / "casstore.lock").read_text()
    assert "<<<<<<< ours" in text and "=======" in text and ">>>>>>> theirs" in text
    ours_part = text.split("<<<<<<< ours", 1)[1].split("=======", 1)[0]
    theirs_part = text.split("=======", 1)[1].split(">>>>>>> theirs", 1)[0]
    assert dr in ours_part and dl in theirs_part
    assert "UU casstore.lock" in git("status", "--porcelain", cwd=repo).stdout
    assert "keep one side of each conflict" in out
    # resolving as the message says: keep their block, drop ours and the markers
    head, rest = text.split("<<<<<<< ours\n", 1)
    (repo / "casstore.lock").write_text(head + theirs_part.lstrip("\n") + rest.split(">>>>>>> theirs\n", 1)[1])
    lock = parse_lock((repo / "casstore.lock").read_bytes())
    assert lock.pins["triage"].digest == dl
    assert casstore("verify", cwd=repo).exit_code == 0
    git("add", "casstore.lock", cwd=repo)
    git("commit", "-q", "--no-edit", cwd=repo)
    pin(casstore, repo, "triage", answer="re-recorded after the merge")  # and `add` works again


def test_same_change_on_both_sides_is_no_conflict(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    setup_drivers(repo)
    dl, dr = _two_branches(casstore, repo, ("triage", "same"), ("triage", "same"))
    assert dl == dr
    git("checkout", "-q", "left", cwd=repo)
    pin(casstore, repo, "gamma", answer="g")  # keep the two locks textually different
    commit(repo, "left also pins gamma")
    git("checkout", "-q", "right", cwd=repo)
    m = git("merge", "--no-edit", "left", cwd=repo, check=False)
    assert m.returncode == 0, m.stdout + m.stderr
    lock = parse_lock((repo / "casstore.lock").read_bytes())
    assert lock.pins["triage"].digest == dl and "gamma" in lock.pins


def test_merge_driver_falls_back_to_a_text_merge_on_an_unparseable_side(repo: Path, casstore, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.helpers.commands import run_casstore_subprocess

    base, ours, theirs = (tmp_path / n for n in ("O", "A", "B"))
    base.write_text("version = 1\n")
    ours.write_text("version = 1\n<<<<<<< garbage\n")
    theirs.write_text("version = 1\n")
    r = run_casstore_subprocess("git-merge-lock", str(base), str(ours), str(theirs), "7", "casstore.lock", cwd=repo)
    assert r.returncode == 0, r.stderr  # only one side changed: plain text merge is clean
    assert "does not parse" in r.stderr and "Traceback" not in r.stderr
    assert ours.read_text() == "version = 1\n<<<<<<< garbage\n"
