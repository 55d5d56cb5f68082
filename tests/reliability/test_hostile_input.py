"""Hostile input at the command line: one clear line, exit 1 or 2, never a traceback.

Symlinks out of the repository, JSON nested 100,000 deep, invalid UTF-8 everywhere, blobs
that are valid zstd but not JSON (or not a cassette), a zstd bomb without a content size,
hostile names. Plus regression tests for the parser crashes the fuzzing found.
(Hostile cassette names in `add` and in the lock are in test_cli_foundation.py.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import zstandard

from casstore import config
from casstore.errors import CassetteFormatError, CasstoreError
from casstore.model import blob, cassette, lock, names
from casstore.project import Project
from casstore.store.backends import object_key
from tests.helpers.cassettes import make_cassette, write_cassette
from tests.helpers.commands import refused as cli_refused
from tests.helpers.figures import record

SECTION = "hostile input (CLI)"


def refused(r, *needles: str, code: int | None = None) -> str:  # type: ignore[no-untyped-def]
    line = cli_refused(r, *needles, code=code)
    record(SECTION, refused_cleanly=1)
    return line


# -- symlinks -------------------------------------------------------------------------
@pytest.fixture
def outside(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.json").write_text(json.dumps(make_cassette("secret")))
    return d


def test_symlinked_file_out_of_the_repo_is_refused(repo, casstore, outside):
    cdir = repo / "tests" / "cassettes"
    (cdir / "evil.json").symlink_to(outside / "secret.json")
    r = casstore("add", "tests/cassettes/evil.json", cwd=repo)
    refused(r, "outside the project", code=2)
    write_cassette(repo, "good")
    r = casstore("add", "tests/cassettes", cwd=repo)  # the folder holds the link: all or nothing
    refused(r, "evil.json", "outside the project", code=2)
    assert not (repo / "casstore.lock").exists()


def test_symlinked_folder_out_of_the_repo_is_refused(repo, casstore, outside):
    (repo / "tests" / "cassettes" / "linked").symlink_to(outside, target_is_directory=True)
    r = casstore("add", "tests/cassettes/linked/secret.json", cwd=repo)
    refused(r, "outside the project", code=2)
    r = casstore("add", "tests/cassettes/linked", cwd=repo)
    refused(r, "outside the project", code=2)
    # the whole cassette dir being a link out of the repository is refused the same way
    cdir = repo / "tests" / "cassettes"
    for p in cdir.iterdir():
        p.unlink()
    cdir.rmdir()
    cdir.symlink_to(outside, target_is_directory=True)
    r = casstore("add", "tests/cassettes", cwd=repo)
    refused(r, "outside the project", code=2)
    assert not (repo / "casstore.lock").exists()


def test_symlink_inside_the_repo_is_fine(repo, casstore):
    src = write_cassette(repo, "real")
    (repo / "tests" / "cassettes" / "alias.json").symlink_to(src)
    r = casstore("add", "tests/cassettes/alias.json", cwd=repo)
    assert r.exit_code == 0, r.stderr


# -- malformed bytes ---------------------------------------------------------------------
def test_json_nested_100000_deep(repo, casstore):
    path = repo / "tests" / "cassettes" / "deep.json"
    path.write_text('{"format": "casstore.cassette/v1", "name": "deep", "entries": ' + "[" * 100_000 + "]" * 100_000 + "}")
    r = casstore("add", str(path), cwd=repo)
    refused(r, "nested deeper", code=2)


def test_invalid_utf8_everywhere(repo, casstore):
    path = repo / "tests" / "cassettes" / "bad.json"
    path.write_bytes(b'{"format": "casstore.cassette/v1", "name": "\xff\xfe"}')
    refused(casstore("add", str(path), cwd=repo), "not valid UTF-8", code=2)
    write_cassette(repo, "ok")
    assert casstore("add", "tests/cassettes/ok.json", cwd=repo).exit_code == 0
    lock_path = repo / "casstore.lock"
    good_lock = lock_path.read_bytes()
    lock_path.write_bytes(good_lock.replace(b'"ok"', b'"o\xc0k"'))
    refused(casstore("verify", cwd=repo), "not valid UTF-8", code=2)
    lock_path.write_bytes(good_lock)
    tk = repo / ".casstore" / "trusted_keys"
    good_tk = tk.read_bytes()
    tk.write_bytes(good_tk + b"mallory\xff ed25519 AAAA\n")
    refused(casstore("verify", cwd=repo), "not valid UTF-8", code=1)
    tk.write_bytes(good_tk)
    cfg = repo / "casstore.toml"
    cfg.write_bytes(cfg.read_bytes() + b'\n# \xff\xfe\n')
    refused(casstore("ls", cwd=repo), "not valid", code=2)


def test_deeply_nested_toml_config_and_lock(repo, casstore):
    cfg = repo / "casstore.toml"
    good = cfg.read_text()
    cfg.write_text(good + "\n[redaction]\npaths = " + "[" * 100_000 + "]" * 100_000 + "\n")
    refused(casstore("ls", cwd=repo), "casstore.toml", code=2)
    cfg.write_text(good)
    (repo / "casstore.lock").write_text("version = 1\nx = " + "[" * 100_000 + "]" * 100_000 + "\n")
    refused(casstore("verify", cwd=repo), "casstore.lock", code=2)


def _pin_raw_bytes(repo: Path, name: str, data: bytes, *, frame: bytes | None = None) -> None:
    """Pin ``data`` (whatever it is) by digest, unsigned, in the local store: as a lock edit would."""
    digest, size = blob.digest_and_size(data)
    store = repo / ".casstore" / "store"
    path = store / object_key(digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(frame if frame is not None else blob.compress(data))
    cfg = repo / "casstore.toml"
    cfg.write_text(cfg.read_text().replace("require_signatures = true", "require_signatures = false"))
    (repo / "casstore.lock").write_text(lock.format_lock(lock.Lock().with_pin(lock.Pin(name=name, digest=digest, size=size))))


@pytest.mark.parametrize("payload, needle", [
    (b"\x00\x01\x02 not json at all \xff", "not valid UTF-8"),
    (b"this is text but not JSON", "not valid JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "nested deeper"),
    (json.dumps({"format": "something/else", "name": "x"}).encode(), "not a valid"),
], ids=["binary", "text", "deep", "other-json"])
def test_valid_zstd_that_is_not_a_cassette(repo, casstore, payload, needle):
    _pin_raw_bytes(repo, "x", payload)
    assert casstore("pull", cwd=repo).exit_code == 0  # the bytes are exactly what the lock pins ...
    r = casstore("show", "x", cwd=repo)  # ... but they are not a cassette: refused on use
    refused(r, "x", needle)
    with pytest.raises(CasstoreError):
        Project.discover(repo).resolve_cassette("x")


def test_zstd_bomb_without_content_size_in_the_store(repo, casstore):
    data = json.dumps(make_cassette("x")).encode()
    cobj = zstandard.ZstdCompressor(level=1, write_content_size=False).compressobj()
    bomb = b"".join(cobj.compress(bytes(1 << 20)) for _ in range(512)) + cobj.flush()  # 512 MiB of zeros
    _pin_raw_bytes(repo, "x", data, frame=bomb)
    r = casstore("pull", cwd=repo)
    # the 512 MiB bomb is a ~50 KiB frame: over the frame bound of the ~2 KiB pin, refused unread
    refused(r, "x:", "larger than its pin allows", code=1)
    cache = Path(os.environ["CASSTORE_CACHE_DIR"])
    assert not [p for p in cache.rglob("*") if p.is_file() and "objects" in p.parts]


def test_hostile_names_on_the_command_line(repo, casstore):
    write_cassette(repo, "ok")
    assert casstore("add", "tests/cassettes/ok.json", cwd=repo).exit_code == 0
    for name in ["../../etc/passwd", "/etc/passwd", "a\\b", "x" * 10_000, "ok/../ok"]:
        refused(casstore("show", name, cwd=repo), "not pinned")
        refused(casstore("pull", name, cwd=repo), "not pinned", code=2)
        refused(casstore("verify", name, cwd=repo), "not pinned", code=2)


# -- regressions of what the fuzzing found ----------------------------------------------------
def test_regression_models_not_a_list():
    data = make_cassette("m")
    for models in (5, "abc", {"a": 1}, None):
        data["meta"]["models"] = models
        cas = cassette.load_bytes(json.dumps(data).encode())
        assert cas.models() == ["gpt-test"]  # from the entries; the bad meta field is ignored


@pytest.mark.parametrize("nodeid", [
    "tests/test_a.py::test_x[data.json]", "a.py::test[.json]", "t.py::" + "x" * 194 + "::y",
    "t.py::" + "x" * 193 + ".json", "::", "",
], ids=["json-param", "dot-json", "long", "long-json", "colons", "empty"])
def test_regression_test_ids_always_give_a_valid_name(nodeid):
    names.validate_name(names.name_from_test_id(nodeid))


def test_regression_pyproject_with_odd_tool_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text("tool = 1\n")
    assert config.load_config(tmp_path) == config.Config()
    (tmp_path / "pyproject.toml").write_text("[tool]\ncasstore = 1\n")
    with pytest.raises(CasstoreError):
        config.load_config(tmp_path)


def test_regression_lock_version_true_is_not_1():
    with pytest.raises(CasstoreError, match="version"):
        lock.parse_lock("version = true\n")


def test_regression_deep_toml_is_a_config_error(tmp_path):
    (tmp_path / "casstore.toml").write_text("a = " + "{b=" * 5000 + "1" + "}" * 5000 + "\n")
    # tomllib/tomli raise RecursionError today; a release may give its own TOMLDecodeError
    # with its own words: either way one line of ours naming the file
    with pytest.raises(CasstoreError, match=r"^casstore\.toml: ") as ei:
        config.load_config(tmp_path)
    assert "\n" not in str(ei.value)


def test_cassette_format_errors_are_one_line():
    with pytest.raises(CassetteFormatError) as ei:
        cassette.load_bytes(b'{"format": 1, "name": "../x", "entries": [1, {"kind": 2}]}')
    assert "\n" not in str(ei.value)
