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


def _cases():
    import io

    big = os.urandom(1 << 19) * 5  # 2.5 MiB: streamed by verify_frame, in one call by decompress_verified
    d, n = digest_and_size(DATA)
    bd, bn = digest_and_size(big)
    unsized = io.BytesIO()
    with zstandard.ZstdCompressor(level=1, write_content_size=False).stream_writer(unsized, closefd=False) as w:
        w.write(big)
    flipped = bytearray(compress(big, level=1))
    flipped[len(flipped) // 2] ^= 0xFF
    return {
        "small": (compress(DATA), d, n),
        "big": (compress(big, level=1), bd, bn),
        "big without a size": (unsized.getvalue(), bd, bn),
        "big flipped": (bytes(flipped), bd, bn),
        "big truncated": (compress(big, level=1)[:-9], bd, bn),
        "big, other content": (compress(big[::-1], level=1), bd, bn),
        "unsized, pinned smaller": (unsized.getvalue(), bd, bn - 1),
        "unsized, pinned larger": (unsized.getvalue(), bd, bn + 1),
        "claims more": (compress(DATA), d, n - 1),
        "not zstd": (os.urandom(64), d, n),
        "empty": (compress(b""), digest_and_size(b"")[0], 0),
    }


@pytest.mark.parametrize("case", list(_cases()))
def test_verify_frame_accepts_and_refuses_exactly_what_decompress_verified_does(case):
    from casstore.model.blob import verify_frame

    frame, digest, size = _cases()[case]
    outcomes = []
    for fn in (decompress_verified, verify_frame):
        try:
            got = fn(frame, digest, size)
            outcomes.append(("ok", None if got is None else digest_and_size(got)))
        except IntegrityError as exc:
            outcomes.append(("refused", "corrupt" if "corrupt" in str(exc) else str(exc)))
    assert outcomes[0][0] == outcomes[1][0], outcomes
    if outcomes[0][0] == "ok":
        assert outcomes[0][1] == (digest, size)
    else:
        assert outcomes[0][1] == outcomes[1][1] or "corrupt" in (outcomes[0][1], outcomes[1][1]), outcomes
