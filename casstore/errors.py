"""The error tree. Every error casstore raises on purpose is a :class:`CasstoreError`.

Library errors (zstandard, PyNaCl, fsspec, dulwich, json) are converted at the
boundary with ``raise ... from exc`` so callers catch one root. Each class carries the
CLI exit code it maps to: 1 = a check failed, 2 = usage or configuration error.

    CasstoreError
    ├── UsageError            (2) bad arguments, hostile names
    │   └── InvalidName       (2)
    ├── ConfigError           (2) malformed casstore.toml / [tool.casstore]
    │   └── RemoteError       (2) a remote that cannot be used: malformed URL, no bucket, no credentials
    ├── LockError             (2) malformed casstore.lock
    ├── CassetteFormatError   (2) a cassette file that is not format v1
    ├── IntegrityError        (1) bytes that do not match their digest or size, bad zstd
    ├── SignatureError        (1) missing / unknown / bad signature, bad trusted_keys
    ├── NotFoundError         (1) object, cassette or key that is not where it should be
    ├── StoreError            (1) backend I/O failure (after retries)
    ├── CheckFailed           (1) a hygiene check found a problem
    ├── RedactionRefused      (1) a secret redaction cannot remove safely: nothing written
    ├── ClientNotSupported    (2) an installed HTTP client casstore cannot intercept
    ├── LiveCallBlocked       (1) a live call under CASSTORE_OFFLINE=1
    ├── CassetteMiss          (1) strict replay met a call nobody recorded
    │   └── DrawMiss          (1) deterministic replay asked for a draw nobody recorded
    ├── RecordingRefused      (2) a block would call live under CI (CASSTORE_ALLOW_RECORD=1 lifts it)
    └── NotAllPlayed          (1) use(all_played=True): recorded entries the block did not play
"""

from __future__ import annotations

__all__ = [
    "CasstoreError",
    "UsageError",
    "InvalidName",
    "ConfigError",
    "RemoteError",
    "LockError",
    "CassetteFormatError",
    "IntegrityError",
    "SignatureError",
    "NotFoundError",
    "StoreError",
    "CheckFailed",
    "RedactionRefused",
    "ClientNotSupported",
    "CassetteMiss",
    "LiveCallBlocked",
    "DrawMiss",
    "RecordingRefused",
    "NotAllPlayed",
]


class CasstoreError(Exception):
    """Root of every error casstore raises on purpose."""

    exit_code = 1


class UsageError(CasstoreError):
    exit_code = 2


class InvalidName(UsageError):
    """A cassette name that could escape the cassette dir or the store."""


class ConfigError(CasstoreError):
    exit_code = 2


class RemoteError(ConfigError):
    """The configured remote cannot be used as it is (malformed URL, no bucket, no credentials, access denied)."""


class LockError(CasstoreError):
    """The lock file does not parse or does not validate; ``problems`` lists each (key path first)."""

    exit_code = 2

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = list(problems or [])
        if self.problems:
            message = message + ": " + "; ".join(self.problems)
        super().__init__(message)


class CassetteFormatError(CasstoreError):
    exit_code = 2


class IntegrityError(CasstoreError):
    """Bytes that do not match what the lock pins (digest, size) or do not decode."""


class SignatureError(CasstoreError):
    """Fail-closed signature verification: missing, unknown signer, or bad signature."""


class NotFoundError(CasstoreError):
    pass


class StoreError(CasstoreError):
    """A storage backend failed (after any retries)."""


class CheckFailed(CasstoreError):
    pass


class RedactionRefused(CasstoreError):
    """A secret sits where redaction cannot remove it safely (a body whose encoding casstore cannot
    undo and redo): nothing is written. The message names where and the rule, never the secret."""

    def __init__(self, field: str, rules: list[str], reason: str, *, cassette: str | None = None,
                 entry: int | None = None) -> None:
        self.field, self.rules, self.reason, self.cassette, self.entry = field, rules, reason, cassette, entry
        where = (f"cassette {cassette!r}, " if cassette else "") + (f"entry {entry}, " if entry is not None else "")
        super().__init__(f"{where}{field}: a secret ({', '.join(rules)}) {reason}; nothing written")

    def at(self, *, field: str | None = None, cassette: str | None = None, entry: int | None = None) -> RedactionRefused:
        """The same refusal with more of its place filled in."""
        return RedactionRefused(field or self.field, self.rules, self.reason, cassette=cassette or self.cassette,
                                entry=self.entry if entry is None else entry)


class LiveCallBlocked(CasstoreError):
    """A live call was attempted while ``CASSTORE_OFFLINE=1`` (or in strict replay)."""


class ClientNotSupported(CasstoreError):
    """An installed HTTP client lacks what casstore's adapter relies on (raised when a ``use()`` block is entered)."""

    exit_code = 2


class CassetteMiss(CasstoreError):
    """Strict replay met a call that is not in the cassette (the message says what differs and what to run)."""

    def __init__(
        self,
        message: str,
        *,
        cassette: str = "",
        identity: str = "",
        kind: str = "",
        target: str = "",
        closest: dict | None = None,
        differences: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.cassette = cassette
        self.identity = identity
        self.kind = kind
        self.target = target
        self.closest = closest
        self.differences = list(differences or [])


class DrawMiss(CassetteMiss):
    """``use(deterministic=True)`` replay asked for a time/uuid/random draw the cassette lacks."""


class RecordingRefused(CasstoreError):
    """Under ``CI`` a block would call a provider live; ``CASSTORE_ALLOW_RECORD=1`` lifts it."""

    exit_code = 2

    def __init__(self, message: str, *, cassette: str = "", mode: str = "") -> None:
        super().__init__(message)
        self.cassette = cassette
        self.mode = mode


class NotAllPlayed(CasstoreError):
    """``use(all_played=True)``: the block ended without playing every recorded entry
    (``unplayed``: the entries; ``draws``: the unconsumed draws by kind)."""

    def __init__(self, message: str, *, cassette: str = "", unplayed: list[dict] | None = None,
                 draws: dict[str, int] | None = None) -> None:
        super().__init__(message)
        self.cassette = cassette
        self.unplayed = list(unplayed or [])
        self.draws = dict(draws or {})
