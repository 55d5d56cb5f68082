import os

import pytest
import zstandard

from casstore.errors import IntegrityError
from casstore.model.blob import compress, decompress_verified, digest_and_size

DATA = b'{"format":"casstore.cassette/v1","name":"x"}' * 50


def test_roundtrip_and_frame_header():
    digest, size = digest_and_size(DATA)
    frame = compress(DATA, level=3)
    params = zstandard.get_frame_parameters(frame)
    assert params.content_size == size and params.has_checksum
    assert decompress_verified(frame, digest, size) == DATA


def test_flipped_byte_is_refused():
    digest, size = digest_and_size(DATA)
    frame = bytearray(compress(DATA))
    frame[len(frame) // 2] ^= 0xFF
    with pytest.raises(IntegrityError):
        decompress_verified(bytes(frame), digest, size)


def test_truncated_frame_is_refused():
    digest, size = digest_and_size(DATA)
    frame = compress(DATA)
    with pytest.raises(IntegrityError):
        decompress_verified(frame[: len(frame) - 7], digest, size)


def test_wrong_content_same_size_is_refused():
    digest, size = digest_and_size(DATA)
    other = DATA.replace(b"x", b"y")
    with pytest.raises(IntegrityError, match="does not match"):
        decompress_verified(compress(other), digest, size)


def test_frame_claiming_more_than_pinned_is_refused_before_inflating():
    bomb = b"\0" * (64 << 20)  # 64 MiB of zeros: a ~2 KiB frame
    frame = compress(bomb, level=1)
    assert len(frame) < 100_000
    digest, _ = digest_and_size(DATA)
    with pytest.raises(IntegrityError, match="claims"):  # small enough for the frame bound of 4 KiB
        decompress_verified(frame, digest, 4096)
    with pytest.raises(IntegrityError, match="larger than its pin allows"):  # refused unread for 100 B
        decompress_verified(frame, digest, 100)


def test_frame_without_content_size_that_inflates_past_the_pin_is_refused():
    bomb = b"\0" * (64 << 20)
    cctx = zstandard.ZstdCompressor(level=1, write_content_size=False)
    frame = cctx.compress(bomb)
    # compress() on bytes may still record the size; a streaming writer does not
    import io

    buf = io.BytesIO()
    with cctx.stream_writer(buf, closefd=False) as w:
        w.write(bomb)
    frame = buf.getvalue()
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    digest, _ = digest_and_size(DATA)
    with pytest.raises(IntegrityError, match="inflates past"):
        decompress_verified(frame, digest, 8192)


def test_not_zstd_is_refused():
    digest, size = digest_and_size(DATA)
    with pytest.raises(IntegrityError, match="not a zstd frame"):
        decompress_verified(os.urandom(64), digest, size)


def test_valid_zstd_of_the_right_bytes_but_wrong_pinned_size():
    digest, size = digest_and_size(DATA)
    with pytest.raises(IntegrityError):
        decompress_verified(compress(DATA), digest, size - 1)
