"""casstore.git.plumbing: the pre-commit check reads the index and the objects through git's
own commands (no dulwich), and gets what the dulwich reader gets."""

from __future__ import annotations

import base64
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from casstore.git import plumbing
from casstore.git.plumbing import GitCommands
from casstore.git.repo import GitRepo
from casstore.ops.check import check
from casstore.project import Project
from tests.helpers.cassettes import leaky, write_cassette
from tests.helpers.commands import git
from tests.helpers.fakes import ago, aws_key


def test_cat_reads_what_dulwich_reads(repo: Path) -> None:
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
    assert got == GitRepo(repo).cat(specs)  # type: ignore[arg-type]
    assert got is not None and got[0] == (repo / "tests/cassettes/a.json").read_bytes() and got[1] == b""
    assert got[2] == bytes(range(256)) * 3 + b"\n\n" and got[4:] == [None, None, None]
    assert cmds.cat([b"HEAD:a\nb"]) is None  # not a name the batch protocol can carry
    sub = repo / "tests" / "cassettes"
    assert GitCommands.open(sub).prefix == "tests/cassettes/"  # type: ignore[union-attr]


def test_no_commit_yet_or_no_repository_is_none(tmp_path: Path) -> None:
    assert GitCommands.open(tmp_path) is None  # not a work tree (the caller takes dulwich)
    git("init", "-q", cwd=tmp_path)
    (tmp_path / "x.json").write_text("{}")
    git("add", "-A", cwd=tmp_path)
    cmds = GitCommands.open(tmp_path)
    assert cmds is not None and cmds.staged_shas() is None  # no HEAD: diff-index cannot answer


def test_staged_check_by_git_is_the_dulwich_report(tmp_path: Path, casstore, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A project in a subfolder of the repository: changed and new cassettes, a changed lock
    and a changed trusted_keys staged; both readers give the same report."""
    top = tmp_path / "top"
    top.mkdir()
    git("init", "-q", cwd=top)
    proj = top / "sub dir"
    proj.mkdir()
    assert casstore("init", cwd=proj).exit_code == 0
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
    monkeypatch.setattr(plumbing.GitCommands, "open", classmethod(lambda cls, cwd: None))
    by_dulwich = check(Project.discover(proj), staged=True).to_dict()
    assert by_git == by_dulwich
    assert by_git["files"] == ["tests/cassettes/a.json", "tests/cassettes/c.json"]  # the lock is judged by its pins
    assert by_git["pins_checked"] == 1 and by_git["pins_scanned"] == 0  # a.json itself was scanned
    assert {(f["kind"], f["file"]) for f in by_git["findings"]} == {("secret", "tests/cassettes/c.json")}
    assert secret not in str(by_git)
