"""``casstore hooks install --uninstall`` takes back only what install added to .gitattributes."""

from __future__ import annotations

from pathlib import Path

from casstore.git.drivers import ATTR_LINE
from tests.helpers.commands import git


def test_a_users_gitattributes_comes_back_byte_for_byte(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    attrs = repo / ".gitattributes"
    original = b"*.png binary\r\n# keep me\r\n*.json text eol=lf"  # CRLF, no final newline
    attrs.write_bytes(original)
    assert casstore("hooks", "install", cwd=repo).exit_code == 0
    assert ATTR_LINE.encode() in attrs.read_bytes()
    r = casstore("hooks", "install", "--uninstall", cwd=repo)
    assert r.exit_code == 0, r.stderr
    # install had to end the last line to add its own; everything else is as it was
    assert attrs.read_bytes() == original + b"\r\n"


def test_a_committed_gitattributes_is_emptied_not_deleted(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    assert casstore("hooks", "install", cwd=repo).exit_code == 0
    attrs = repo / ".gitattributes"
    assert attrs.read_text().strip() == ATTR_LINE
    git("add", ".gitattributes", cwd=repo)
    git("commit", "-q", "--no-verify", "-m", "attributes", cwd=repo)
    r = casstore("hooks", "install", "--uninstall", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert attrs.exists(), "a committed file was deleted"
    assert ATTR_LINE not in attrs.read_text()
    status = git("status", "--porcelain", "--", ".gitattributes", cwd=repo).stdout
    assert status.startswith(" M"), status


def test_an_uncommitted_gitattributes_that_install_created_goes_away(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    attrs = repo / ".gitattributes"
    assert not attrs.exists()
    assert casstore("hooks", "install", cwd=repo).exit_code == 0
    assert attrs.exists()
    assert casstore("hooks", "install", "--uninstall", cwd=repo).exit_code == 0
    assert not attrs.exists()
