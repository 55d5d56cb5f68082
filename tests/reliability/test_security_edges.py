"""Issue #16, item 7: credentials in remote URLs never printed; Windows reserved names refused
as cassette names; the cache never writes through a symlink that leaves it.

Through the command line (in-process and as a real process) and the library, with the moto
S3 server on loopback where a store is involved. Every secret is fake and built at run time.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

import casstore as cs
from casstore.errors import InvalidName
from casstore.model.names import name_from_test_id, validate_name
from casstore.model.urls import mask_url
from casstore.store.backends import open_store
from tests.helpers.cassettes import write_cassette
from tests.helpers.commands import git, run_casstore_subprocess
from tests.helpers.figures import record
from tests.helpers.gitrepo import commit, pin

SECTION = "security edges (CLI)"
FAKE_USER = "AKIA" + "Q" * 16
FAKE_SECRET = "wJalr" + "z" * 35


def one_line_refusal(r, *needles: str, code: int) -> str:  # type: ignore[no-untyped-def]
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert errors, r.stderr
    for n in needles:
        assert n in errors[0], (n, errors)
    record(SECTION, refusals=1)
    return errors[0]


# -- credentials in URLs --------------------------------------------------------------------
@pytest.mark.parametrize(("raw", "shown"), [
    ("s3://{u}:{s}@bucket/cassettes", "s3://***@bucket/cassettes"),
    ("https://{u}:{s}@minio.internal:9000/x", "https://***@minio.internal:9000/x"),
    ("https://h/obj?X-Amz-Credential={u}&X-Amz-Signature={s}&part=1",
     "https://h/obj?X-Amz-Credential=***&X-Amz-Signature=***&part=1"),
    ("az://c/p?sv=2024-01-01&sig={s}&se=2030", "az://c/p?sv=2024-01-01&sig=***&se=2030"),
    ("cannot read objects/x from gs://{u}@bkt/p: boom", "cannot read objects/x from gs://***@bkt/p: boom"),
    ("s3://bucket/plain and bob@example.com", "s3://bucket/plain and bob@example.com"),
])
def test_mask_url(raw: str, shown: str) -> None:
    text = raw.format(u=FAKE_USER, s=FAKE_SECRET)
    assert mask_url(text) == shown
    assert mask_url(mask_url(text)) == shown  # idempotent


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _no_secret(*outputs: str) -> None:
    for out in outputs:
        assert FAKE_SECRET not in out and FAKE_USER not in out, out


def test_credentials_in_the_remote_url_are_masked_in_every_message(tmp_path: Path, casstore, s3_server,  # type: ignore[no-untyped-def]
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASSTORE_RETRY_ATTEMPTS", "1")
    monkeypatch.setenv("CASSTORE_RETRY_DEADLINE", "2")
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    url = f"s3://{FAKE_USER}:{FAKE_SECRET}@bkt-nowhere/cassettes"
    r = casstore("init", "--remote", url, "--no-check", cwd=repo)
    assert r.exit_code == 0, r.stderr
    _no_secret(r.stdout, r.stderr)
    # the endpoint carries credentials too, and nothing listens there: every error quotes it
    port = _closed_port()
    cfg = repo / "casstore.toml"
    cfg.write_text(cfg.read_text().replace(
        "# options =", f'options = {{ endpoint_url = "http://{FAKE_USER}:{FAKE_SECRET}@127.0.0.1:{port}" }}\n#'))
    pin(casstore, repo, "a")
    outputs = []
    for args in (("push",), ("pull",), ("verify", "--remote"), ("ls", "--remote"), ("status",),
                 ("status", "--json"), ("gc", "--remote", "--dry-run"), ("show", "a")):
        r = casstore(*args, cwd=repo)
        outputs.append((args, r))
        _no_secret(r.stdout, r.stderr)
    failed = [(a, r) for a, r in outputs if r.exit_code != 0]
    assert any(a == ("push",) for a, _ in failed), "push to a dead endpoint must fail"
    for args, r in failed:
        assert "Traceback" not in r.stderr, (args, r.stderr)
        assert "***@" in r.stderr or "error:" in r.stderr, (args, r.stderr)
    assert any("***@" in r.stderr for _a, r in failed), [r.stderr for _a, r in failed]
    # a real process (the installed command, stderr as CI sees it) masks the same way
    p = run_casstore_subprocess("push", cwd=repo)
    assert p.returncode == 1 and "***@" in p.stderr, p.stderr
    _no_secret(p.stdout, p.stderr)
    record(SECTION, commands_checked_for_credentials=len(outputs) + 1)


def test_a_store_never_shows_its_credentials(tmp_path: Path) -> None:
    store = open_store(f"s3://{FAKE_USER}:{FAKE_SECRET}@bkt/p", {"endpoint_url": "http://127.0.0.1:1"})
    assert FAKE_SECRET not in store.url and FAKE_SECRET not in repr(store)


def test_credential_options_are_masked_wherever_a_message_quotes_them(tmp_path: Path, casstore,  # type: ignore[no-untyped-def]
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASSTORE_RETRY_ATTEMPTS", "1")
    monkeypatch.setenv("CASSTORE_RETRY_DEADLINE", "2")
    token = "tok-" + FAKE_SECRET[::-1]
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    assert casstore("init", "--remote", "s3://bkt-nowhere/c", "--no-check", cwd=repo).exit_code == 0
    cfg = repo / "casstore.toml"
    cfg.write_text(cfg.read_text().replace("# options =", (
        f'options = {{ endpoint_url = "http://127.0.0.1:{_closed_port()}", key = "{FAKE_USER}", '
        f'secret = "{FAKE_SECRET}", client_kwargs = {{ aws_session_token = "{token}", region_name = "eu-west-1" }} }}\n#')))
    pin(casstore, repo, "a")
    for args in (("push",), ("status", "--json"), ("verify", "--remote")):
        r = casstore(*args, cwd=repo)
        _no_secret(r.stdout, r.stderr)
        assert token not in r.stdout + r.stderr
    # a backend error that quotes them (the library front, after the project was read)
    text = mask_url(f"InvalidClientTokenId: {FAKE_USER} / {FAKE_SECRET} / {token} in eu-west-1")
    assert text == "InvalidClientTokenId: *** / *** / *** in eu-west-1", text


# -- Windows reserved names ----------------------------------------------------------------
RESERVED = ["CON", "con", "Prn", "aux", "NUL", "nul.txt", "COM1", "com9", "LPT1", "lpt9.log", "a/con", "aux/b", "x/NUL.tar.gz"]


@pytest.mark.parametrize("name", RESERVED)
def test_reserved_windows_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidName, match="reserved"):
        validate_name(name)


@pytest.mark.parametrize("name", ["console", "com10", "lpt0", "auxiliary", "nul_", "con-x", "a/com", "x.con"])
def test_names_that_only_look_reserved_are_fine(name: str) -> None:
    assert validate_name(name) == name


def test_reserved_names_at_the_command_line_and_in_the_library(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    for name in ("CON", "nul", "aux", "com1"):
        path = write_cassette(repo, name)
        r = casstore("add", str(path), cwd=repo)
        line = one_line_refusal(r, name, "reserved", code=2)
        assert "Windows" in line
        path.unlink()
    assert not (repo / "casstore.lock").exists()
    with pytest.raises(InvalidName, match="reserved"):
        with cs.use("Aux", mode="replay"):
            pass
    # a test id never gives a reserved name: the plugin names cassettes from test ids
    for nodeid in ("tests/con.py::test_a", "tests/test_x.py::aux", "nul.py::t[com1]"):
        validate_name(name_from_test_id(nodeid))


def test_a_lock_written_before_the_reserved_name_rule_still_loads(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    from casstore.model.lock import parse_lock, scan_lock

    for name in ("cox", "ok"):
        assert casstore("add", str(write_cassette(repo, name)), cwd=repo).exit_code == 0
    lock = repo / "casstore.lock"
    old = lock.read_text().replace('cassettes."cox"', 'cassettes."con"').replace("cassettes.cox]", "cassettes.con]")
    # signed as "con", as the casstore of that time signed it (a signature names its cassette)
    import base64

    from casstore.store import signing

    key, con = signing.load_signing_key(), parse_lock(old.encode()).pins["con"]
    assert key is not None
    resigned = key.sign_message(signing.statement(con.digest, con.size, con.format, "con"))
    old = old.replace(con.signatures[0].sig, base64.b64encode(resigned).decode())
    # a hand-edited lock (not in our own layout: the TOML reader) and our layout (the scanner)
    for text in (old, old.replace("\n[cassettes.", "\n# reviewed\n[cassettes.", 1)):
        assert (scan_lock(text) is None) == ("# reviewed" in text)
        assert sorted(parse_lock(text.encode()).pins) == ["con", "ok"]
        lock.write_text(text)
        r = casstore("status", cwd=repo)
        assert r.exit_code == 0 and "con " in r.stdout, r.stdout + r.stderr
        r = casstore("verify", cwd=repo)
        assert r.exit_code == 0 and "verified 2/2" in r.stdout, r.stdout + r.stderr
        r = casstore("check", cwd=repo)  # a warning names it; nothing fails
        assert r.exit_code == 0, r.stdout + r.stderr
        assert "con: 'con' is a reserved Windows device name" in r.stdout + r.stderr, r.stdout + r.stderr


# -- the cache and symlinks ---------------------------------------------------------------
def test_the_cache_refuses_to_write_through_a_symlink_that_leaves_it(repo: Path, casstore, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                     isolated_user: Path) -> None:
    pin(casstore, repo, "a", answer="one")
    commit(repo, "a")
    assert casstore("push", "-q", cwd=repo).exit_code == 0
    cache = isolated_user / "cache"
    objects = cache / "objects"
    for f in objects.rglob("*"):
        f.chmod(0o755 if f.is_dir() else 0o644)
    import shutil

    shutil.rmtree(objects)
    outside = tmp_path / "outside"
    outside.mkdir()
    objects.symlink_to(outside, target_is_directory=True)  # the cache's objects lead elsewhere
    r = casstore("pull", cwd=repo)
    line = one_line_refusal(r, "a:", "symlink", code=1)
    assert "cache" in line
    assert list(outside.iterdir()) == [], "pull wrote outside the cache"
    # add writes into the cache too, and is refused the same way, all or nothing
    write_cassette(repo, "a", n=3)
    lock_before = (repo / "casstore.lock").read_text()
    r = casstore("add", "tests/cassettes/a.json", cwd=repo)
    assert r.exit_code == 1 and "symlink" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert (repo / "casstore.lock").read_text() == lock_before
    assert not any(outside.rglob("*")), "add wrote outside the cache"
    # a cache root that is itself a symlink (a cache on a bigger disk) is fine
    objects.unlink()
    real = tmp_path / "big-disk-cache"
    cache.rename(real)
    cache.symlink_to(real, target_is_directory=True)
    r = casstore("pull", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert casstore("verify", cwd=repo).exit_code == 0
    record(SECTION, symlink_writes_refused=2)


def test_status_json_masks_the_remote(tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    repo = tmp_path / "r"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    assert casstore("init", "--remote", f"s3://{FAKE_USER}:{FAKE_SECRET}@bkt/x", "--no-check", cwd=repo).exit_code == 0
    r = casstore("status", "--json", cwd=repo)
    _no_secret(r.stdout, r.stderr)
    assert json.loads(r.stdout)["remote"].startswith("s3://***@bkt")


def test_a_folder_store_refuses_to_write_through_a_symlink_planted_in_it(repo: Path, casstore,  # type: ignore[no-untyped-def]
                                                                          tmp_path: Path) -> None:
    pin(casstore, repo, "a", answer="one")
    store = repo / ".casstore" / "store"
    (store / "objects").mkdir(parents=True, exist_ok=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (store / "objects" / "sha256").symlink_to(outside, target_is_directory=True)  # a planted fan-out folder
    r = casstore("push", cwd=repo)
    assert r.exit_code == 1 and "symlink" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not any(outside.rglob("*")), "push wrote outside the store"
    # a store root that is itself a link (a store on another disk) is fine
    (store / "objects" / "sha256").unlink()
    real = tmp_path / "other-disk-store"
    store.rename(real)
    store.symlink_to(real, target_is_directory=True)
    assert casstore("push", cwd=repo).exit_code == 0
    assert any(real.rglob("*")), "the push went to the linked store"
