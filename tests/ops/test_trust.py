"""Trust at the command line: rollbacks, removed keys and unparsable trusted_keys fail closed.

- a blob swapped in the bucket for another *validly signed* blob (a rollback to an older
  recording) is refused, because the lock pins the digest;
- a signature by a key that was removed from trusted_keys is refused;
- a trusted_keys line that does not parse is an error for every command that reads it,
  even with signatures switched off: never skipped.
(Unit-level versions are in test_signing.py.)
"""

from __future__ import annotations

import base64
import json
import os
import re

import pytest

from casstore.errors import IntegrityError, SignatureError
from casstore.model.lock import parse_lock
from casstore.project import Project
from casstore.store.backends import object_key, signature_key
from tests.helpers.cassettes import make_cassette, write_cassette
from tests.helpers.commands import git
from tests.helpers.commands import refused as cli_refused
from tests.helpers.figures import record

SECTION = "trust (CLI)"


def refused(r, *needles: str, code: int = 1) -> None:  # type: ignore[no-untyped-def]
    cli_refused(r, *needles, code=code)
    record(SECTION, refusals=1)


def _locked_pin(root, name):  # type: ignore[no-untyped-def]
    return parse_lock((root / "casstore.lock").read_bytes()).pins[name]


def _write_version(root, name: str, answer: str):  # type: ignore[no-untyped-def]
    path = root / "tests" / "cassettes" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(make_cassette(name, body={"choices": [{"message": {"content": answer}}]})))
    return path


@pytest.mark.parametrize("same_size", [False, True], ids=["older-recording", "same-size-forgery"])
def test_rollback_to_another_validly_signed_blob_is_refused(tmp_path, casstore, s3_server, s3_url, monkeypatch,
                                                            same_size):
    root = tmp_path / "work"
    root.mkdir()
    git("init", "-q", cwd=root)
    assert casstore("init", "--remote", s3_url, cwd=root).exit_code == 0
    _write_version(root, "x", "the old answer" if not same_size else "answer AAAA")
    assert casstore("add", "tests/cassettes/x.json", cwd=root).exit_code == 0
    old = _locked_pin(root, "x")
    assert casstore("push", cwd=root).exit_code == 0
    _write_version(root, "x", "the new, reviewed answer" if not same_size else "answer BBBB")
    assert casstore("add", "tests/cassettes/x.json", cwd=root).exit_code == 0
    new = _locked_pin(root, "x")
    assert casstore("push", cwd=root).exit_code == 0
    assert old.digest != new.digest and (old.size == new.size) == same_size
    # someone with write access to the bucket puts the old (validly signed) object and its
    # envelope under the new digest: a rollback the signatures alone cannot see
    bucket, prefix = s3_url[len("s3://"):].split("/", 1)
    s3 = s3_server.client()

    def get(key: str) -> bytes:
        return s3.get_object(Bucket=bucket, Key=f"{prefix}/{key}")["Body"].read()

    s3.put_object(Bucket=bucket, Key=f"{prefix}/{object_key(new.digest)}", Body=get(object_key(old.digest)))
    keyid = new.signatures[0].keyid
    s3.put_object(Bucket=bucket, Key=f"{prefix}/{signature_key(new.digest, keyid)}",
                  Body=get(signature_key(old.digest, keyid)))
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(tmp_path / "fresh-cache"))
    r = casstore("pull", "--frozen", cwd=root)
    refused(r, "x:", new.digest[:19], "content does not match" if same_size else "lock pins")
    r = casstore("verify", "--remote", cwd=root)
    refused(r, "x:")
    with pytest.raises(IntegrityError):  # what replay's lazy fetch does
        Project.discover(root).resolve_cassette("x")
    assert not [p for p in (tmp_path / "fresh-cache").rglob("*") if p.is_file() and "objects" in p.parts]
    record(SECTION, rollbacks_refused=1)


def _second_signer(monkeypatch, casstore, root, identity: str):  # type: ignore[no-untyped-def]
    seed = base64.b64encode(os.urandom(32)).decode()
    monkeypatch.setenv("CASSTORE_SIGNING_KEY", f"{identity} ed25519-private {seed}")
    from casstore.store.signing import load_signing_key

    key = load_signing_key()
    assert casstore("keys", "trust", key.public_line(), cwd=root).exit_code == 0
    return key


