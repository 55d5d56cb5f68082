import base64
import os
import stat

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from casstore.errors import SignatureError, UsageError
from casstore.model.canonical import canonical_json
from casstore.model.lock import Pin
from casstore.store import signing

PIN = Pin(name="x", digest="sha256:" + "1" * 64, size=42)


def _key(identity="alice@example.com") -> signing.SigningKey:
    return signing.SigningKey.generate(identity)


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
    # the identity goes into the lock, the envelopes and a trusted_keys line (split on
    # whitespace): "ci bot" or "ci\nbot" signed, then made a line no one could trust
    for bad in ("ci bot", "ci\nbot", "ci\u2028bot", "#ci"):  # "#": a comment in trusted_keys
        monkeypatch.setenv("CASSTORE_SIGNER", bad)
        with pytest.raises(SignatureError, match="CASSTORE_SIGNER .* must be one word"):
            signing.load_signing_key()
    # the whole line in CASSTORE_SIGNING_KEY names the identity itself: the same rule ("#ci"
    # signed pins under a name whose trusted_keys line is a comment; ESC a terminal escape)
    monkeypatch.delenv("CASSTORE_SIGNER")
    for bad in ("#ci", "ci\x1b[2K"):
        monkeypatch.setenv("CASSTORE_SIGNING_KEY", f"{bad} ed25519-private {seed}")
        with pytest.raises(SignatureError, match="identity .* must be one word"):
            signing.load_signing_key()
    monkeypatch.setenv("CASSTORE_SIGNING_KEY", f"ci@example.com ed25519-private {seed}")
    assert signing.load_signing_key().identity == "ci@example.com"  # the control


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


def test_the_statement_is_the_canonical_json_of_its_fields():
    # what every signature in every lock covers: these bytes must never change
    assert signing.statement("sha256:" + "ab" * 32, 12, "casstore.cassette/v1", "chat/é") == (
        b'{"digest":"sha256:' + b"ab" * 32 + b'","format":"casstore.cassette/v1","name":"chat/\xc3\xa9",'
        b'"size":12,"type":"casstore.pin/v1"}')
    assert signing.statement(PIN.digest, 1, "f") == canonical_json(
        {"digest": PIN.digest, "format": "f", "size": 1, "type": signing.STATEMENT_TYPE})


def test_rfc8032_test_vector():
    # RFC 8032, section 7.1, TEST 1: the seed's public key and its signature of the empty message
    key = signing.SigningKey("rfc", bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"))
    assert key.public_raw.hex() == "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    sig = key.sign_message(b"")
    assert sig.hex() == ("e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd2"
                         "5bf5f0595bbe24655141438e7a100b")
    assert signing.TrustedKey("rfc", key.public_raw).verify(sig, b"")
    assert "9d61b1" not in repr(key)  # the seed never shows in a repr


def test_signatures_agree_with_an_independent_implementation():
    # casstore signs and checks with libsodium (PyNaCl); cryptography (OpenSSL) is the referee
    for i in range(30):
        key = _key()
        ref = Ed25519PrivateKey.from_private_bytes(key.seed)
        pub = ref.public_key()
        assert pub.public_bytes_raw() == key.public_raw
        pin = Pin(name=f"p{i}", digest="sha256:" + os.urandom(32).hex(), size=i * 977, entries=i)
        msg = signing.statement(pin.digest, pin.size, pin.format, pin.name)
        sig = base64.b64decode(key.sign_pin(pin).sig)
        assert sig == ref.sign(msg)
        pub.verify(sig, msg)  # raises if bad
        trusted = signing.TrustedKey("alice", key.public_raw)
        assert trusted.verify(sig, msg)
        for bad_sig, bad_msg in ((bytes([sig[0] ^ 1]) + sig[1:], msg), (sig[:63] + bytes([sig[63] ^ 0x40]), msg),
                                 (sig, msg[:-1] + b" "), (sig[:32] + sig[32:][::-1], msg)):
            assert not trusted.verify(bad_sig, bad_msg)
            with pytest.raises(Exception):  # noqa: B017 - cryptography's InvalidSignature
                pub.verify(bad_sig, bad_msg)
    assert not trusted.verify(sig[:63], msg)  # a short signature never reaches the library
    assert not signing.TrustedKey("x", b"\0" * 32).verify(sig, msg)  # a small-order key
    assert not signing.TrustedKey("x", key.public_raw[:31]).verify(sig, msg)
    other = Ed25519PrivateKey.generate().public_key().public_bytes_raw()
    assert not signing.TrustedKey("x", other).verify(sig, msg)
    assert Ed25519PublicKey.from_public_bytes(other)  # a valid key, just not the signer's


def test_a_key_read_from_text_is_the_key_written():
    for _ in range(10):
        real = _key()
        read = signing.SigningKey.from_text(real.to_text(), source="test")
        assert read.public_raw == real.public_raw and read.seed == real.seed
        assert read.keyid == real.keyid and read.public_line() == real.public_line() and read.to_text() == real.to_text()
        assert read.sign_pin(PIN) == real.sign_pin(PIN)

