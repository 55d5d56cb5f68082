"""casstore.store.s3_direct: S3 reads and writes through botocore alone answer what s3fs answers.

The same bucket (moto on 127.0.0.1) is read by a store whose reads go through botocore and
by one that goes through s3fs (an option botocore would not read the same way sends every
call to s3fs): the same listings, bytes, ranges, missing keys, refusals and errors.
"""

from __future__ import annotations

import pytest

from casstore.errors import IntegrityError, NotFoundError, RemoteError
from casstore.store.backends import FsspecStore
from tests.helpers.s3 import S3Server

KEYS = {"objects/sha256/ab/" + "c" * 62: b"frame-one", "objects/sha256/cd/" + "e" * 62: b"x" * 3000,
        "packs/" + "1" * 64 + ".idx": b"{}", "signatures/sha256/ab/" + "c" * 62 + "/0123456789abcdef.sig": b"env",
        "odd/a b+c~d=é%2F.sig": b"a key to quote"}


def _pair(url: str) -> tuple[FsspecStore, FsspecStore]:
    fast = FsspecStore(url)
    slow = FsspecStore(url, {"use_listings_cache": False})  # not one botocore reads: all s3fs
    assert fast._direct is not None and slow._direct is None
    return fast, slow


@pytest.fixture
def filled(s3_url: str) -> str:
    return fill(s3_url)


def fill(s3_url: str) -> str:
    """KEYS and an empty object, written through s3fs."""
    writer = FsspecStore(s3_url, {"use_listings_cache": False})
    for key, data in KEYS.items():
        writer.write_once(key, data)
    writer.write_once("objects/empty", b"")
    return s3_url


def test_listings_reads_and_ranges_are_the_same(filled: str) -> None:
    fast, slow = _pair(filled)
    for prefix in ("", "objects/", "objects/sha256/ab/", "packs/", "signatures/", "nothing/"):
        a, b = list(fast.list(prefix)), list(slow.list(prefix))
        assert a == b, prefix
    assert {i.key for i in fast.list("")} == {*KEYS, "objects/empty"}
    for key, data in KEYS.items():
        assert fast.read(key) == slow.read(key) == data
        assert fast.read_range(key, 1, 4) == slow.read_range(key, 1, 4) == data[1:4]
        assert fast.read_range(key, 1, 10_000) == slow.read_range(key, 1, 10_000) == data[1:]  # what there is
        assert fast.read_bounded(key, len(data)) == data
    big = "objects/sha256/cd/" + "e" * 62
    for store in (fast, slow):
        with pytest.raises(IntegrityError, match="larger than"):
            store.read_bounded(big, 100)  # one ranged GET of limit + 1 bytes, refused
        assert store.read_bounded("objects/empty", 100) == b""  # S3 refuses a range of an empty object
    assert fast._fs is None  # all of that without s3fs


def test_missing_keys_and_buckets(s3_url: str, s3_server: S3Server) -> None:
    fast, slow = _pair(s3_url)
    for store in (fast, slow):
        with pytest.raises(NotFoundError):
            store.read("objects/sha256/00/" + "0" * 62)
        with pytest.raises(NotFoundError):
            store.read_range("objects/sha256/00/" + "0" * 62, 0, 10)
        assert list(store.list("objects/")) == []
    gone = s3_url.replace(s3_url.split("/")[2], "no-such-bucket-s3reads")
    for store in _pair(gone):
        with pytest.raises(RemoteError, match="does not exist"):
            list(store.list("objects/"))
        with pytest.raises(RemoteError, match="does not exist"):
            store.read("objects/sha256/00/" + "0" * 62)


def test_credential_options_are_taken_alike_and_never_shown(filled: str) -> None:
    secret = "wrong-" + "q" * 30
    opts = {"key": "AKIA" + "Z" * 16, "secret": secret}
    fast = FsspecStore(filled, opts)
    slow = FsspecStore(filled, {**opts, "use_listings_cache": False})
    assert fast._direct is not None and slow._direct is None
    # moto accepts any key unless told otherwise: what matters is that both paths send the
    # configured credentials and read the same, and that no message shows them
    for store in (fast, slow):
        assert store.read(next(iter(KEYS))) == KEYS[next(iter(KEYS))]
        try:
            store.read("objects/sha256/00/" + "0" * 62)
        except NotFoundError as exc:
            assert secret not in str(exc)


def test_a_write_known_absent_is_one_put_readable_both_ways(s3_url: str) -> None:
    fast, slow = _pair(s3_url)
    key = "packs/" + "2" * 64 + ".pack"
    assert fast.write_once(key, b"CASSTORE-PACK/1\n" + b"m" * 100, checked=True) is True
    assert fast._fs is None  # no s3fs for it
    assert slow.read(key) == fast.read(key) == b"CASSTORE-PACK/1\n" + b"m" * 100
    assert [i.size for i in slow.list("packs/")] == [116]


def test_writes_and_other_calls_still_go_through_s3fs(s3_url: str) -> None:
    fast = FsspecStore(s3_url)
    assert fast.write_once("objects/sha256/ab/" + "d" * 62, b"data") is True
    assert fast._fs is not None  # opened on the first call reads do not cover
    assert fast.info("objects/sha256/ab/" + "d" * 62).size == 4  # type: ignore[union-attr]
    assert fast.read("objects/sha256/ab/" + "d" * 62) == b"data"
