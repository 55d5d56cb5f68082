"""Blobs: canonical bytes <-> zstd frames, verified on every read (pure, no I/O).

A frame is written with the content size and a checksum in its header. Reading never
trusts the frame: decompression is bounded by the size the lock pins (so a frame that
claims or inflates to more is refused before it is allocated), then the bytes are hashed
and compared with the pinned digest.
"""

from __future__ import annotations

import hashlib

import zstandard

from ..errors import IntegrityError
from .canonical import parse_digest, sha256_digest

__all__ = ["DEFAULT_LEVEL", "compress", "decompress_verified", "digest_and_size", "verify_bytes"]

DEFAULT_LEVEL = 9
_CHUNK = 1 << 20


def digest_and_size(data: bytes) -> tuple[str, int]:
    return sha256_digest(data), len(data)


def compress(data: bytes, level: int = DEFAULT_LEVEL) -> bytes:
    cctx = zstandard.ZstdCompressor(level=level, write_checksum=True, write_content_size=True)
    return cctx.compress(data)


def verify_bytes(data: bytes, digest: str, size: int) -> None:
    if len(data) != size:
        raise IntegrityError(f"{digest}: size {len(data)} does not match pinned size {size}")
    if sha256_digest(data) != digest:
        raise IntegrityError(f"{digest}: content does not match its digest")


def decompress_verified(frame: bytes, digest: str, size: int) -> bytes:
    """Decompress ``frame`` to at most ``size`` bytes and check it hashes to ``digest``."""
    parse_digest(digest)
    if not isinstance(size, int) or size < 0:
        raise IntegrityError(f"{digest}: invalid pinned size {size!r}")
    try:
        params = zstandard.get_frame_parameters(frame)
    except zstandard.ZstdError as exc:
        raise IntegrityError(f"{digest}: object is not a zstd frame ({exc})") from exc
    claimed = params.content_size
    if claimed not in (zstandard.CONTENTSIZE_UNKNOWN, zstandard.CONTENTSIZE_ERROR) and claimed != size:
        raise IntegrityError(
            f"{digest}: frame claims {claimed} bytes but the lock pins {size}; refusing to inflate"
        )
    dctx = zstandard.ZstdDecompressor()
    out = bytearray()
    hasher = hashlib.sha256()
    try:
        reader = dctx.stream_reader(frame, read_across_frames=False)
        with reader:
            while True:
                chunk = reader.read(min(_CHUNK, size + 1 - len(out)) or 1)
                if not chunk:
                    break
                out += chunk
                hasher.update(chunk)
                if len(out) > size:
                    raise IntegrityError(
                        f"{digest}: object inflates past its pinned size {size}; refusing it"
                    )
    except zstandard.ZstdError as exc:
        raise IntegrityError(f"{digest}: corrupt zstd frame ({exc})") from exc
    if len(out) != size:
        raise IntegrityError(f"{digest}: object inflates to {len(out)} bytes, lock pins {size}")
    if "sha256:" + hasher.hexdigest() != digest:
        raise IntegrityError(f"{digest}: content does not match its digest")
    return bytes(out)