def test_signature_by_a_removed_key_is_refused(repo, casstore, monkeypatch):
    write_cassette(repo, "by_alice")
    assert casstore("add", "tests/cassettes/by_alice.json", cwd=repo).exit_code == 0
    bob = _second_signer(monkeypatch, casstore, repo, "bob@example.com")
    write_cassette(repo, "by_bob")
    assert casstore("add", "tests/cassettes/by_bob.json", cwd=repo).exit_code == 0
    monkeypatch.delenv("CASSTORE_SIGNING_KEY")
    assert casstore("verify", cwd=repo).exit_code == 0
    assert casstore("push", cwd=repo).exit_code == 0
    # bob leaves the team: his line is removed from trusted_keys
    tk = repo / ".casstore" / "trusted_keys"
    tk.write_text("".join(ln for ln in tk.read_text().splitlines(keepends=True) if "bob@example.com" not in ln))
    r = casstore("verify", cwd=repo)
    refused(r, "by_bob:", "not in trusted_keys", bob.keyid)
    assert "by_alice" not in r.stderr and "verified 1/2" in r.stdout
    refused(casstore("pull", "--frozen", cwd=repo), "by_bob:", "not in trusted_keys")
    refused(casstore("push", cwd=repo), "by_bob:", "not in trusted_keys")
    refused(casstore("show", "by_bob", cwd=repo), "not in trusted_keys")
    with pytest.raises(SignatureError):
        Project.discover(repo).resolve_cassette("by_bob")
    assert Project.discover(repo).resolve_cassette("by_alice") is not None
    # and deleting trusted_keys altogether does not switch checking off (require_signatures = true)
    tk.unlink()
    refused(casstore("verify", cwd=repo), "by_alice:", "by_bob:")
    record(SECTION, removed_keys_refused=1)


BAD_LINES = {
    "rsa-type": "alice@example.com ssh-rsa " + base64.b64encode(os.urandom(32)).decode(),
    "bad-base64": "alice@example.com ed25519 not*base64!",
    "short-key": "alice@example.com ed25519 " + base64.b64encode(os.urandom(16)).decode(),
    "extra-field": "alice@example.com ed25519 " + base64.b64encode(os.urandom(32)).decode() + " extra",
    "missing-key": "alice@example.com ed25519",
    "unicode-junk": "ålice ed25519 \u200b" + base64.b64encode(os.urandom(32)).decode(),
}


@pytest.mark.parametrize("kind", sorted(BAD_LINES))
def test_unparsable_trusted_keys_line_fails_closed(repo, casstore, kind):
    write_cassette(repo, "x")
    assert casstore("add", "tests/cassettes/x.json", cwd=repo).exit_code == 0
    tk = repo / ".casstore" / "trusted_keys"
    good = tk.read_text()
    lines = good.splitlines()
    tk.write_text("\n".join(lines + [BAD_LINES[kind]]) + "\n")
    where = f"trusted_keys line {len(lines) + 1}"
    for cmd in (["verify"], ["pull", "--frozen"], ["push"], ["show", "x"], ["add", "tests/cassettes/x.json"]):
        refused(casstore(*cmd, cwd=repo), where)
    # not even with signatures switched off: the policy file itself is broken
    cfg = repo / "casstore.toml"
    cfg.write_text(cfg.read_text().replace("require_signatures = true", "require_signatures = false"))
    refused(casstore("verify", cwd=repo), where)
    tk.write_text(good)
    assert casstore("verify", cwd=repo).exit_code == 0
    record(SECTION, bad_trusted_keys_lines_refused=1)


@pytest.mark.parametrize("signer", ["bob@example.com\nmallory ed25519 {other}", "bob example", "", "#bob"])
def test_keys_trust_refuses_an_envelope_whose_signer_is_not_one_word(repo, casstore, tmp_path, signer):
    # an envelope's signer went into trusted_keys as written: with a line break in it, one
    # `keys trust bob.sig` trusted a second key, of the sender's choice, that no output named
    bob = base64.b64encode(os.urandom(32)).decode()
    other = base64.b64encode(os.urandom(32)).decode()
    env = {"format": "casstore.signature/v1", "keyid": "k", "signer": signer.format(other=other), "public_key": bob,
           "statement": {"digest": "sha256:" + "0" * 64, "format": "casstore/v1", "size": 1, "type": "casstore.pin/v1"},
           "signature": base64.b64encode(bytes(64)).decode()}
    f = tmp_path / "bob.sig"
    f.write_text(json.dumps(env))
    tk = repo / ".casstore" / "trusted_keys"
    before = tk.read_text()
    refused(casstore("keys", "trust", str(f), cwd=repo), "signer", code=2)
    assert tk.read_text() == before
    assert other not in tk.read_text() and bob not in tk.read_text()


