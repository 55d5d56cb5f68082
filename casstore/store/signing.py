"""Ed25519 signing of pins, trusted keys, and signature envelopes. A signature covers a pin's
canonical JSON *statement* (one made before names were bound, without ``name``, stays valid);
trusted keys are ``<identity> ed25519 <base64 key>`` lines."""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..errors import CasstoreError, ConfigError, SignatureError, UsageError
from ..model.canonical import canonical_json, loads_bounded
from ..model.fsutil import atomic_write
from ..model.lock import Pin, Signature, shown

__all__ = [
    "SigningKey",
    "TrustedKey",
    "TrustedKeys",
    "statement",
    "key_id",
    "config_dir",
    "load_signing_key",
    "generate_signing_key",
    "make_envelope",
    "parse_envelope",
    "check_envelope",
    "verify_pin",
]

ENVELOPE_FORMAT = "casstore.signature/v1"
STATEMENT_TYPE = "casstore.pin/v1"
KEY_FILE = "signing_key"
ENV_KEY = "CASSTORE_SIGNING_KEY"


def config_dir() -> Path:
    env = os.environ.get("CASSTORE_CONFIG_DIR")
    if env:
        return Path(env)
    import platformdirs  # its imports (tempfile, random, shutil) only when asked

    return Path(platformdirs.user_config_dir("casstore"))


def statement(digest: str, size: int, fmt: str, name: str | None = None) -> bytes:
    """What a signature covers; without ``name``, the statement of signatures made before names were bound."""
    doc: dict[str, Any] = {"digest": digest, "format": fmt, "size": size, "type": STATEMENT_TYPE}
    if name is not None:
        doc["name"] = name
    return canonical_json(doc)


def key_id(public_raw: bytes) -> str:
    return hashlib.sha256(public_raw).hexdigest()[:16]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str, length: int | None = None) -> bytes:
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise SignatureError(f"{what}: not valid base64") from None
    if length is not None and len(raw) != length:
        raise SignatureError(f"{what}: expected {length} bytes, got {len(raw)}")
    return raw


