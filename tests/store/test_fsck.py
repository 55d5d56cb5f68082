"""`casstore verify --remote` as an fsck of the whole store."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from casstore.model.blob import compress, digest_and_size
from casstore.model.lock import Pin
from casstore.store.signing import SigningKey, make_envelope
from tests.helpers.commands import git
from tests.helpers.gitrepo import commit, hexpath, pin


def _put(store: Path, key: str, data: bytes) -> None:
    path = store / key
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.chmod(0o644)
    path.write_bytes(data)


def test_verify_remote_checks_every_object_and_envelope(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    store = repo / ".casstore" / "store"
    pin(casstore, repo, "a")
    commit(repo, "a")
    assert casstore("push", "-q", cwd=repo).exit_code == 0
    b = pin(casstore, repo, "b")
    assert casstore("push", "-q", cwd=repo).exit_code == 0
    git("checkout", "-q", "casstore.lock", cwd=repo)  # b is now an orphan (still signed)

    clean = casstore("verify", "--remote", cwd=repo)
    assert clean.exit_code == 0, clean.stderr
    assert "store: 2 object(s)" in clean.stdout and "1 not pinned by this lock (0 corrupt)" in clean.stdout
    assert f"orphan {b}" in clean.stdout

    # damage: a corrupt orphan, an unsigned orphan, a tampered envelope, a dangling and an untrusted one
    corrupt = "sha256:" + "ab" * 32
    _put(store, f"objects/sha256/{hexpath(corrupt)}", b"not zstd at all")
    data = b'{"not": "a cassette, but bytes are bytes"}'
    unsigned, size = digest_and_size(data)
    _put(store, f"objects/sha256/{hexpath(unsigned)}", compress(data))
    (env_path,) = (store / "signatures" / "sha256" / hexpath(b)).iterdir()
    env = json.loads(env_path.read_bytes())
    raw = bytearray(base64.b64decode(env["signature"]))
    raw[0] ^= 1  # a signature of the right shape that does not verify
    env["signature"] = base64.b64encode(bytes(raw)).decode()
    _put(store, str(env_path.relative_to(store)), json.dumps(env).encode())
    stranger = SigningKey.generate("stranger@example.com")
    upin = Pin(name="u", digest=unsigned, size=size)
    usig = stranger.sign_pin(upin)
    dangling = "sha256:" + "cd" * 32
    dpin = Pin(name="d", digest=dangling, size=1)
    _put(store, f"signatures/sha256/{hexpath(dangling)}/{stranger.keyid}.sig",
         make_envelope(dpin, stranger, stranger.sign_pin(dpin)))

    r = casstore("verify", "--remote", cwd=repo)
    assert r.exit_code == 1
    assert f"error: store: corrupt object {corrupt}: not a zstd frame" in r.stderr, r.stderr
    assert f"error: store: object {unsigned} has no signature envelope" in r.stderr
    assert f"error: store: bad signature envelope signatures/sha256/{hexpath(b)}/" in r.stderr
    assert "the signature does not verify" in r.stderr
    assert f"stray signatures/sha256/{hexpath(dangling)}/{stranger.keyid}.sig (no object" in r.stdout
    assert "Traceback" not in r.stderr

    # an envelope that verifies but by a key nobody trusts is reported, not a failure
    _put(store, f"signatures/sha256/{hexpath(unsigned)}/{stranger.keyid}.sig", make_envelope(upin, stranger, usig))
    r2 = casstore("verify", "--remote", "--json", cwd=repo)
    fsck = r2.json["fsck"]
    assert fsck["untrusted"] == [f"{unsigned} signed by stranger@example.com ({stranger.keyid}), a key not in trusted_keys"]
    assert unsigned not in fsck["unsigned"]
    assert [c.split(":")[0] + ":" + c.split(":")[1] for c in fsck["corrupt"]] == [corrupt]
    assert len(fsck["bad_signatures"]) == 1 and fsck["dangling_signatures"]

    # gc --remote --grace 0 clears the orphans and the dangling envelope; the pinned object stays
    g = casstore("gc", "--remote", "--grace", "0", cwd=repo)
    assert g.exit_code == 0, g.stderr
    final = casstore("verify", "--remote", cwd=repo)
    assert final.exit_code == 0, final.stderr
    assert "store: 1 object(s)" in final.stdout and "0 dangling" in final.stdout


@pytest.mark.parametrize("forged", ["signer", "keyid"])
def test_an_envelope_signer_with_a_line_break_is_reported_on_one_line(repo: Path, casstore, forged: str) -> None:  # type: ignore[no-untyped-def]
    # a stored envelope's signer is text of its writer's choosing: "stranger\nok: ..." in the
    # untrusted-key report printed a line of theirs; so is the key id it names ("it is stored
    # as key K but names key x\nok: ...")
    store = repo / ".casstore" / "store"
    pin(casstore, repo, "a")
    assert casstore("push", "-q", cwd=repo).exit_code == 0
    data = b'{"an": "orphan"}'
    digest, size = digest_and_size(data)
    _put(store, f"objects/sha256/{hexpath(digest)}", compress(data))
    stranger = SigningKey.generate("stranger\nok: store is clean" if forged == "signer" else "stranger")
    upin = Pin(name="u", digest=digest, size=size)
    env = make_envelope(upin, stranger, stranger.sign_pin(upin))
    if forged == "keyid":
        env = json.dumps({**json.loads(env), "keyid": "x\nok: store is clean"}).encode()
    _put(store, f"signatures/sha256/{hexpath(digest)}/{stranger.keyid}.sig", env)
    r = casstore("verify", "--remote", cwd=repo)
    out = r.stdout + r.stderr
    assert "stranger" in out and stranger.keyid in out if forged == "signer" else r.exit_code == 1 and "names key" in out, out
    assert not any(ln.startswith("ok:") for ln in out.splitlines()), out
