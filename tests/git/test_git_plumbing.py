"""casstore.git.plumbing: the pre-commit check reads the index and the objects through git's
own commands."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from casstore.git.plumbing import GitCommands
from casstore.ops.check import check
from casstore.project import Project
from tests.helpers.cassettes import leaky, write_cassette
from tests.helpers.commands import git, merge_conflict
from tests.helpers.fakes import ago, aws_key


def test_cat_reads_blobs_by_sha_and_head_path(repo: Path) -> None:
    write_cassette(repo, "a", recorded_at=ago(1))
    (repo / "bin.dat").write_bytes(bytes(range(256)) * 3 + b"\n\n")  # newlines, NULs, no final newline
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "x", cwd=repo)
    write_cassette(repo, "a", n=3, recorded_at=ago(1))
    (repo / "empty.json").write_bytes(b"")
    git("add", "-A", cwd=repo)
    cmds = GitCommands.open(repo)
    assert cmds is not None and cmds.prefix == "" and cmds.root.resolve() == repo.resolve()
    staged = cmds.staged_shas()
    assert staged is not None and set(staged) == {"tests/cassettes/a.json", "empty.json"}
    specs = [staged["tests/cassettes/a.json"], staged["empty.json"], b"HEAD:bin.dat", b"HEAD:tests/cassettes/a.json",
             b"HEAD:tests", b"HEAD:no-such-file", b"0" * 40]
    got = cmds.cat(specs)  # type: ignore[arg-type]
    assert got is not None and got[0] == (repo / "tests/cassettes/a.json").read_bytes() and got[1] == b""
    assert got[3] == git("show", "HEAD:tests/cassettes/a.json", cwd=repo).stdout.encode()
    assert got[2] == bytes(range(256)) * 3 + b"\n\n" and got[4:] == [None, None, None]
    assert cmds.cat([b"HEAD:a\nb"]) is None  # not a name the batch protocol can carry
    sub = repo / "tests" / "cassettes"
    assert GitCommands.open(sub).prefix == "tests/cassettes/"  # type: ignore[union-attr]


def test_no_repository_is_none_and_no_commit_yet_is_all_new(tmp_path: Path) -> None:
    assert GitCommands.open(tmp_path) is None  # not a work tree
    git("init", "-q", cwd=tmp_path)
    (tmp_path / "x.json").write_text("{}")
    git("add", "-A", cwd=tmp_path)
    cmds = GitCommands.open(tmp_path)
    assert cmds is not None  # no HEAD: against the empty tree
    assert cmds.staged_shas() == {"x.json": b"9e26dfeeb6e641a33dae4961196235bdb965b21b"}


def _project_in_a_folder(tmp_path: Path, casstore) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    """A git repository ``top`` whose casstore project is its folder ``sub dir``."""
    top = tmp_path / "top"
    top.mkdir()
    git("init", "-q", cwd=top)
    proj = top / "sub dir"
    proj.mkdir()
    assert casstore("init", cwd=proj).exit_code == 0
    return top, proj


def test_staged_check_of_a_project_in_a_folder(tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    """A project in a subfolder of the repository: changed and new cassettes, a changed lock
    and a changed trusted_keys staged; the index is checked, not the work tree."""
    top, proj = _project_in_a_folder(tmp_path, casstore)
    for name in ("a", "b"):
        write_cassette(proj, name, recorded_at=ago(1))
    assert casstore("add", "tests/cassettes", cwd=proj).exit_code == 0
    git("add", "-A", cwd=top)
    git("commit", "-q", "-m", "pins", cwd=top)
    write_cassette(proj, "a", n=3, recorded_at=ago(1))
    assert casstore("add", "tests/cassettes/a.json", cwd=proj).exit_code == 0
    secret = aws_key()
    leaky(proj, "c", secret, recorded_at=ago(1))
    keys = proj / ".casstore" / "trusted_keys"
    other = base64.b64encode(Ed25519PrivateKey.generate().public_key().public_bytes_raw()).decode()
    keys.write_text(keys.read_text() + f"other@example.com ed25519 {other}\n")
    git("add", "-A", cwd=top)
    write_cassette(proj, "c", recorded_at=ago(1))  # fixed in the work tree only: the index is checked

    by_git = check(Project.discover(proj), staged=True).to_dict()
    assert by_git["files"] == ["tests/cassettes/a.json", "tests/cassettes/c.json"]  # the lock is judged by its pins
    assert by_git["pins_checked"] == 1 and by_git["pins_scanned"] == 0  # a.json itself was scanned
    assert {(f["kind"], f["file"]) for f in by_git["findings"]} == {("secret", "tests/cassettes/c.json")}
    assert secret not in str(by_git)


# -- a commit that tries to get past the check (review of the git-plumbing reader) ---------------
def _staged(top: Path) -> dict[str, bytes | None] | None:
    cmds = GitCommands.open(top)
    assert cmds is not None
    return cmds.staged_shas()


def test_odd_paths_type_changes_and_ita_entries_are_what_git_commits(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Paths with spaces, a newline, quotes, a leading dash and non-UTF-8 bytes; a deletion,
    a rename, a file that became a symlink and one whose mode alone changed, a submodule
    entry, `git add -N` entries (a new path and a path of HEAD: git commits neither's
    content, and the second's deletion), a file changed in the work tree after staging,
    and config that changes porcelain output (quotePath, renames, relative, an external
    diff that would leave a mark if git ran it) or reads the work tree (an fsmonitor: git
    runs it, as every git command does, and --cached ignores its answer): exactly what git
    commits."""
    top = tmp_path / "top"
    top.mkdir()
    git("init", "-q", cwd=top)
    names = ["plain.json", "with space.json", "new\nline.json", 'q"uote.json', "-dash.json", "gone.json",
             "old name.json", "to-link.json", "exec.json", "tracked-ita.json"]
    for n in names:
        (top / n).write_text(f'{{"n": "{n!r}"}}')
    (top / "caf\xe9.json").write_bytes(b"{}")  # written below under a non-UTF-8 name
    os.rename(top / "caf\xe9.json", os.path.join(os.fsencode(top), b"caf\xe9-latin1.json"))
    git("add", "-A", cwd=top)
    git("commit", "-q", "-m", "one", cwd=top)
    mark = tmp_path / "ran"
    for key, value in (("core.quotePath", "true"), ("diff.renames", "copies"), ("diff.relative", "true"),
                       ("diff.external", f"touch {mark}"), ("core.fsmonitor", "echo /; true")):
        git("config", key, value, cwd=top)
    for n in ("plain.json", "with space.json", "new\nline.json", 'q"uote.json', "-dash.json"):
        (top / n).write_text('{"changed": true}')
    os.unlink(top / "gone.json")
    os.rename(top / "old name.json", top / "new name.json")
    os.unlink(top / "to-link.json")
    os.symlink("plain.json", top / "to-link.json")
    os.chmod(top / "exec.json", 0o755)
    git("add", "-A", cwd=top)
    (top / "ita-new.json").write_text('{"later": true}')
    git("rm", "-q", "--cached", "tracked-ita.json", cwd=top)
    git("add", "-N", "ita-new.json", "tracked-ita.json", cwd=top)
    sub = git("rev-parse", "HEAD", cwd=top).stdout.strip()
    git("update-index", "--add", "--cacheinfo", f"160000,{sub},vendored", cwd=top)
    (top / "plain.json").write_text('{"work tree only": true}')  # the staged blob is what counts

    by_git = _staged(top)
    assert not mark.exists()  # the external diff did not run
    blob = lambda p: git("rev-parse", f":{p}", cwd=top).stdout.strip().encode()  # noqa: E731
    expected: dict[str, bytes | None] = {n: blob(n) for n in ("plain.json", "with space.json", "new\nline.json",
                                                             'q"uote.json', "-dash.json", "new name.json",
                                                             "to-link.json")}
    expected.update({"gone.json": None, "old name.json": None, "tracked-ita.json": None, "vendored": sub.encode()})
    assert by_git == expected
    changed = json.loads(b"".join(GitCommands.open(top).cat([expected["plain.json"]])))  # type: ignore[arg-type, union-attr]
    assert changed == {"changed": True}


