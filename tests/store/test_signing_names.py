"""A signature names its cassette (issue 29, item 10): a pin re-pointed at another cassette's
signed digest no longer verifies, and a signature made before names were bound stays valid and
is reported as such (real git, the CLI, a local store)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from casstore.model.lock import Lock, Pin, Signature, format_lock, parse_lock
from casstore.store import signing
from tests.helpers.cassettes import make_cassette
from tests.helpers.gitrepo import commit


def _write(repo: Path, name: str, answer: str) -> Path:
    path = repo / "tests" / "cassettes" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(make_cassette(name, body={"choices": [{"message": {"content": answer}}]})))
    return path


def _rewrite(repo: Path, change) -> None:  # type: ignore[no-untyped-def]
    lock_file = repo / "casstore.lock"
    lock = parse_lock(lock_file.read_text())
    lock_file.write_text(format_lock(Lock(pins=dict(sorted(change(dict(lock.pins)).items())))))


def _signed(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    for name, answer in (("alpha", "reviewed alpha"), ("beta", "reviewed beta")):
        assert casstore("add", str(_write(repo, name, answer)), cwd=repo).exit_code == 0
    assert casstore("push", cwd=repo).exit_code == 0
    commit(repo, "alpha and beta, signed")


def test_a_pin_repointed_at_another_cassettes_signed_digest_is_refused(repo: Path, casstore, monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _signed(repo, casstore)

    def repoint(pins: dict[str, Pin]) -> dict[str, Pin]:
        a = pins["alpha"]
        pins["beta"] = Pin("beta", a.digest, a.size, a.format, a.entries, a.recorded_from, a.recorded_to, a.models,
                           a.signatures, a.extra)
        return pins

    _rewrite(repo, repoint)
    r = casstore("verify", "--trust-from", "HEAD", cwd=repo)
    assert r.exit_code == 1, r.stdout + r.stderr
    assert any(ln.startswith("error:") and "beta:" in ln and "bad signature" in ln for ln in r.stderr.splitlines()), r.stderr
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(tmp_path / "ci-cache"))
    r = casstore("pull", "--frozen", "--trust-from", "HEAD", cwd=repo)
    assert r.exit_code == 1 and "beta:" in r.stderr and "bad signature" in r.stderr, r.stdout + r.stderr
    assert "alpha:" not in r.stderr  # the untouched pin is fine


def test_a_signature_made_before_names_were_bound_stays_valid_and_is_reported(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    _signed(repo, casstore)
    key = signing.load_signing_key()
    assert key is not None

    def unnamed(pins: dict[str, Pin]) -> dict[str, Pin]:  # alpha signed as casstore signed before
        a = pins["alpha"]
        raw = key.sign_message(signing.statement(a.digest, a.size, a.format))
        pins["alpha"] = a.with_signatures([Signature(keyid=key.keyid, signer=key.identity, sig=base64.b64encode(raw).decode())])
        return pins

    _rewrite(repo, unnamed)
    r = casstore("verify", "--trust-from", "HEAD", cwd=repo)
    assert r.exit_code == 0, r.stdout + r.stderr
    notes = [ln for ln in r.stdout.splitlines() if "before names were bound" in ln]
    assert len(notes) == 1 and notes[0].startswith("alpha:"), r.stdout
    r = casstore("verify", "--remote", cwd=repo)
    assert r.exit_code == 0, r.stdout + r.stderr
    assert [ln for ln in r.stdout.splitlines() if "before names were bound" in ln] == notes
    # `add` signs it again, naming the cassette: the note goes away
    assert casstore("add", str(repo / "tests" / "cassettes" / "alpha.json"), cwd=repo).exit_code == 0
    r = casstore("verify", cwd=repo)
    assert r.exit_code == 0 and "before names were bound" not in r.stdout, r.stdout + r.stderr
