"""Blobs: canonical bytes <-> zstd frames (pure). Reading never trusts a frame: inflating is
bounded by the size the lock pins (a frame that claims or inflates to more is refused before
it is allocated), then the bytes are hashed and compared with the pinned digest."""

from __future__ import annotations

import hashlib
import threading

import zstandard

from ..errors import IntegrityError
from .canonical import parse_digest, sha256_digest
from .defaults import ZSTD_LEVEL

__all__ = ["DEFAULT_LEVEL", "FRAME_OVERHEAD", "compress", "compress_checked", "decompress_verified", "digest_and_size",
           "frame_length", "max_frame_size", "verify_bytes", "verify_frame"]

DEFAULT_LEVEL = ZSTD_LEVEL
_CHUNK = 1 << 20
_ZSTD_MAGIC = 0xFD2FB528
FRAME_OVERHEAD = 512  # bytes allowed past zstd's bound: header variants of other encoders


def max_frame_size(size: int) -> int:
    """The most bytes a zstd frame of ``size`` content bytes may take (``ZSTD_COMPRESSBOUND``
    of zstd.h, header and checksum included), plus FRAME_OVERHEAD; a stored object longer
    than this for its pinned size is refused before reading."""
    margin = ((128 << 10) - size) >> 11 if size < (128 << 10) else 0
    return size + (size >> 8) + margin + FRAME_OVERHEAD


def frame_length(frame: bytes) -> int:
    """Where the first zstd frame of ``frame`` ends, from its block headers (no decoding);
    ValueError when the bytes are not a complete zstd frame."""
    if len(frame) < 6 or int.from_bytes(frame[:4], "little") != _ZSTD_MAGIC:
        raise ValueError("not a zstd frame")
    try:
        pos = zstandard.frame_header_size(frame)
    except zstandard.ZstdError as exc:
        raise ValueError(f"bad zstd frame header ({exc})") from None
    checksum = bool(frame[4] & 0x04)
    mv = memoryview(frame)
    while True:
        if pos + 3 > len(frame):
            raise ValueError("zstd frame is truncated")
        hdr = int.from_bytes(mv[pos : pos + 3], "little")
        kind = (hdr >> 1) & 3
        if kind == 3:
            raise ValueError("zstd frame has a reserved block type")
        pos += 3 + (1 if kind == 1 else hdr >> 3)
        if hdr & 1:
            break
    pos += 4 if checksum else 0
    if pos > len(frame):
        raise ValueError("zstd frame is truncated")
    return pos


class _Local(threading.local):
    """This thread's zstd contexts (one is not safe to share between threads)."""

    def __init__(self) -> None:
        self.dctx = zstandard.ZstdDecompressor()
        self.cctxs: dict[int, zstandard.ZstdCompressor] = {}  # by level


_local = _Local()


def _dctx() -> zstandard.ZstdDecompressor:
    return _local.dctx


def digest_and_size(data: bytes) -> tuple[str, int]:
    return sha256_digest(data), len(data)


def compress(data: bytes, level: int = DEFAULT_LEVEL) -> bytes:
    """One zstd frame of ``data`` (content size and checksum in it), through this thread's
    compressor for ``level`` (a compressor keeps no state between frames)."""
    cctxs = _local.cctxs
    cctx = cctxs.get(level)
    if cctx is None:
        cctx = cctxs[level] = zstandard.ZstdCompressor(level=level, write_checksum=True, write_content_size=True)
    return cctx.compress(data)


def compress_checked(data: bytes, level: int = DEFAULT_LEVEL) -> bytes:
    """:func:`compress`, and the frame inflated back and compared with ``data`` (what
    :func:`decompress_verified` proves of a frame, proven against the bytes at hand)."""
    frame = compress(data, level)
    try:
        back = _dctx().decompress(frame)  # the frame states its size: one buffer of it
    except zstandard.ZstdError as exc:
        raise IntegrityError(f"a new zstd frame does not inflate ({exc})") from exc
    if back != data:
        raise IntegrityError("a new zstd frame does not inflate to the bytes it was made of")
    return frame


