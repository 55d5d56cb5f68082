"""`git diff` on casstore.lock (through the textconv driver) and `casstore diff`, in real repos."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.helpers.commands import git, run_casstore_subprocess
from tests.helpers.gitrepo import commit, pin, setup_drivers


def _entries(repo: Path, name: str) -> list[dict]:
    return json.loads((repo / "tests" / "cassettes" / f"{name}.json").read_text())["entries"]


def _rerecorded(casstore, repo: Path) -> tuple[list[dict], list[dict]]:  # type: ignore[no-untyped-def]
    """Commit `triage` (prompts a, b), then re-record it (prompts a, c) and commit again."""
    setup_drivers(repo)
    pin(casstore, repo, "triage", prompts=["refund order 7", "where is my parcel"])
    pin(casstore, repo, "other", n=1)
    old = _entries(repo, "triage")
    commit(repo, "record triage")
    pin(casstore, repo, "triage", prompts=["refund order 7", "cancel my subscription"])
    new = _entries(repo, "triage")
    commit(repo, "re-record triage")
    return old, new


def test_git_diff_through_textconv_shows_added_and_removed_calls(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    old, new = _rerecorded(casstore, repo)
    out = git("diff", "HEAD~1", "--", "casstore.lock", cwd=repo).stdout
    lines = out.splitlines()
    removed_id, added_id, kept_id = old[1]["identity"][:12], new[1]["identity"][:12], old[0]["identity"][:12]
    assert any(line.startswith("-  call #1 llm POST") and removed_id in line and "where is my parcel" in line
               for line in lines), out
    assert any(line.startswith("+  call #1 llm POST") and added_id in line and "cancel my subscription" in line
               for line in lines), out
    # the call recorded identically in both is context, not a change
    assert any(line.startswith("   call #0") and kept_id in line for line in lines), out
    assert not any(kept_id in line for line in lines if line[:1] in "+-"), out
    # the other cassette did not change: not in the hunk at all
    assert "cassette other" not in "\n".join(line for line in lines if line[:1] in "+-")
    # git log -p uses the same driver
    logp = git("log", "-p", "-1", "--", "casstore.lock", cwd=repo).stdout
    assert "cancel my subscription" in logp and "re-record triage" in logp


def test_casstore_diff_between_two_revisions(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    old, new = _rerecorded(casstore, repo)
    r = run_casstore_subprocess("diff", "HEAD~1", "HEAD", cwd=repo)
    assert r.returncode == 0, r.stderr
    assert "~ triage" in r.stdout and "calls: +1 -1 ~0 =1" in r.stdout, r.stdout
    assert f"- #1 llm POST http://127.0.0.1/v1/chat/completions  id={old[1]['identity'][:12]}" in r.stdout
    assert f"+ #1 llm POST http://127.0.0.1/v1/chat/completions  id={new[1]['identity'][:12]}" in r.stdout
    # the added call is explained against the removed one it replaces
    assert 'vs removed #1: request.body.messages[0].content: "where is my parcel" → "cancel my subscription"' in r.stdout
    assert not any(line.startswith(("+ other", "- other", "~ other")) for line in r.stdout.splitlines())
    assert "1 cassette(s) changed, 1 unchanged" in r.stdout

    j = run_casstore_subprocess("diff", "HEAD~1", "HEAD", "--json", cwd=repo)
    data = json.loads(j.stdout)
    (cas,) = data["cassettes"]
    assert cas["name"] == "triage" and cas["status"] == "changed" and data["unchanged"] == 1
    kinds = {(c["change"], c["identity"]) for c in cas["changes"]}
    assert kinds == {("removed", old[1]["identity"]), ("added", new[1]["identity"])}


def test_diff_shows_field_level_changes_of_a_call_with_the_same_identity(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    pin(casstore, repo, "triage", answer="The refund is on its way.")
    commit(repo, "one")
    pin(casstore, repo, "triage", answer="Your refund was declined.")
    r = casstore("diff", cwd=repo)  # working lock vs HEAD
    assert r.exit_code == 0, r.stderr
    assert "casstore.lock: HEAD → working tree" in r.stdout
    assert "calls: +0 -0 ~2 =0" in r.stdout
    assert ('response.body.choices[0].message.content: "The refund is on its way." → '
            '"Your refund was declined."') in r.stdout


def test_diff_with_only_the_lock_in_git_fetches_from_the_store(repo: Path, casstore, isolated_user: Path) -> None:  # type: ignore[no-untyped-def]
    _rerecorded(casstore, repo)
    assert casstore("push", "-q", cwd=repo).exit_code == 0
    git("checkout", "-q", "HEAD~1", cwd=repo)
    assert casstore("push", "-q", cwd=repo).exit_code == 0
    git("checkout", "-q", "-", cwd=repo)
    shutil.rmtree(isolated_user / "cache")  # a fresh clone: nothing cached
    r = casstore("diff", "HEAD~1", "HEAD", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert "calls: +1 -1 ~0 =1" in r.stdout
    # and through git: the textconv reads the store too
    assert "cancel my subscription" in git("diff", "HEAD~1", "--", "casstore.lock", cwd=repo).stdout


def test_unavailable_objects_are_reported_and_git_diff_still_works(repo: Path, casstore, isolated_user: Path) -> None:  # type: ignore[no-untyped-def]
    _rerecorded(casstore, repo)  # never pushed
    shutil.rmtree(isolated_user / "cache")
    r = casstore("diff", "HEAD~1", "HEAD", cwd=repo)
    assert r.exit_code == 1
    assert "(calls not shown: triage: sha256:" in r.stdout
    assert "error: calls not compared for triage:" in r.stderr and "Traceback" not in r.stderr
    g = git("diff", "HEAD~1", "--", "casstore.lock", cwd=repo)
    assert g.returncode == 0
    assert "-  digest sha256:" in g.stdout and "+  digest sha256:" in g.stdout
    assert "(calls not shown:" in g.stdout


def test_textconv_falls_back_to_the_raw_lock(repo: Path, casstore, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    broken = tmp_path / "casstore.lock"
    broken.write_text("<<<<<<< ours\nversion = 1\n")
    r = run_casstore_subprocess("git-textconv", str(broken), cwd=repo)
    assert r.returncode == 0 and r.stdout == "<<<<<<< ours\nversion = 1\n"


def test_diff_default_on_a_repository_without_commits_and_bad_usage(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    pin(casstore, repo, "triage")
    r = casstore("diff", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert "+ triage" in r.stdout and "calls: +2 -0 ~0 =0" in r.stdout
    commit(repo, "one")
    assert "no cassette changed (1 unchanged)" in casstore("diff", cwd=repo).stdout
    bad = casstore("diff", "no-such-rev", cwd=repo)
    assert bad.exit_code == 2 and "unknown revision 'no-such-rev'" in bad.stderr
    assert "KeyError" not in bad.stderr and bad.stderr.count("\n") == 1, bad.stderr  # no internals
    assert casstore("diff", "a", "b", "c", cwd=repo).exit_code == 2
    assert casstore("diff", "HEAD~3", cwd=repo).exit_code == 2


def test_drivers_are_hidden_and_registration_is_idempotent(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    help_text = casstore("--help").stdout
    assert "diff" in help_text and "git-textconv" not in help_text and "git-merge-lock" not in help_text
    r = casstore("git-drivers", cwd=repo)
    assert r.exit_code == 0 and "set git config diff.casstore-lock.textconv" in r.stdout
    again = casstore("git-drivers", cwd=repo)
    assert "(unchanged)" in again.stdout
    attrs = (repo / ".gitattributes").read_text().splitlines()
    assert attrs.count("casstore.lock diff=casstore-lock merge=casstore-lock") == 1
    check = git("check-attr", "diff", "merge", "--", "casstore.lock", cwd=repo).stdout
    assert "diff: casstore-lock" in check and "merge: casstore-lock" in check


def test_drivers_are_registered_past_a_comment_that_hides_their_line(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    # .gitattributes was read with str.splitlines(): after a U+2028 in a comment, the driver
    # line looked present to casstore, but git reads that whole line as the comment
    attrs = repo / ".gitattributes"
    attrs.write_text("# casstore's drivers:\u2028casstore.lock diff=casstore-lock merge=casstore-lock\n")
    assert casstore("git-drivers", cwd=repo).exit_code == 0
    check = git("check-attr", "diff", "merge", "--", "casstore.lock", cwd=repo).stdout
    assert "diff: casstore-lock" in check and "merge: casstore-lock" in check, check


def test_hooks_install_registers_the_drivers_and_uninstall_removes_them(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    r = casstore("hooks", "install", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert "git config diff.casstore-lock.textconv" in r.stdout
    cfg = git("config", "--local", "--get", "merge.casstore-lock.driver", cwd=repo).stdout
    assert "-m casstore.cli git-merge-lock %O %A %B" in cfg
    assert "casstore.lock diff=casstore-lock merge=casstore-lock" in (repo / ".gitattributes").read_text()
    pin(casstore, repo, "triage")
    commit(repo, "one")
    assert "call #0 llm POST" in git("show", "--", "casstore.lock", cwd=repo).stdout
    u = casstore("hooks", "install", "--uninstall", cwd=repo)
    assert u.exit_code == 0, u.stderr
    assert git("config", "--local", "--get", "diff.casstore-lock.textconv", cwd=repo, check=False).returncode == 1
    attrs = repo / ".gitattributes"
    assert not attrs.exists() or "casstore-lock" not in attrs.read_text()


def test_uninstall_leaves_a_comment_that_hides_the_drivers_line_whole(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    # a comment "# see wiki\r<our line>" is one line to git (no drivers: install adds the real
    # line); uninstall split lines with bytes.splitlines, which breaks at a lone "\r" too, and
    # cut the comment's end off with the line it removed
    attrs = repo / ".gitattributes"
    comment = b"# see the wiki\rcasstore.lock diff=casstore-lock merge=casstore-lock\r\n*.png binary\r\n"
    attrs.write_bytes(comment)
    git("add", ".gitattributes", cwd=repo)
    git("commit", "-qm", "attrs", cwd=repo)
    assert casstore("hooks", "install", cwd=repo).exit_code == 0
    assert attrs.read_bytes().startswith(comment) and attrs.read_bytes() != comment  # our line added after
    assert casstore("hooks", "install", "--uninstall", cwd=repo).exit_code == 0
    assert attrs.read_bytes() == comment, attrs.read_bytes()