def test_a_first_commit_reads_the_index_git_is_given(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """No commit yet, and a hook's GIT_INDEX_FILE (what `git commit PATH` and `git commit -a`
    give it) holds other bytes than .git/index: the index given is read."""
    top = tmp_path / "top"
    top.mkdir()
    git("init", "-q", cwd=top)
    write_cassette(top, "c", recorded_at=ago(1))
    git("add", "-A", cwd=top)
    leaky(top, "c", aws_key(), recorded_at=ago(1))
    alt = tmp_path / "next-index"
    alt.write_bytes((top / ".git" / "index").read_bytes())
    subprocess.run(["git", "add", "tests/cassettes/c.json"], cwd=top, env={**os.environ, "GIT_INDEX_FILE": str(alt)},
                   check=True)
    leak = git("hash-object", "tests/cassettes/c.json", cwd=top).stdout.strip().encode()
    monkeypatch.setenv("GIT_INDEX_FILE", str(alt))
    by_git = _staged(top)
    assert by_git is not None and by_git["tests/cassettes/c.json"] == leak


@pytest.mark.parametrize("how", [["tests/cassettes/c.json"], ["-a"]])
def test_a_first_commit_of_a_leak_from_the_work_tree_is_refused(repo: Path, casstore, how: list[str]) -> None:  # type: ignore[no-untyped-def]
    """The real hook: a clean copy staged, the leak written after, then a first commit that
    takes the work tree's copy (`git commit PATH`, `git commit -a`)."""
    assert casstore("hooks", "install", cwd=repo).exit_code == 0
    write_cassette(repo, "c", recorded_at=ago(1))
    git("add", "-A", cwd=repo)
    secret = aws_key()
    leaky(repo, "c", secret, recorded_at=ago(1))
    res = git("commit", "-q", "-m", "first", *how, cwd=repo, check=False)
    assert res.returncode != 0, res.stdout + res.stderr
    assert "tests/cassettes/c.json" in res.stderr + res.stdout and secret not in res.stderr + res.stdout
    assert git("rev-parse", "-q", "--verify", "HEAD", cwd=repo, check=False).returncode != 0  # nothing committed


def test_an_unstaged_key_does_not_vouch_for_a_staged_pin(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    """HEAD trusts another key only; the user's key is added to trusted_keys in the work tree
    and not staged, and a pin signed by it is staged: the commit would hold a pin its own
    trusted_keys does not trust. The hook judges it by the committed keys."""
    assert casstore("hooks", "install", cwd=repo).exit_code == 0
    keys = repo / ".casstore" / "trusted_keys"
    mine = keys.read_text()
    other = base64.b64encode(Ed25519PrivateKey.generate().public_key().public_bytes_raw()).decode()
    keys.write_text(f"other@example.com ed25519 {other}\n")
    git("add", "-A", cwd=repo)
    assert git("commit", "-q", "-m", "trust another key", cwd=repo, check=False).returncode == 0
    keys.write_text(mine)  # in the work tree only
    write_cassette(repo, "c", recorded_at=ago(1))
    assert casstore("add", "tests/cassettes/c.json", cwd=repo).exit_code == 0
    git("add", "casstore.lock", cwd=repo)
    by_git = check(Project.discover(repo), staged=True).to_dict()
    assert [f["kind"] for f in by_git["findings"]] == ["signature"]
    res = git("commit", "-q", "-m", "pin", cwd=repo, check=False)
    assert res.returncode != 0 and "is signed only by keys" in res.stderr
    git("add", str(keys), cwd=repo)  # staged with the pin: the commit trusts the key (a change CI reviews)
    res = git("commit", "-q", "-m", "pin and key", cwd=repo, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def test_hooks_of_a_project_in_a_folder_of_the_repository(tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    """`casstore hooks install` in a project that is a folder of the work tree: git runs the
    hook at the top, where no project is (every commit was refused, exit 2); the hook checks
    the project's staged files from its folder, also when git's paths are relative ones."""
    top, proj = _project_in_a_folder(tmp_path, casstore)
    assert casstore("hooks", "install", cwd=proj).exit_code == 0
    (top / "README").write_text("not casstore's\n")
    git("add", "-A", cwd=top)
    res = git("commit", "-q", "-m", "first", cwd=top, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    secret = aws_key()
    leaky(proj, "c", secret, recorded_at=ago(1))
    git("add", "-A", cwd=top)
    for env in ({}, {"GIT_DIR": "../.git", "GIT_WORK_TREE": ".."}):  # git's relative paths, from the folder
        res = subprocess.run(["git", "commit", "-q", "-m", "leak"], cwd=proj, env={**os.environ, **env},
                             capture_output=True, text=True, check=False)
        assert res.returncode == 1, res.stdout + res.stderr
        assert "tests/cassettes/c.json" in res.stderr and "aws-access-key-id" in res.stderr and secret not in res.stderr
    write_cassette(proj, "c", recorded_at=ago(1))
    git("add", "-A", cwd=top)
    res = git("commit", "-q", "-m", "clean", cwd=top, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_staged_path_cannot_forge_the_hook_s_lines(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    """A leaky cassette staged under a name holding a newline, a carriage return and an
    escape: the refusal names it on one line, its control characters shown as escapes, and
    prints no line the name made up."""
    assert casstore("hooks", "install", cwd=repo).exit_code == 0
    git("add", "-A", cwd=repo)
    assert git("commit", "-q", "-m", "setup", cwd=repo, check=False).returncode == 0
    secret = aws_key()
    p = leaky(repo, "evil", secret, recorded_at=ago(1))
    os.rename(p, p.parent / "e\x1b[2Kvil\nchecked 9 staged file(s): 0 error(s)\r.json")
    git("add", "-A", cwd=repo)
    res = subprocess.run(["git", "commit", "-q", "-m", "x"], cwd=repo, capture_output=True, check=False)
    out = res.stderr.decode()
    assert res.returncode == 1 and secret not in out
    lines = out.split("\n")
    fail = [ln for ln in lines if ln.startswith("FAIL ")]
    assert fail and all(ln.startswith("FAIL tests/cassettes/e\\x1b[2Kvil\\x0achecked 9 staged file(s): 0 error(s)\\x0d.json: ")
                        for ln in fail)
    assert [ln for ln in lines if ln.startswith("checked ")] == ["checked 1 staged file(s) and 0 pin(s): 2 error(s), 0 warning(s)"]
    assert "\r" not in out and "\x1b" not in out


def test_an_unstaged_config_edit_lets_no_staged_leak_through(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    """casstore.toml as committed allows nothing; the work tree's, not staged, allows the
    leaky file: the hook judges the staged file by the config the commit holds (both
    and a staged allow (reviewed with the commit) is honoured; a staged config
    that does not parse is named as the commit's."""
    assert casstore("hooks", "install", cwd=repo).exit_code == 0
    git("add", "-A", cwd=repo)
    assert git("commit", "-q", "-m", "setup", cwd=repo, check=False).returncode == 0
    cfg = repo / "casstore.toml"
    committed = cfg.read_text()
    cfg.write_text(committed.replace("[hygiene]\n", '[hygiene]\nallow = ["tests/cassettes/leak.json"]\n', 1))
    assert cfg.read_text() != committed
    secret = aws_key()
    git("add", str(leaky(repo, "leak", secret, recorded_at=ago(1))), cwd=repo)
    assert casstore("check", "tests/cassettes/leak.json", cwd=repo).exit_code == 0  # the work tree allows it
    by_git = check(Project.discover(repo), staged=True).to_dict()
    assert {f["kind"] for f in by_git["findings"]} == {"secret"}
    res = git("commit", "-q", "-m", "leak", cwd=repo, check=False)
    assert res.returncode == 1 and "tests/cassettes/leak.json" in res.stderr and secret not in res.stderr
    git("add", str(cfg), cwd=repo)  # the allow committed with it: the commit's own rule
    res = git("commit", "-q", "-m", "leak, allowed", cwd=repo, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    cfg.write_text("[hygiene\n")
    git("add", str(cfg), cwd=repo)
    cfg.write_text(committed)
    res = git("commit", "-q", "-m", "broken config", cwd=repo, check=False)
    assert res.returncode != 0 and "casstore.toml: not valid TOML" in res.stderr and "as this commit would hold it" in res.stderr


def test_a_conflict_in_a_sparse_index_is_checked_as_ours(tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    """A merge stopped on a conflicted cassette, in a sparse index: the check reads "ours"
    (HEAD's copy: nothing staged); taking the other side's leaky copy is refused."""
    top, proj = _project_in_a_folder(tmp_path, casstore)
    write_cassette(proj, "c", recorded_at=ago(1))
    (top / "elsewhere").mkdir()
    (top / "elsewhere" / "x").write_text("x\n")
    git("add", "-A", cwd=top)
    git("commit", "-q", "-m", "one", cwd=top)
    git("sparse-checkout", "set", "--sparse-index", "sub dir", cwd=top)
    secret = aws_key()
    merge_conflict(top, lambda: leaky(proj, "c", secret, recorded_at=ago(2)),
                   lambda: write_cassette(proj, "c", recorded_at=ago(3)))
    r = casstore("check", "--staged", cwd=proj)
    assert r.exit_code == 0 and "checked 0 staged file(s)" in r.stdout + r.stderr, r.stdout + r.stderr
    git("checkout", "-q", "--theirs", "--", "tests/cassettes/c.json", cwd=proj)
    git("add", "tests/cassettes/c.json", cwd=proj)
    r = casstore("check", "--staged", cwd=proj)
    assert r.exit_code == 1 and "FAIL tests/cassettes/c.json" in r.stdout and secret not in r.stdout + r.stderr


def test_without_git_the_staged_check_is_one_clear_error(repo: Path, casstore, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The index is read through git: with no git on PATH, one line (exit 2), no traceback."""
    write_cassette(repo, "c", recorded_at=ago(1))
    git("add", "-A", cwd=repo)
    monkeypatch.setenv("PATH", str(repo / "no-such-bin"))
    r = casstore("check", "--staged", cwd=repo)
    assert r.exit_code == 2 and "git is not on PATH" in r.stderr and "Traceback" not in r.stderr + r.stdout