@dataclass(frozen=True)
class SigningKey:
    """An Ed25519 private key (its 32-byte seed, RFC 8032) and the identity it signs as.
    PyNaCl (libsodium) does every Ed25519 operation casstore needs."""

    identity: str
    seed: bytes = field(repr=False)  # never in a traceback or a log line

    @classmethod
    def generate(cls, identity: str) -> SigningKey:
        return cls(identity=identity, seed=os.urandom(32))

    @cached_property
    def _key(self) -> Any:
        from nacl.signing import SigningKey as NaclKey  # loaded by the commands that sign

        return NaclKey(self.seed)

    @cached_property
    def public_raw(self) -> bytes:
        return bytes(self._key.verify_key)

    @cached_property
    def keyid(self) -> str:
        return key_id(self.public_raw)

    def public_line(self) -> str:
        return f"{self.identity} ed25519 {_b64(self.public_raw)}"

    def sign_message(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message``."""
        return bytes(self._key.sign(message).signature)

    def sign_pin(self, pin: Pin) -> Signature:
        sig = self.sign_message(statement(pin.digest, pin.size, pin.format, pin.name))
        return Signature(keyid=self.keyid, signer=self.identity, sig=_b64(sig))

    def to_text(self) -> str:
        return f"{self.identity} ed25519-private {_b64(self.seed)}\n"

    @classmethod
    def from_text(cls, text: str, *, source: str, default_identity: str = "bot") -> SigningKey:
        parts = text.strip().split()
        if len(parts) == 1:  # bare base64 seed, e.g. in CASSTORE_SIGNING_KEY
            identity, kind, b64 = os.environ.get("CASSTORE_SIGNER", default_identity), "ed25519-private", parts[0]
            check_identity(identity, "CASSTORE_SIGNER")
        elif len(parts) == 3:
            identity, kind, b64 = parts
            check_identity(identity, f"{source}: identity")
        else:
            raise SignatureError(f"{source}: expected '<identity> ed25519-private <base64 seed>'")
        if kind != "ed25519-private":
            raise SignatureError(f"{source}: unsupported key type {kind!r}")
        seed = _unb64(b64, source, 32)  # any 32 bytes are a key's seed
        return cls(identity=identity, seed=seed)


def default_identity() -> str:
    import getpass
    import socket
    import subprocess

    try:
        out = subprocess.run(
            ["git", "config", "user.email"], capture_output=True, text=True, timeout=5, check=False
        ).stdout.strip()
        if out:
            return out.split()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        user = getpass.getuser()
    except Exception:
        user = "user"
    return f"{user}@{socket.gethostname() or 'localhost'}"


def load_signing_key(required: bool = True) -> SigningKey | None:
    env = os.environ.get(ENV_KEY)
    if env:
        return SigningKey.from_text(env, source=ENV_KEY)
    path = config_dir() / KEY_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if required:
            raise ConfigError(  # configuration to fix, then run again: exit 2 (docs/cli.md)
                "no signing key: run `casstore keys generate` (or set CASSTORE_SIGNING_KEY for a bot)"
            ) from None
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise SignatureError(f"cannot read signing key {path.name}: {exc}") from None
    return SigningKey.from_text(text, source=f"signing key {path}")


def generate_signing_key(identity: str | None = None, *, force: bool = False) -> tuple[SigningKey, Path]:
    path = config_dir() / KEY_FILE
    if path.exists() and not force:
        raise UsageError(f"a signing key already exists ({path}); pass --force to replace it")
    key = SigningKey.generate(identity or default_identity())
    if any(c.isspace() for c in key.identity) or not key.identity or key.identity.startswith("#"):
        # "#" starts a comment in trusted_keys: the key's line would trust nobody
        raise UsageError(f"identity {key.identity!r} must be one word without spaces, not starting with '#'")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, key.to_text().encode(), mode=0o600)
    return key, path


# -- trusted keys ------------------------------------------------------------------
@dataclass(frozen=True)
class TrustedKey:
    identity: str
    public_raw: bytes

    @cached_property
    def keyid(self) -> str:
        return key_id(self.public_raw)

    def line(self) -> str:
        return f"{self.identity} ed25519 {_b64(self.public_raw)}"

    def verify(self, sig: bytes, message: bytes) -> bool:
        if len(sig) != 64 or len(self.public_raw) != 32:
            return False
        sign_open, bad = _sign_open()
        try:
            sign_open(sig + message, self.public_raw)
            return True
        except bad:
            return False


@functools.cache
def _sign_open() -> tuple[Callable[[bytes, bytes], bytes], type[Exception]]:
    """libsodium's check (it releases the GIL) and the error it raises, loaded once."""
    from nacl.bindings import crypto_sign_open
    from nacl.exceptions import BadSignatureError

    return crypto_sign_open, BadSignatureError


@dataclass(frozen=True)
class TrustedKeys:
    keys: tuple[TrustedKey, ...] = ()

    @classmethod
    def parse(cls, text: str, *, source: str = "trusted_keys") -> TrustedKeys:
        """Parse ``text``; any line that does not parse fails closed (SignatureError)."""
        keys: list[TrustedKey] = []
        # lines as git and a reviewer see them: "\n" only (splitlines also breaks at U+2028, NEL,
        # form feed..., which would trust a key hidden at the end of a comment)
        for lineno, raw in enumerate(text.split("\n"), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 3 or parts[1] != "ed25519":
                raise SignatureError(
                    f"{source} line {lineno}: expected '<identity> ed25519 <base64 public key>'"
                )
            raw_key = _unb64(parts[2], f"{source} line {lineno}", 32)
            keys.append(TrustedKey(identity=parts[0], public_raw=raw_key))
        return cls(tuple(keys))

    @classmethod
    def load(cls, path: Path) -> TrustedKeys:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return cls()
        except OSError as exc:
            raise SignatureError(f"cannot read {path.name}: {exc.strerror or exc}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise SignatureError(f"{path.name}: not valid UTF-8") from None
        return cls.parse(text, source=str(path.name))

    def by_id(self) -> dict[str, TrustedKey]:
        return dict(self._by_id)

    @cached_property
    def _by_id(self) -> dict[str, TrustedKey]:
        return {k.keyid: k for k in self.keys}

    def __bool__(self) -> bool:
        return bool(self.keys)


def check_identity(identity: str, what: str) -> str:
    """``identity`` if it is one word of printable characters not starting with "#" (a comment
    in trusted_keys), else SignatureError."""
    if not identity or identity.startswith("#") or any(c.isspace() or not c.isprintable() for c in identity):
        raise SignatureError(f"{what} {identity[:80]!r} must be one word without spaces or control characters,"
                             " not starting with '#'")
    return identity


def parse_public_key(text: str, *, source: str = "key") -> TrustedKey:
    """A public key given to ``keys trust``: a trusted_keys line, or an envelope/pubkey file."""
    text = text.strip()
    if text.startswith("{"):
        env = parse_envelope(text.encode(), source=source)
        return TrustedKey(identity=check_identity(env["signer"], f"{source}: signer"),
                          public_raw=_unb64(env["public_key"], source, 32))
    parsed = TrustedKeys.parse(text, source=source)
    if len(parsed.keys) != 1:
        raise SignatureError(f"{source}: expected exactly one '<identity> ed25519 <base64>' line")
    check_identity(parsed.keys[0].identity, f"{source}: identity")  # as an envelope's signer (no ESC, no NUL)
    return parsed.keys[0]


def verify_pin(pin: Pin, trusted: TrustedKeys, *, required: bool, where: str = "trusted_keys",
               unbound: list[str] | None = None) -> list[str]:
    """The verified signers of ``pin``; SignatureError for a bad signature by a trusted key, and
    (``required``) for no trusted signer. ``unbound`` gets a line per signature without name."""
    msg = statement(pin.digest, pin.size, pin.format, pin.name)
    old: list[str] = []
    ids = trusted._by_id
    good: list[str] = []
    unknown: list[str] = []
    for s in pin.signatures:
        key = ids.get(s.keyid)
        if key is None:
            unknown.append(f"{shown(s.signer)} ({shown(s.keyid)})")  # both lock text no signature covers
            continue
        raw = _unb64(s.sig, f"signature of {pin.name!r} by {shown(s.signer)}", 64)
        if key.verify(raw, msg):
            good.append(key.identity)
            continue
        if key.verify(raw, statement(pin.digest, pin.size, pin.format)):
            old.append(key.identity)
            good.append(key.identity)
            continue
        raise SignatureError(
            f"{pin.name}: bad signature by {shown(s.signer)} ({shown(s.keyid)}) for {pin.digest} (size {pin.size})"
        )
    if old and unbound is not None:
        unbound.append(f"{pin.name}: signed by {', '.join(shown(who) for who in old)} before names were bound "
                       "(the signature does not name the cassette; `casstore add` signs it again)")
    if required and not good:
        if not pin.signatures:
            raise SignatureError(f"{pin.name}: {pin.digest} is not signed; run `casstore add` with a trusted key")
        raise SignatureError(
            f"{pin.name}: {pin.digest} is signed only by keys not in {where}: {', '.join(unknown)}"
        )
    return good


# -- envelopes -------------------------------------------------------------------
def make_envelope(pin: Pin, key: SigningKey | TrustedKey, sig: Signature) -> bytes:
    """The signature envelope of ``sig`` over ``pin`` (``key``: the signer's, or the trusted key
    when rebuilt from the lock); its statement names the cassette when the signature does."""
    st: dict[str, Any] = {"digest": pin.digest, "format": pin.format, "size": pin.size, "type": STATEMENT_TYPE}
    raw = _unb64(sig.sig, f"signature of {pin.name!r}", 64)
    if TrustedKey(sig.signer, key.public_raw).verify(raw, statement(pin.digest, pin.size, pin.format, pin.name)):
        st["name"] = pin.name
    return canonical_json(
        {
            "format": ENVELOPE_FORMAT,
            "keyid": sig.keyid,
            "signer": sig.signer,
            "public_key": _b64(key.public_raw),
            "statement": st,
            "signature": sig.sig,
        }
    )


def parse_envelope(data: bytes, *, source: str = "signature envelope") -> dict[str, Any]:
    try:
        env = loads_bounded(data, what=source)
    except ValueError as exc:
        raise SignatureError(str(exc)) from None
    if not isinstance(env, dict) or env.get("format") != ENVELOPE_FORMAT:
        raise SignatureError(f"{source}: not a {ENVELOPE_FORMAT} envelope")
    for k in ("keyid", "signer", "public_key", "signature"):
        if not isinstance(env.get(k), str):
            raise SignatureError(f"{source}: missing {k!r}")
    st = env.get("statement")
    if not isinstance(st, dict) or st.get("type") != STATEMENT_TYPE:
        raise SignatureError(f"{source}: missing or wrong statement")
    return env


def check_envelope(data: bytes, digest: str, keyid: str, size: int | None,
                   trusted: TrustedKeys) -> tuple[str | None, str | None]:
    """(error, untrusted signer) for one envelope stored as ``<digest>/<keyid>.sig``: its statement
    names the object, its key id and public key agree, and the signature verifies."""
    try:
        env = parse_envelope(data, source="envelope")
        st = env["statement"]
        if st.get("digest") != digest:
            return f"its statement names {st.get('digest')!r}, not the object it is stored with", None
        if env["keyid"] != keyid:
            return f"it is stored as key {keyid} but names key {shown(env['keyid'])}", None  # the writer's text
        if size is not None and st.get("size") != size:
            return f"it signs size {st.get('size')!r} but the object holds {size} bytes", None
        public = _unb64(env["public_key"], "public key", 32)
        if key_id(public) != keyid:
            return "its public key does not match its key id", None
        sig = _unb64(env["signature"], "signature", 64)
        if not isinstance(st.get("size"), int) or not isinstance(st.get("format"), str):
            return "its statement lacks size or format", None
        if not isinstance(st.get("name", ""), str):
            return "its statement's name is not text", None
        if not TrustedKey(env["signer"], public).verify(sig, statement(digest, st["size"], st["format"], st.get("name"))):
            return "the signature does not verify", None
    except (CasstoreError, ValueError) as exc:
        return str(exc), None
    if keyid not in trusted.by_id():
        return None, f"{digest} signed by {shown(env['signer'])} ({keyid}), a key not in trusted_keys"
    return None, None
