import base64
import os
import stat

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from casstore import signing
from casstore.errors import SignatureError, UsageError
from casstore.model.lock import Pin

PIN = Pin(name="x", digest="sha256:" + "1" * 64, size=42)


def _key(identity="alice@example.com") -> signing.SigningKey:
    return signing.SigningKey(identity, Ed25519PrivateKey.generate())


def _trusted(*keys) -> signing.TrustedKeys:
    return signing.TrustedKeys.parse("\n".join(k.public_line() for k in keys))


def test_generate_writes_a_private_file(isolated_user):
    key, path = signing.generate_signing_key("alice@example.com")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert signing.load_signing_key().keyid == key.keyid
    with pytest.raises(UsageError, match="already exists"):
        signing.generate_signing_key("alice@example.com")


def test_env_key_for_bots(monkeypatch):
    seed = base64.b64encode(os.urandom(32)).decode()
    monkeypatch.setenv("CASSTORE_SIGNING_KEY", seed)
    monkeypatch.setenv("CASSTORE_SIGNER", "ci-bot")
    key = signing.load_signing_key()
    assert key.identity == "ci-bot"


def test_valid_signature_verifies():
    k = _key()
    pin = PIN.with_signatures([k.sign_pin(PIN)])
    assert signing.verify_pin(pin, _trusted(k), required=True) == ["alice@example.com"]


def test_missing_signature_fails_closed():
    with pytest.raises(SignatureError, match="not signed"):
        signing.verify_pin(PIN, _trusted(_key()), required=True)


def test_unknown_signer_fails_closed():
    signer, other = _key("mallory"), _key()
    pin = PIN.with_signatures([signer.sign_pin(PIN)])
    with pytest.raises(SignatureError, match="not in trusted_keys"):
        signing.verify_pin(pin, _trusted(other), required=True)


def test_signature_over_other_size_is_bad():
    k = _key()
    sig = k.sign_pin(PIN)
    tampered = Pin(name="x", digest=PIN.digest, size=43, signatures=(sig,))
    with pytest.raises(SignatureError, match="bad signature"):
        signing.verify_pin(tampered, _trusted(k), required=True)


def test_removed_key_is_refused():
    k = _key()
    pin = PIN.with_signatures([k.sign_pin(PIN)])
    with pytest.raises(SignatureError):
        signing.verify_pin(pin, signing.TrustedKeys(), required=True)


@pytest.mark.parametrize("line", [
    "alice ed25519",  # too few fields
    "alice rsa AAAA",  # wrong type
    "alice ed25519 !!!notbase64",
    "alice ed25519 " + base64.b64encode(b"short").decode(),
])
def test_unparseable_trusted_keys_line_fails_closed(line):
    good = _key().public_line()
    with pytest.raises(SignatureError, match="line 2"):
        signing.TrustedKeys.parse(good + "\n" + line + "\n")


def test_envelope_roundtrip():
    k = _key()
    sig = k.sign_pin(PIN)
    env = signing.parse_envelope(signing.make_envelope(PIN, k, sig))
    assert env["keyid"] == k.keyid
    tk = signing.parse_public_key(signing.make_envelope(PIN, k, sig).decode())
    assert tk.keyid == k.keyid
    with pytest.raises(SignatureError):
        signing.parse_envelope(b'{"format": "other"}')
