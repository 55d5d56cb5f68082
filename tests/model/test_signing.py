import base64
import os
import stat

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore import signing
from casstore.errors import SignatureError, UsageError
from casstore.model.canonical import canonical_json
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


@settings(max_examples=300, deadline=None)
@given(digest=st.one_of(st.just("sha256:" + "ab" * 32), st.text()), size=st.integers(min_value=-(2**70), max_value=2**70),
       fmt=st.one_of(st.just("casstore.cassette/v1"), st.text()), name=st.one_of(st.none(), st.text()))
def test_the_statement_is_the_canonical_json_of_its_fields(digest, size, fmt, name):
    # statement() writes the JSON out by hand (one per pin checked): byte for byte canonical_json's
    fields = {"digest": digest, "format": fmt, "size": size, "type": signing.STATEMENT_TYPE}
    want = canonical_json(fields if name is None else {**fields, "name": name})
    assert signing.statement(digest, size, fmt, name) == want


def test_a_bool_size_takes_the_general_path():
    assert signing.statement(PIN.digest, True, "f") == canonical_json(
        {"digest": PIN.digest, "format": "f", "size": True, "type": signing.STATEMENT_TYPE})


def test_libsodium_accepts_what_cryptography_signs_and_refuses_what_it_refuses():
    # signatures are made with cryptography (OpenSSL) and checked with libsodium (PyNaCl)
    priv = Ed25519PrivateKey.generate()
    pub = priv.public_key()
    trusted = signing.TrustedKey("alice", pub.public_bytes_raw())
    for i in range(50):
        msg = signing.statement("sha256:" + f"{i:064x}", i, "casstore.cassette/v1")
        sig = priv.sign(msg)
        assert trusted.verify(sig, msg)
        pub.verify(sig, msg)  # the reference agrees
        for bad_sig, bad_msg in ((bytes([sig[0] ^ 1]) + sig[1:], msg), (sig[:63] + bytes([sig[63] ^ 0x40]), msg),
                                 (sig, msg[:-1] + b" "), (sig[:32] + sig[32:][::-1], msg)):
            assert not trusted.verify(bad_sig, bad_msg)
            with pytest.raises(Exception):  # noqa: B017 - cryptography's InvalidSignature
                pub.verify(bad_sig, bad_msg)
    msg = signing.statement(PIN.digest, 1, "f")
    sig = priv.sign(msg)
    assert not trusted.verify(sig[:63], msg)  # a short signature never reaches the library
    assert not signing.TrustedKey("x", b"\0" * 32).verify(sig, msg)  # a small-order key
    assert not signing.TrustedKey("x", pub.public_bytes_raw()[:31]).verify(sig, msg)
    other = Ed25519PrivateKey.generate().public_key().public_bytes_raw()
    assert not signing.TrustedKey("x", other).verify(sig, msg)
    assert Ed25519PublicKey.from_public_bytes(other)  # a valid key, just not the signer's


def test_the_verifier_is_pynacl_s_crypto_sign_open():
    # verify calls libsodium through PyNaCl's cffi library (no import of every binding):
    # the same answers as PyNaCl's public binding, on good and bad input
    from nacl.bindings import crypto_sign_open
    from nacl.exceptions import BadSignatureError

    sign_open, bad = signing.ed25519_verifier()
    priv = Ed25519PrivateKey.generate()
    pub = priv.public_key().public_bytes_raw()
    for i in range(20):
        msg = signing.statement("sha256:" + f"{i:064x}", i, "casstore.cassette/v1")
        sig = priv.sign(msg)
        assert sign_open(sig + msg, pub) == crypto_sign_open(sig + msg, pub) == msg
        for signed, key in ((bytes([sig[0] ^ 1]) + sig[1:] + msg, pub), (sig + msg[:-1] + b" ", pub),
                            (sig + msg, b"\0" * 32), (sig[:10], pub)):
            with pytest.raises(bad):
                sign_open(signed, key)
            with pytest.raises(BadSignatureError):
                crypto_sign_open(signed, key)


def test_pins_are_signed_as_openssl_signs_them():
    """add signs with libsodium; Ed25519 is deterministic, so the lock holds the bytes
    cryptography (OpenSSL) would have written, and they verify with it."""
    for i in range(20):
        k = _key()
        pin = Pin(name=f"p{i}", digest="sha256:" + os.urandom(32).hex(), size=i * 977, entries=i)
        message = signing.statement(pin.digest, pin.size, pin.format, pin.name)
        sig = k.sign_pin(pin)
        assert base64.b64decode(sig.sig) == k.private.sign(message) == k.sign_message(message)
        k.private.public_key().verify(base64.b64decode(sig.sig), message)  # raises if bad
        assert sig.keyid == signing.key_id(k.private.public_key().public_bytes_raw())


def test_a_key_read_from_text_signs_without_cryptography_as_cryptography_does():
    """A key read from its text (the config file, CASSTORE_SIGNING_KEY) signs and names
    itself with libsodium from the seed, loading no cryptography and no nacl.bindings (add's
    start-up); what it gives is what cryptography's key of the same seed gives, and that key
    is still there."""
    import subprocess
    import sys

    for _ in range(10):
        real = _key()
        read = signing.SigningKey.from_text(real.to_text(), source="test")
        message = signing.statement(PIN.digest, PIN.size, PIN.format)
        assert read.public_raw == real.public_raw == real.private.public_key().public_bytes_raw()
        assert read.keyid == real.keyid and read.public_line() == real.public_line() and read.to_text() == real.to_text()
        assert read.sign_pin(PIN) == real.sign_pin(PIN)
        assert read.private.sign(message) == real.private.sign(message) == read.sign_message(message)
    probe = ("import sys; from casstore import signing; from casstore.model.lock import Pin\n"
             "k = signing.load_signing_key(); k.sign_pin(Pin(name='x', digest='sha256:' + '1' * 64, size=4))\n"
             "print(k.keyid, any(m.split('.')[0] == 'cryptography' for m in sys.modules), 'nacl.bindings' in sys.modules)")
    seed = base64.b64encode(bytes(range(32))).decode()
    r = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "CASSTORE_SIGNING_KEY": seed},
                       capture_output=True, text=True, timeout=60, check=True)
    keyid, loaded, bindings = r.stdout.split()
    assert loaded == bindings == "False"  # nor every binding PyNaCl has: its cffi library alone
    assert keyid == signing.key_id(Ed25519PrivateKey.from_private_bytes(bytes(range(32))).public_key().public_bytes_raw())
