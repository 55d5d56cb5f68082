"""casstore: content-addressed, signed, git-pinned cassettes for LLM/HTTP tests.

Public front. Implementation lives in modules named by noun (store, lock, signing,
cassette, identity, redaction, replay, ...); names users rely on are re-exported here.
"""

from __future__ import annotations

from .errors import (
    CassetteFormatError,
    CassetteMiss,
    CasstoreError,
    CheckFailed,
    ConfigError,
    IntegrityError,
    InvalidName,
    LiveCallBlocked,
    LockError,
    NotFoundError,
    SignatureError,
    StoreError,
    UsageError,
)

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "CasstoreError",
    "CassetteFormatError",
    "CassetteMiss",
    "CheckFailed",
    "ConfigError",
    "IntegrityError",
    "InvalidName",
    "LiveCallBlocked",
    "LockError",
    "NotFoundError",
    "SignatureError",
    "StoreError",
    "UsageError",
]

# --- replay library (casstore.replay) -------------------------------------------
from .replay import DriftWarning, Session, tool, use  # noqa: E402

__all__ += ["use", "tool", "Session", "DriftWarning"]
