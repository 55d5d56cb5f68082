"""casstore/model/cassette.py's read_file (what ``casstore add`` reads each working copy
with): the bytes and the errors of ``open(path, "rb").read()``, the stat taken before the read."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest

from casstore.errors import CassetteFormatError
from casstore.model.cassette import read_file


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 70_000])
def test_a_file_reads_as_the_buffered_read_reads_it(tmp_path: Path, size: int) -> None:
    path = tmp_path / "c.json"
    path.write_bytes(os.urandom(size))
    data, st = read_file(path)
    assert data == path.read_bytes() and st.st_size == size and st.st_ino == path.stat().st_ino


def test_errors_name_the_file_as_before(tmp_path: Path) -> None:
    with pytest.raises(CassetteFormatError, match="no such cassette file"):
        read_file(tmp_path / "missing.json")
    # the OS's own reason, in the words of this platform's C library
    with pytest.raises(CassetteFormatError, match=rf"cannot read \({re.escape(os.strerror(errno.EISDIR))}\)"):
        read_file(tmp_path)
    if os.name == "posix" and os.geteuid() != 0:
        locked = tmp_path / "locked.json"
        locked.write_bytes(b"{}")
        locked.chmod(0)
        with pytest.raises(CassetteFormatError, match=rf"cannot read \({re.escape(os.strerror(errno.EACCES))}\)"):
            read_file(locked)
