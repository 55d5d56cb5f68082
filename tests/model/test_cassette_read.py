"""casstore/model/cassette.py's read_file (what ``casstore add`` reads each working copy
with): the bytes and the errors of ``open(path, "rb").read()``, the stat taken before the
read, whatever the file's size and however the reads come back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from casstore.errors import CassetteFormatError
from casstore.model import cassette
from casstore.model.cassette import read_file


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 70_000])
def test_a_file_reads_as_the_buffered_read_reads_it(tmp_path: Path, size: int) -> None:
    path = tmp_path / "c.json"
    path.write_bytes(os.urandom(size))
    data, st = read_file(path)
    assert data == path.read_bytes() and st.st_size == size and st.st_ino == path.stat().st_ino


@pytest.mark.parametrize("first", ["short", "grown", "large"])
def test_a_read_that_is_not_the_whole_file_reads_on_to_the_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                first: str) -> None:
    """The file shrank or grew between its stat and its read (the first read is shorter or
    longer than the stat said), or is read in parts: the bytes are those at the read."""
    path = tmp_path / "c.json"
    path.write_bytes(b"x" * 5000)
    real_read, real_fstat = os.read, os.fstat
    if first == "short":  # a first read that stops early: the rest is read after it
        monkeypatch.setattr(cassette.os, "read", lambda fd, n: real_read(fd, min(n, 100)))
    elif first == "grown":  # the stat before the file grew
        monkeypatch.setattr(cassette.os, "fstat", lambda fd: os.stat_result((*real_fstat(fd)[:6], 1000, *real_fstat(fd)[7:])))
    else:
        monkeypatch.setattr(cassette, "_ONE_READ", 10)
    assert read_file(path)[0] == b"x" * 5000


def test_errors_name_the_file_as_before(tmp_path: Path) -> None:
    with pytest.raises(CassetteFormatError, match="no such cassette file"):
        read_file(tmp_path / "missing.json")
    with pytest.raises(CassetteFormatError, match=r"cannot read \(Is a directory\)"):
        read_file(tmp_path)
    if os.name == "posix" and os.geteuid() != 0:
        locked = tmp_path / "locked.json"
        locked.write_bytes(b"{}")
        locked.chmod(0)
        with pytest.raises(CassetteFormatError, match=r"cannot read \(Permission denied\)"):
            read_file(locked)