@pytest.mark.parametrize("identity", ["bob\x1b[2K", "bob\x00", "bob\u200e"])
def test_keys_trust_refuses_a_key_line_whose_identity_is_not_printable(repo, casstore, identity):
    # an envelope's signer must be one printable word (42b1486), a key line's identity was
    # written as given: a terminal escape (ESC[2K erases the line) or a NUL went into trusted_keys
    tk = repo / ".casstore" / "trusted_keys"
    before = tk.read_bytes()
    key = base64.b64encode(os.urandom(32)).decode()
    refused(casstore("keys", "trust", f"{identity} ed25519 {key}", cwd=repo), "identity", code=2)
    assert tk.read_bytes() == before


def test_an_identity_starting_with_a_hash_is_refused_as_it_would_trust_nobody(tmp_path, casstore):
    # "#bob ed25519 <key>" is a comment in trusted_keys: `init --identity "#bob"` made a key
    # whose own trusted line trusted nobody, so every pin it signed failed verify
    root = tmp_path / "fresh"
    root.mkdir()
    git("init", "-q", cwd=root)
    refused(casstore("init", "--identity", "#bob", cwd=root), "#bob", code=2)
    tk = root / ".casstore" / "trusted_keys"
    assert not tk.exists() or "#bob" not in tk.read_text()


@pytest.mark.parametrize("end", ["\n", "\r\n"])
def test_keys_trust_keeps_a_comment_with_a_carriage_return_one_line(repo, casstore, end):
    # `keys trust` appended to trusted_keys read with universal newlines: a lone "\r" in a
    # comment (one line to git and to every read of the file) became "\n" when the file was
    # written back, so trusting bob also trusted the key hidden after it; CRLF ends became LF
    from casstore.store.signing import key_id

    hidden, bob = os.urandom(32), os.urandom(32)
    tk = repo / ".casstore" / "trusted_keys"
    before = tk.read_text().replace("\n", end) + f"# rotated keys live in the wiki\rmallory ed25519 {base64.b64encode(hidden).decode()}{end}"
    tk.write_bytes(before.encode())
    assert casstore("keys", "trust", f"bob@example.com ed25519 {base64.b64encode(bob).decode()}", cwd=repo).stdout == "trusted\n"
    after = tk.read_bytes().decode()
    assert after.startswith(before), repr(after)  # the user's text and line ends as they were
    assert "\n" not in after.replace(end, "\x00"), repr(after)  # the added line ends as the others do
    r = casstore("keys", "list", "--json", cwd=repo)
    trusted = [k["keyid"] for k in r.json["trusted"]]
    assert key_id(bob) in trusted and key_id(hidden) not in trusted, r.json


@pytest.mark.parametrize("fake", ["unknown", "bad", "keyid"])
def test_a_signer_with_a_line_break_in_the_lock_cannot_forge_output_lines(repo, casstore, fake):
    # a lock's signer is text no signature covers: "mallory\nok: ..." in a refusal printed
    # a second line of the signer's choosing
    write_cassette(repo, "x")
    assert casstore("add", "tests/cassettes/x.json", cwd=repo).exit_code == 0
    lock = repo / "casstore.lock"
    text = lock.read_text()
    signer = _locked_pin(repo, "x").signatures[0].signer
    forged = "mallory\\nok: every pin verified\\u2028ok: really"  # TOML escapes: a line break, a line separator
    text = text.replace(f'signer = "{signer}"', f'signer = "{forged}"')
    if fake in ("unknown", "keyid"):  # a key id is lock text no signature covers too: printed in the refusal
        keyid = "0123456789abcdef" if fake == "unknown" else "0123\\nok: every pin verified"
        text = text.replace(f'keyid = "{_locked_pin(repo, "x").signatures[0].keyid}"', f'keyid = "{keyid}"')
    else:
        sig = _locked_pin(repo, "x").signatures[0].sig
        text = text.replace(f'sig = "{sig}"', 'sig = "' + base64.b64encode(bytes(64)).decode() + '"')
    lock.write_text(text)
    r = casstore("verify", cwd=repo)
    refused(r, "mallory")
    assert not any(ln.startswith("ok:") for ln in r.stderr.splitlines() + r.stdout.splitlines()), r.stderr
    assert "\u2028" not in r.stderr + r.stdout


