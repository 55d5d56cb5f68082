"""One conformance suite, run against every backend (the S3 one on a real moto server)."""

import threading
import uuid

import pytest

from casstore.errors import NotFoundError, StoreError
from casstore.model.blob import compress, digest_and_size
from casstore.store.backends import (
    LocalStore,
    MemoryStore,
    Store,
    StoreKey,
    digest_from_key,
    is_local_url,
    object_key,
    open_store,
    parse_key,
    signature_key,
)
from casstore.store.fsspec_store import FsspecStore


@pytest.fixture(params=["local", "memory", "fsspec-memory", "s3"])
def store(request, tmp_path) -> Store:
    kind = request.param
    if kind == "local":
        return LocalStore(tmp_path / "store")
    if kind == "memory":
        return MemoryStore()
    if kind == "fsspec-memory":
        return FsspecStore(f"memory://casstore-test-{uuid.uuid4().hex}")
    s3_url = request.getfixturevalue("s3_url")
    return open_store(s3_url)


def _obj(text: str) -> tuple[str, bytes]:
    data = text.encode()
    return object_key(digest_and_size(data)[0]), compress(data)


def test_layout_matches_the_design():
    d = "sha256:" + "ab" + "c" * 62
    assert object_key(d) == "objects/sha256/ab/" + "c" * 62
    assert signature_key(d, "0123abcd") == "signatures/sha256/ab/" + "c" * 62 + "/0123abcd.sig"
    assert digest_from_key(object_key(d)) == d


def test_one_parser_reads_back_every_key_the_layout_writes():
    d = "sha256:" + "ab" + "c" * 62
    assert parse_key(object_key(d)) == StoreKey("object", d)
    assert parse_key(signature_key(d, "0123abcd")) == StoreKey("signature", d, "0123abcd")
    tail = "ab/" + "c" * 62
    # a file in a signature folder that is no envelope: its digest, no key id (fsck: a stray)
    assert parse_key(f"signatures/sha256/{tail}/notes.txt") == StoreKey("signature", d, None)
    assert parse_key(f"signatures/sha256/{tail}/XYZ.sig") == StoreKey("signature", d, None)
    for bad in (f"objects/sha256/{tail}/x", "objects/sha256/abc/" + "c" * 61, f"objects/md5/{tail}",
                f"packs/sha256/{tail}", "objects/sha256/ab/" + "C" * 62, "casstore.lock", ""):
        assert parse_key(bad) is None, bad
    assert digest_from_key(signature_key(d, "0123abcd")) is None


def test_write_once_then_read(store):
    key, frame = _obj("hello")
    assert store.write_once(key, frame) is True
    assert store.read(key) == frame
    assert store.write_once(key, frame) is False  # existing object of the right size: no-op
    assert store.read(key) == frame


def test_missing_is_not_found(store):
    key, _ = _obj("absent")
    with pytest.raises(NotFoundError):
        store.read(key)
    assert store.info(key) is None


def test_list_and_exists_many(store):
    keys = []
    for i in range(5):
        key, frame = _obj(f"item {i}")
        store.write_once(key, frame)
        keys.append(key)
    absent, _ = _obj("nope")
    listed = {i.key: i.size for i in store.list("objects/")}
    assert set(keys) <= set(listed)
    found = store.exists_many(keys + [absent])
    assert set(found) == set(keys)
    assert all(found[k] == listed[k] for k in keys)


def test_wrong_size_object_is_repaired(store):
    key, frame = _obj("repair me")
    store.write_once(key, frame[:5])  # a torn/corrupt object someone left behind
    assert store.write_once(key, frame) is True
    assert store.read(key) == frame


def test_delete(store):
    key, frame = _obj("to delete")
    store.write_once(key, frame)
    store.delete(key)
    with pytest.raises(NotFoundError):
        store.read(key)
    store.delete(key)  # absent is fine


def test_concurrent_writers_of_one_object(store):
    key, frame = _obj("contended" * 1000)
    errors = []

    def w():
        try:
            store.write_once(key, frame)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=w) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert store.read(key) == frame


def test_keys_cannot_escape(store):
    if isinstance(store, MemoryStore):
        pytest.skip("memory store has no paths")
    with pytest.raises(StoreError):
        store.read("../outside")


def test_local_stat_many_answers_as_info_and_refuses_escaping_keys(tmp_path):
    s = LocalStore(tmp_path / "s")
    key, frame = _obj("x")
    s.write_once(key, frame)
    (tmp_path / "outside").write_bytes(b"x")
    missing = key[:-1] + ("0" if key[-1] != "0" else "1")
    assert s.stat_many([key, missing]) == {key: s.info(key)}
    for bad in ("../outside", "objects/../../outside", "/etc/hostname"):
        with pytest.raises(StoreError, match="outside the store"):
            s.stat_many([key, bad])


def test_local_store_leaves_no_temp_files(tmp_path):
    s = LocalStore(tmp_path / "s")
    key, frame = _obj("x")
    s.write_once(key, frame)
    files = [p.name for p in (tmp_path / "s").rglob("*") if p.is_file()]
    assert files == [key.rsplit("/", 1)[1]]


def test_unreachable_s3_is_a_store_error(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing-" + "x" * 8)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing-" + "y" * 16)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # discard port: nothing listens
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    s = open_store("s3://nobucket/x", {"config_kwargs": {"connect_timeout": 1, "retries": {"max_attempts": 1}}})
    key, frame = _obj("x")
    with pytest.raises(StoreError):
        s.write_once(key, frame)


@pytest.mark.parametrize("url", ["store", ".casstore/store", "/abs/store", "file:///abs/store", "memory://b/p"])
def test_is_local_url_says_what_open_store_opens(url, tmp_path):
    # sync opens a local folder at once (its own core checks pins) and anything else meanwhile
    opened = open_store(url, base=tmp_path)
    assert is_local_url(url) == isinstance(opened.inner, LocalStore)


@pytest.mark.parametrize("many", [3, 40], ids=["a stat a key", "the folder listed"])
def test_local_present_answers_as_stat_many(tmp_path, many):
    """present(): existence as stat_many finds it; a folder holding many of the keys asked
    (a third of what its size suggests) is listed once instead (push's second look)."""
    s = LocalStore(tmp_path / "s")
    there = [f"objects/sha256/ab/{i:062x}" for i in range(many)]
    for k in there:
        s.write_once(k, b"x")
    (tmp_path / "s" / "objects" / "sha256" / "ab" / ".tmp-half-written").write_bytes(b"x")
    s.write_once("top", b"x")
    absent = [f"objects/sha256/ab/{i:062x}" for i in range(many, many + 5)] + \
             ["objects/sha256/cd/" + "0" * 62, "objects/sha256/ab/.tmp-half-written/x", "nothing"]
    asked = [*there, *absent, "top", "objects/sha256/ab/.tmp-half-written", "objects/sha256/ab"]
    assert s.present(asked) == set(s.stat_many(asked))
    assert s.present(asked) >= {*there, "top"} and not s.present(absent)
    for bad in ("../outside", "objects/../../outside", "/etc/hostname"):
        with pytest.raises(StoreError, match="outside the store"):
            s.present([*there, bad])