def verify_bytes(data: bytes, digest: str, size: int) -> None:
    if len(data) != size:
        raise IntegrityError(f"{digest}: size {len(data)} does not match pinned size {size}")
    if sha256_digest(data) != digest:
        raise IntegrityError(f"{digest}: content does not match its digest")


def _check_header(frame: bytes, digest: str, size: int) -> bool:
    """Refuse a frame that claims another size; True when it states its content size."""
    parse_digest(digest)
    if not isinstance(size, int) or size < 0:
        raise IntegrityError(f"{digest}: invalid pinned size {size!r}")
    if len(frame) > max_frame_size(size):
        raise IntegrityError(f"{digest}: object is larger than its pin allows ({len(frame)} bytes, "
                             f"at most {max_frame_size(size)} for {size} pinned bytes); refusing it")
    try:
        params = zstandard.get_frame_parameters(frame)
        end = frame_length(frame)
    except (zstandard.ZstdError, ValueError) as exc:
        raise IntegrityError(f"{digest}: object is not a zstd frame ({exc})") from exc
    if end != len(frame):
        raise IntegrityError(f"{digest}: object has {len(frame) - end} bytes after its zstd frame; refusing it")
    claimed = params.content_size
    if claimed in (zstandard.CONTENTSIZE_UNKNOWN, zstandard.CONTENTSIZE_ERROR):
        return False
    if claimed != size:
        raise IntegrityError(
            f"{digest}: frame claims {claimed} bytes but the lock pins {size}; refusing to inflate"
        )
    return True


def _stream(frame: bytes, digest: str, size: int, keep: bytearray | None) -> None:
    """Inflate ``frame`` through one reused buffer, hashing as it goes (at most size + 1
    bytes are ever produced); append to ``keep`` when given. Raises unless it hashes to
    ``digest`` and has exactly ``size`` bytes."""
    hasher = hashlib.sha256()
    buf = bytearray(min(_CHUNK, size + 1))
    view = memoryview(buf)
    total = 0
    try:
        with _dctx().stream_reader(frame, read_across_frames=False) as reader:
            while True:
                n = reader.readinto(view[: min(len(buf), size + 1 - total)])
                if not n:
                    break
                total += n
                if total > size:
                    raise IntegrityError(f"{digest}: object inflates past its pinned size {size}; refusing it")
                hasher.update(view[:n])
                if keep is not None:
                    keep += view[:n]
    except zstandard.ZstdError as exc:
        raise IntegrityError(f"{digest}: corrupt zstd frame ({exc})") from exc
    if total != size:
        raise IntegrityError(f"{digest}: object inflates to {total} bytes, lock pins {size}")
    if "sha256:" + hasher.hexdigest() != digest:
        raise IntegrityError(f"{digest}: content does not match its digest")


def _inflate(frame: bytes, digest: str, size: int) -> bytes:
    """A frame that states its size, inflated in one call into one buffer of that size, and verified."""
    try:
        data = _dctx().decompress(frame)
    except zstandard.ZstdError as exc:
        raise IntegrityError(f"{digest}: corrupt zstd frame ({exc})") from exc
    verify_bytes(data, digest, size)
    return data


def decompress_verified(frame: bytes, digest: str, size: int) -> bytes:
    """Decompress ``frame`` to at most ``size`` bytes and check it hashes to ``digest``; a
    frame that does not state its size is streamed, bounded by ``size`` + 1."""
    if _check_header(frame, digest, size):
        return _inflate(frame, digest, size)
    out = bytearray()
    _stream(frame, digest, size, out)
    return bytes(out)


def verify_frame(frame: bytes, digest: str, size: int) -> None:
    """What decompress_verified checks, keeping nothing: large frames stream through one
    reused 1 MiB buffer (no allocation and no page faults per cassette)."""
    if _check_header(frame, digest, size) and size <= _CHUNK:
        _inflate(frame, digest, size)
        return
    _stream(frame, digest, size, None)
