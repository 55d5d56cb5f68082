"""``casstore status``: how each working copy compares with its pin, and the unpinned ones.

The working copies are read without the remembered digests (a fresh clone, a new cache),
where status parses each file once and validates only those that differ from their pin.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from casstore.ops.inspect import status
from casstore.project import Project
from tests.helpers.cassettes import make_cassette, write_cassette


def _states(repo: Path) -> dict[str, str]:
    return {r["name"]: r["working_copy"] for r in status(Project.discover(repo), remote=False)["pins"]}


def test_working_copies_compare_by_content_not_layout(repo: Path, casstore, isolated_user) -> None:  # type: ignore[no-untyped-def]
    for name in ("same", "reformatted", "modified", "not_a_cassette", "other_name", "nan"):
        write_cassette(repo, name)
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    cdir = repo / "tests" / "cassettes"
    doc = json.loads((cdir / "reformatted.json").read_text())
    (cdir / "reformatted.json").write_text(json.dumps(doc, indent=None, sort_keys=False))  # another layout
    write_cassette(repo, "modified", n=3)
    (cdir / "not_a_cassette.json").write_text(json.dumps({"format": "casstore.cassette/v9", "name": "x"}))
    doc = json.loads((cdir / "other_name.json").read_text())
    (cdir / "other_name.json").write_text(json.dumps({**doc, "name": "../escape"}))
    (cdir / "nan.json").write_text((cdir / "same.json").read_text().replace('"duration_ms": 12', '"duration_ms": NaN'))
    assert _states(repo) == {"same": "same", "reformatted": "same", "modified": "modified",
                             "not_a_cassette": "invalid", "other_name": "invalid", "nan": "invalid"}


def test_an_integer_past_64_bits_is_not_the_float_pinned(repo: Path, casstore, isolated_user) -> None:  # type: ignore[no-untyped-def]
    """The working copy is proven equal to its pin by orjson (one parse, one write); orjson
    reads 18446744073709551616 as the float 1.8446744073709552e+19, which is what the pin
    holds here: that file is not the pinned cassette, and status must not say "same"."""
    write_cassette(repo, "big", body={"n": 1.8446744073709552e19})
    write_cassette(repo, "small", body={"n": 2**62})
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    cdir = repo / "tests" / "cassettes"
    text = (cdir / "big.json").read_text()
    assert "1.8446744073709552e+19" in text
    (cdir / "big.json").write_text(text.replace("1.8446744073709552e+19", "18446744073709551616"))
    assert _states(repo) == {"big": "modified", "small": "same"}


def test_unpinned_working_copies_are_listed_in_path_order(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    write_cassette(repo, "a")
    assert casstore("add", "tests/cassettes/a.json", cwd=repo).exit_code == 0
    for name in ("a-b", "a/b", "A", "z/y/x", "a/b/c"):
        write_cassette(repo, name)
    (repo / "tests" / "cassettes" / "notes.txt").write_text("not a cassette")
    st = casstore("status", "--offline", "--json", cwd=repo).json
    assert st["unpinned"] == ["A", "a/b/c", "a/b", "a-b", "z/y/x"]  # part by part, as sorted paths order them
    out = casstore("status", "--offline", cwd=repo).stdout.splitlines()
    assert out[1].startswith("a ") and "working copy: same" in out[1]
    assert [line.split()[0] for line in out[2:]] == st["unpinned"]


def test_the_status_after_add_uses_the_digests_add_computed(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    cdir = repo / "tests" / "cassettes"
    for name in ("a", "b"):
        write_cassette(repo, name)
        os.utime(cdir / f"{name}.json", (1_600_000_000, 1_600_000_000))  # written long ago
    outside = repo / "elsewhere" / "c.json"
    outside.parent.mkdir()
    outside.write_text(json.dumps(make_cassette("c")))
    os.utime(outside, (1_600_000_000, 1_600_000_000))
    assert casstore("add", "tests/cassettes", str(outside), cwd=repo).exit_code == 0
    write_cassette(repo, "c")  # the working copy of c was not what add read: status reads it
    # Same size, same mtime, same inode, other content: only a remembered digest says "same"
    # (git's index has the same blind spot; `touch` or any real edit changes the mtime).
    for name in ("a", "c"):
        path = cdir / f"{name}.json"
        text = path.read_text()
        with open(path, "r+") as fh:
            fh.write(text.replace("answer 0", "answer 9"))
        os.utime(path, (1_600_000_000, 1_600_000_000))
    assert _states(repo) == {"a": "same", "b": "same", "c": "modified"}