def test_a_signer_or_model_with_a_line_break_in_the_lock_is_shown_escaped(repo, casstore):
    # ls, log, diff and git's textconv print a lock's signers (diff and textconv its models
    # too): text no signature covers, which printed lines of its writer's choosing
    write_cassette(repo, "x")
    assert casstore("add", "tests/cassettes/x.json", cwd=repo).exit_code == 0
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "x", cwd=repo)
    lock = repo / "casstore.lock"
    signer = _locked_pin(repo, "x").signatures[0].signer
    text = lock.read_text().replace(f'signer = "{signer}"', 'signer = "mallory\\nok: signer"')
    text = text.replace("models = [", 'models = ["m\\nok: model", ', 1)
    # recorded_from/to: lock text too, printed by show (added where the pin has none)
    text = text.replace("\nmodels = [", '\nrecorded_to = "2026\\nok: recorded"\nmodels = [', 1) if "recorded_to" not in text \
        else re.sub(r'recorded_to = "[^"]*"', 'recorded_to = "2026\\\\nok: recorded"', text)
    lock.write_text(text)
    assert "ok: recorded" in str(_locked_pin(repo, "x").recorded_to)
    assert "ok: model" in str(_locked_pin(repo, "x").models)
    git("commit", "-qam", "forged", cwd=repo)
    for cmd in (["ls"], ["log", "x"], ["diff", "HEAD~1", "HEAD"], ["git-textconv", "casstore.lock"], ["show", "x"]):
        r = casstore(*cmd, cwd=repo)
        assert r.exit_code == 0, (cmd, r.stderr)
        assert not any(ln.startswith("ok:") for ln in r.stdout.splitlines()), (cmd, r.stdout)
        # log: the digest did not change; show: prints the signers trusted_keys names, the models and dates
        assert cmd[0] in ("log", "show") or "mallory\\nok: signer" in r.stdout, (cmd, r.stdout)
    shown = casstore("show", "x", cwd=repo).stdout
    assert "m\\nok: model" in shown and "2026\\nok: recorded" in shown, shown
    raw = casstore("show", "x", "--json", cwd=repo).json  # JSON keeps the text as it is
    assert "m\nok: model" in raw["models"] and raw["recorded_to"] == "2026\nok: recorded", raw


def test_a_trusted_identity_with_a_terminal_escape_is_printed_escaped(repo, casstore):
    # a committed trusted_keys line "eve\x1b[2K\x1b[1A ed25519 <key>" (ESC is no whitespace:
    # one word) printed its escapes raw in diff's "trusted_keys: added signer" line and in
    # keys list: the terminal erased the very line a reviewer was to see
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "base", cwd=repo)
    tk = repo / ".casstore" / "trusted_keys"
    tk.write_bytes(tk.read_bytes() + b"eve\x1b[2K\x1b[1A ed25519 " + base64.b64encode(os.urandom(32)) + b"\n")
    git("commit", "-qam", "trust eve", cwd=repo)
    for cmd in (["diff", "HEAD~1", "HEAD"], ["keys", "list"]):
        r = casstore(*cmd, cwd=repo)
        assert r.exit_code == 0, (cmd, r.stderr)
        assert "\x1b" not in r.stdout and "eve\\x1b[2K\\x1b[1A" in r.stdout, (cmd, r.stdout)
    r = casstore("keys", "list", "--json", cwd=repo)  # JSON keeps the text as it is
    assert "eve\x1b[2K\x1b[1A" in [k["identity"] for k in r.json["trusted"]], r.json


@pytest.mark.parametrize("sep", ["\u2028", "\x85", "\x0c", "\x1e"])
def test_a_key_hidden_after_a_unicode_line_separator_in_a_comment_is_not_trusted(repo, casstore, sep):
    # trusted_keys was split with str.splitlines(), which also breaks at U+2028, NEL, form
    # feed, record separators: a line git and a reviewer see as one comment trusted the key after it
    from casstore.store.signing import key_id

    raw = os.urandom(32)
    mallory = base64.b64encode(raw).decode()
    tk = repo / ".casstore" / "trusted_keys"
    tk.write_text(tk.read_text() + f"# rotated keys live in the wiki{sep}mallory ed25519 {mallory}\n")
    r = casstore("keys", "list", "--json", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert key_id(raw) not in [k["keyid"] for k in r.json["trusted"]]
    assert r.json["trusted"], r.json  # the real key is still read
