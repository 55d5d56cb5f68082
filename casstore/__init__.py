"""casstore: content-addressed, signed, git-pinned cassettes for LLM/HTTP tests. The public
front: the names users rely on, re-exported from modules named by noun."""

from __future__ import annotations

import os as _os

from .errors import (
    CassetteFormatError,
    CassetteMiss,
    CasstoreError,
    CheckFailed,
    ClientNotSupported,
    ConfigError,
    DrawMiss,
    IntegrityError,
    InvalidName,
    LiveCallBlocked,
    LockError,
    NotAllPlayed,
    NotFoundError,
    RecordingRefused,
    RedactionRefused,
    RemoteError,
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
    "ClientNotSupported",
    "ConfigError",
    "IntegrityError",
    "InvalidName",
    "LiveCallBlocked",
    "LockError",
    "NotFoundError",
    "RemoteError",
    "SignatureError",
    "StoreError",
    "UsageError",
    "DrawMiss",
    "NotAllPlayed",
    "RecordingRefused",
    "RedactionRefused",
]

# --- replay library (casstore.replay) -------------------------------------------
# Imported on first use (PEP 562) so the command line does not load httpx and the
# interception machinery it never needs.
_REPLAY_NAMES = ("use", "tool", "guard", "block_network", "Session", "DriftWarning")
__all__ += [*_REPLAY_NAMES]


if _os.environ.get("CASSTORE_GUARD_CHILDREN", "").strip().lower() not in ("", "0", "false", "no", "off"):  # a child of a guarded offline parent
    from .replay import child as _child  # (the .pth file normally armed it already)

    _child.arm()


def __getattr__(name: str) -> object:
    if name in _REPLAY_NAMES:
        from .replay import api as replay

        return getattr(replay, name)
    raise AttributeError(f"module 'casstore' has no attribute {name!r}")
