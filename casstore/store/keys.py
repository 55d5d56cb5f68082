"""The store's key layout, written and parsed in one place (pure)::

    objects/sha256/<2 hex>/<62 hex>           zstd frame of the canonical bytes
    signatures/sha256/<2>/<62>/<keyid>.sig    signature envelope (JSON)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import StoreError
from ..model.canonical import parse_digest

__all__ = ["object_key", "signature_prefix", "signature_key", "StoreKey", "parse_key", "digest_from_key"]


def object_key(digest: str) -> str:
    hexd = parse_digest(digest)
    return f"objects/sha256/{hexd[:2]}/{hexd[2:]}"


def signature_prefix(digest: str) -> str:
    hexd = parse_digest(digest)
    return f"signatures/sha256/{hexd[:2]}/{hexd[2:]}"


def signature_key(digest: str, keyid: str) -> str:
    if not keyid or not all(c in "0123456789abcdef" for c in keyid):
        raise StoreError(f"invalid key id {keyid!r}")
    return f"{signature_prefix(digest)}/{keyid}.sig"


@dataclass(frozen=True)
class StoreKey:
    """What a store key names: the object of ``digest`` or one of its signature envelopes
    (``keyid``: None for a file there not named ``<hex keyid>.sig``, a stray)."""

    kind: str  # "object" | "signature"
    digest: str
    keyid: str | None = None


_HEX = frozenset("0123456789abcdef")


def parse_key(key: str) -> StoreKey | None:
    """The one parser of the key layout (``objects/sha256/<2>/<62>``,
    ``signatures/sha256/<2>/<62>/<keyid>.sig``); ``None`` for any other key."""
    parts = key.split("/")
    if len(parts) not in (4, 5) or parts[1] != "sha256":
        return None
    hexd = parts[2] + parts[3]
    if len(parts[2]) != 2 or len(hexd) != 64 or not _HEX.issuperset(hexd):
        return None
    if len(parts) == 4:
        return StoreKey("object", "sha256:" + hexd) if parts[0] == "objects" else None
    if parts[0] != "signatures":
        return None
    keyid = parts[4].removesuffix(".sig") if parts[4].endswith(".sig") else ""
    return StoreKey("signature", "sha256:" + hexd, keyid if 0 < len(keyid) <= 64 and _HEX.issuperset(keyid) else None)


def digest_from_key(key: str) -> str | None:
    """The digest of an object key, ``None`` for any other key."""
    parsed = parse_key(key)
    return parsed.digest if parsed is not None and parsed.kind == "object" else None
