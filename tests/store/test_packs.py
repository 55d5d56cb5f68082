"""Packs on the real S3 wire protocol (moto on 127.0.0.1): a push of many cassettes
writes packs, pull reads them with a few ranged GETs, and every bad pack is refused
clearly without losing anything."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from casstore.store.packs import PACK_MAGIC, build_pack, parse_index
from tests.helpers.cassettes import write_cassette
from tests.helpers.commands import git
from tests.helpers.faultproxy import FaultPlan, FaultProxy
from tests.helpers.toml import tomllib

N = 6


def _keys(s3_server, s3_url: str) -> list[str]:
    bucket, prefix = s3_url[len("s3://"):].split("/", 1)
    resp = s3_server.client().list_objects_v2(Bucket=bucket, Prefix=prefix + "/")
    return sorted(o["Key"][len(prefix) + 1:] for o in resp.get("Contents", []))


def _get(s3_server, s3_url: str, key: str) -> bytes:
    bucket, prefix = s3_url[len("s3://"):].split("/", 1)
    return s3_server.client().get_object(Bucket=bucket, Key=f"{prefix}/{key}")["Body"].read()


def _put(s3_server, s3_url: str, key: str, data: bytes) -> None:
    bucket, prefix = s3_url[len("s3://"):].split("/", 1)
    s3_server.client().put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=data)


def _delete(s3_server, s3_url: str, key: str) -> None:
    bucket, prefix = s3_url[len("s3://"):].split("/", 1)
    s3_server.client().delete_object(Bucket=bucket, Key=f"{prefix}/{key}")


def _set_threshold(repo: Path, n: int) -> None:
    cfg = repo / "casstore.toml"
    text = cfg.read_text()
    assert "[remote]" in text
    cfg.write_text(text.replace("[remote]\n", f"[remote]\npack_threshold = {n}\n", 1))


def _added_project(root: Path, casstore, s3_url: str, names: list[str], threshold: int) -> Path:  # type: ignore[no-untyped-def]
    """A git repo on ``s3_url`` with ``pack_threshold = threshold`` and ``names`` added."""
    root.mkdir()
    git("init", "-q", cwd=root)
    assert casstore("init", "--remote", s3_url, cwd=root).exit_code == 0
    _set_threshold(root, threshold)
    for name in names:
        write_cassette(root, name, n=2)
    r = casstore("add", "tests/cassettes", cwd=root)
    assert r.exit_code == 0, r.stderr
    return root


@pytest.fixture
def packed(tmp_path, casstore, s3_url, s3_server):
    """A committed repo whose N cassettes were pushed as one pack."""
    repo = _added_project(tmp_path / "work", casstore, s3_url, [f"c{i}" for i in range(N)], 3)
    r = casstore("push", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert f"pushed {N} cassette(s)" in r.stdout
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "pins", cwd=repo)
    return repo


def _fresh_cache(tmp_path, monkeypatch, name: str = "cache2") -> Path:
    cache = tmp_path / name
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(cache))
    return cache


def _pack_ids(keys: list[str]) -> list[str]:
    return sorted({m.group(1) for k in keys if (m := re.match(r"packs/([0-9a-f]{64})\.pack$", k))})


def test_push_writes_one_pack_and_pull_reads_it(tmp_path, packed, casstore, s3_server, s3_url, monkeypatch):
    keys = _keys(s3_server, s3_url)
    assert [k for k in keys if k.startswith(("objects/", "signatures/"))] == []
    (pack_id,) = _pack_ids(keys)
    assert keys == [f"packs/{pack_id}.idx", f"packs/{pack_id}.pack"]
    members = parse_index(_get(s3_server, s3_url, f"packs/{pack_id}.idx"), pack_id)
    assert sum(k.startswith("objects/") for k in members) == N
    assert sum(k.startswith("signatures/") for k in members) == N

    # a second push finds everything in the pack: nothing uploaded
    r = casstore("push", cwd=packed)
    assert r.exit_code == 0 and "pushed 0 cassette(s)" in r.stdout, r.stdout

    # pull through a counting proxy: one listing, one index, one ranged GET
    _fresh_cache(tmp_path, monkeypatch)
    with FaultProxy(s3_server.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        r = casstore("pull", "--frozen", cwd=packed)
        assert r.exit_code == 0, r.stderr
        assert f"fetched {N} cassette(s)" in r.stdout
        assert proxy.counters.forwarded <= 4, proxy.counters
    r = casstore("verify", cwd=packed)
    assert r.exit_code == 0 and f"verified {N}/{N}" in r.stdout, r.stdout + r.stderr
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    r = casstore("verify", "--remote", cwd=packed)
    assert r.exit_code == 0, r.stdout + r.stderr


def test_replay_after_pull_from_a_pack(tmp_path, packed, casstore, monkeypatch):
    _fresh_cache(tmp_path, monkeypatch)
    assert casstore("pull", "--frozen", cwd=packed).exit_code == 0
    r = casstore("show", "c3", cwd=packed)
    assert r.exit_code == 0 and "object_error" not in r.stdout, r.stdout


def test_flipped_byte_in_a_pack_is_refused_for_that_cassette_only(tmp_path, packed, casstore, s3_server, s3_url,
                                                                  monkeypatch):
    (pack_id,) = _pack_ids(_keys(s3_server, s3_url))
    members = parse_index(_get(s3_server, s3_url, f"packs/{pack_id}.idx"), pack_id)
    digest = tomllib.loads(packed.joinpath("casstore.lock").read_text())["cassettes"]["c2"]["digest"]
    victim = members[f"objects/sha256/{digest[7:9]}/{digest[9:]}"]
    pack = bytearray(_get(s3_server, s3_url, f"packs/{pack_id}.pack"))
    pack[victim.offset + victim.length // 2] ^= 0x55
    _put(s3_server, s3_url, f"packs/{pack_id}.pack", bytes(pack))

    cache = _fresh_cache(tmp_path, monkeypatch)
    r = casstore("pull", "--frozen", cwd=packed)
    assert r.exit_code == 1
    assert "c2:" in r.stderr and "refused object" in r.stderr, r.stderr
    assert f"fetched {N - 1} cassette(s)" in r.stdout
    hexd = digest[7:]
    assert not (cache / "objects" / "sha256" / hexd[:2] / hexd[2:]).exists()  # nothing bad cached
    r = casstore("verify", "--remote", cwd=packed)
    assert r.exit_code == 1 and "c2" in r.stderr, r.stderr


@pytest.mark.parametrize("index", [
    b"not json",
    b'{"format": "casstore.pack-index/v1", "pack": "PACK", "pack_size": 10, "members": [["../../etc/passwd", 16, 4]]}',
    b'{"format": "casstore.pack-index/v1", "pack": "PACK", "pack_size": 20, "members": [["MEMBER", 16, 9999]]}',
    b'{"format": "casstore.pack-index/v1", "pack": "0000", "pack_size": 20, "members": []}',
    b"[" * 100_000,
])
def test_hostile_index_is_reported_and_reads_nothing(tmp_path, packed, casstore, s3_server, s3_url, monkeypatch,
                                                     index):
    (pack_id,) = _pack_ids(_keys(s3_server, s3_url))
    first_member = sorted(parse_index(_get(s3_server, s3_url, f"packs/{pack_id}.idx"), pack_id))[0]
    _put(s3_server, s3_url, f"packs/{pack_id}.idx",
         index.replace(b"PACK", pack_id.encode()).replace(b"MEMBER", first_member.encode()))
    _fresh_cache(tmp_path, monkeypatch)
    r = casstore("pull", "--frozen", cwd=packed)
    assert r.exit_code == 1
    assert "Traceback" not in r.stderr
    assert "is missing from" in r.stderr, r.stderr
    r = casstore("verify", "--remote", cwd=packed)
    assert r.exit_code == 1
    assert f"packs/{pack_id}.idx" in r.stdout + r.stderr, r.stdout + r.stderr


def test_interrupted_push_leaves_an_invisible_pack_and_a_rerun_completes(tmp_path, packed, casstore, s3_server,
                                                                        s3_url, monkeypatch):
    (pack_id,) = _pack_ids(_keys(s3_server, s3_url))
    _delete(s3_server, s3_url, f"packs/{pack_id}.idx")  # killed between the pack and its index
    author_cache = os.environ["CASSTORE_CACHE_DIR"]
    _fresh_cache(tmp_path, monkeypatch)
    r = casstore("pull", "--frozen", cwd=packed)
    assert r.exit_code == 1 and "pinned but not pushed" in r.stderr
    monkeypatch.setenv("CASSTORE_CACHE_DIR", author_cache)
    # the author's cache still has the objects: push again writes the same pack and its index
    r = casstore("push", cwd=packed)
    assert r.exit_code == 0, r.stderr
    assert _pack_ids(_keys(s3_server, s3_url)) == [pack_id]  # deterministic: same bytes, same name
    _fresh_cache(tmp_path, monkeypatch, "cache3")
    assert casstore("pull", "--frozen", cwd=packed).exit_code == 0


def test_gc_rewrites_a_pack_without_the_unpinned_and_removes_stray_packs(tmp_path, packed, casstore, s3_server,
                                                                        s3_url, monkeypatch):
    (pack_id,) = _pack_ids(_keys(s3_server, s3_url))
    # c0 and c1 are re-recorded: their old objects are pinned by no commit any more...
    for i in (0, 1):
        write_cassette(packed, f"c{i}", n=4)
    assert casstore("add", "tests/cassettes", cwd=packed).exit_code == 0
    assert casstore("push", cwd=packed).exit_code == 0
    git("add", "-A", cwd=packed)
    git("commit", "-qm", "re-record", cwd=packed)
    # ...once history forgets them
    git("checkout", "-q", "--orphan", "fresh", cwd=packed)
    git("commit", "-qm", "squashed", cwd=packed)
    git("branch", "-D", "master", "main", cwd=packed, check=False)
    stray = build_pack([("objects/sha256/00/" + "0" * 62, b"leftover")])
    _put(s3_server, s3_url, f"packs/{stray[0]}.pack", stray[1])

    with FaultProxy(s3_server.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        r = casstore("gc", "--remote", "--grace", "0s", cwd=packed)
        # no DELETE per packed object: the stray pack, the old pack and its index, and the
        # liveness marker of the second push (older than the grace period of 0s)
        assert proxy.counters.by_method["DELETE"] <= 4, proxy.counters
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "1 pack(s) without an index" in r.stdout
    keys = _keys(s3_server, s3_url)
    assert f"packs/{pack_id}.pack" not in keys and f"packs/{stray[0]}.pack" not in keys
    assert len(_pack_ids(keys)) == 1  # the rewritten pack: the N-2 still pinned
    _fresh_cache(tmp_path, monkeypatch)
    r = casstore("pull", "--frozen", cwd=packed)
    assert r.exit_code == 0, r.stderr
    r = casstore("verify", "--remote", cwd=packed)
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "orphan" not in r.stdout


def test_below_the_threshold_and_zero_push_loose_objects(tmp_path, casstore, s3_url, s3_server):
    repo = _added_project(tmp_path / "loose", casstore, s3_url, [f"l{i}" for i in range(4)], 0)
    assert casstore("push", cwd=repo).exit_code == 0
    keys = _keys(s3_server, s3_url)
    assert sum(k.startswith("objects/") for k in keys) == 4 and not _pack_ids(keys)


@pytest.mark.parametrize("value", ["-1", '"64"', "true", "2000000"])
def test_bad_pack_threshold_is_a_config_error(tmp_path, casstore, value):
    repo = tmp_path / "r"
    repo.mkdir()
    (repo / "casstore.toml").write_text(f'[remote]\nurl = "s3://b/p"\npack_threshold = {value}\n')
    r = casstore("status", cwd=repo)
    assert r.exit_code == 2
    assert "pack_threshold" in r.stderr


def test_pack_format_round_trip_and_bounds():
    items = [("objects/sha256/ab/" + "c" * 62, b"frame"), ("signatures/sha256/ab/" + "c" * 62 + "/0a.sig", b"{}")]
    pack_id, pack, index = build_pack(items)
    assert pack.startswith(PACK_MAGIC)
    assert build_pack(list(reversed(items)))[0] == pack_id
    members = parse_index(index, pack_id)
    for key, data in items:
        m = members[key]
        assert pack[m.offset:m.offset + m.length] == data
    doc = json.loads(index)
    doc["members"][0][1] = 0  # overlapping the magic
    with pytest.raises(ValueError, match="invalid range"):
        parse_index(json.dumps(doc).encode(), pack_id)
    with pytest.raises(ValueError, match="not its own"):
        parse_index(index, "f" * 64)


def test_push_failing_between_pack_and_index_reports_and_a_rerun_completes(tmp_path, casstore, s3_url, s3_server,
                                                                          monkeypatch):
    from tests.helpers.faultproxy import FaultPlan

    repo = _added_project(tmp_path / "r", casstore, s3_url, [f"f{i}" for i in range(4)], 3)
    author_cache = os.environ["CASSTORE_CACHE_DIR"]
    with FaultProxy(s3_server.endpoint, FaultPlan(share=1.0, kinds=("503",), methods=("PUT",),
                                                  path_contains=".idx")) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        r = casstore("push", cwd=repo)
        assert r.exit_code == 1, r.stdout
        assert "upload of the pack" in r.stderr and "Traceback" not in r.stderr, r.stderr
        keys = _keys(s3_server, s3_url)
        assert len(_pack_ids(keys)) == 1 and not [k for k in keys if k.endswith(".idx")]
        _fresh_cache(tmp_path, monkeypatch)
        r = casstore("pull", cwd=repo)
        assert r.exit_code == 1 and "pinned but not pushed" in r.stderr, r.stderr
        proxy.set_plan(FaultPlan())
        monkeypatch.setenv("CASSTORE_CACHE_DIR", author_cache)
        assert casstore("push", cwd=repo).exit_code == 0
        _fresh_cache(tmp_path, monkeypatch, "cache3")
        r = casstore("pull", cwd=repo)
        assert r.exit_code == 0 and "fetched 4 cassette(s)" in r.stdout, r.stdout + r.stderr


def test_packs_through_transient_faults_lose_nothing(tmp_path, packed, casstore, s3_server, s3_url, monkeypatch):
    from tests.helpers.faultproxy import FaultPlan

    monkeypatch.setenv("CASSTORE_RETRY_BASE_DELAY", "0.01")
    with FaultProxy(s3_server.endpoint, FaultPlan(share=0.6, kinds=("500", "503", "reset"), seed=1,
                                                  after_share=0.3)) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        for attempt in range(6):
            _fresh_cache(tmp_path, monkeypatch, f"faulty-{attempt}")
            r = casstore("pull", "--frozen", cwd=packed)
            assert "Traceback" not in r.stderr
            if r.exit_code == 0:
                break
            assert r.exit_code == 1 and "error:" in r.stderr
        assert r.exit_code == 0, r.stderr
        assert proxy.counters.failed > 0
    assert casstore("verify", cwd=packed).exit_code == 0


def test_concurrent_pushers_packing_overlapping_sets(tmp_path, casstore, s3_url, s3_server, monkeypatch):
    import subprocess
    import sys

    names = [f"o{i}" for i in range(12)]
    repo = _added_project(tmp_path / "r", casstore, s3_url, names, 4)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "pins", cwd=repo)
    # four writers, each 6 names starting at 3*i: every cassette is packed by two writers at once
    cmds = [[sys.executable, "-m", "casstore.cli", "push", "-q", *[names[(3 * i + j) % 12] for j in range(6)]]
            for i in range(4)]
    procs = [subprocess.Popen(c, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmds]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and "Traceback" not in err, err
    # packs (and, for a writer that started late and found fewer than 4 missing, loose objects)
    assert _pack_ids(_keys(s3_server, s3_url))
    r = casstore("verify", "--remote", cwd=repo)
    assert r.exit_code == 0 and "verified 12/12" in r.stdout, r.stdout + r.stderr
    # everything is pinned: gc deletes nothing, and every cassette still comes back
    r = casstore("gc", "--remote", "--grace", "0s", cwd=repo)
    assert r.exit_code == 0 and "deleted 0 object(s)" in r.stdout, r.stdout + r.stderr
    _fresh_cache(tmp_path, monkeypatch)
    r = casstore("pull", "--frozen", cwd=repo)
    assert r.exit_code == 0 and "fetched 12 cassette(s)" in r.stdout, r.stdout + r.stderr


def test_pulling_a_few_names_finds_them_in_the_pack(tmp_path, packed, casstore, s3_server, monkeypatch):
    _fresh_cache(tmp_path, monkeypatch)
    with FaultProxy(s3_server.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        r = casstore("pull", "c1", "c4", cwd=packed)
        assert r.exit_code == 0 and "fetched 2 cassette(s)" in r.stdout, r.stdout + r.stderr
        # a GET that misses (loose first), the listing, the index, the ranged reads
        assert proxy.counters.forwarded <= 6, proxy.counters
    r = casstore("verify", "c1", "c4", cwd=packed)
    assert r.exit_code == 0, r.stdout + r.stderr


def test_index_key_check_agrees_with_the_key_parser() -> None:
    """parse_index checks each member's key with one expression: it accepts exactly the
    object keys and well-formed envelope keys of the key layout's parser."""
    import random

    from casstore.store.keys import parse_key
    from casstore.store.packs import _MEMBER_KEY

    rng = random.Random(19)
    hexd = "0123456789abcdef"
    accepted = 0
    for _ in range(20_000):
        d = "".join(rng.choice(hexd + "AG/.\n") if rng.random() < 0.02 else rng.choice(hexd) for _ in range(64))
        if rng.random() < 0.5:
            key = f"objects/sha256/{d[:2]}/{d[2:]}" + rng.choice(["", "", "x", "/"])
        else:
            keyid = "".join(rng.choice(hexd) for _ in range(rng.randint(0, 66)))
            key = f"signatures/sha256/{d[:2]}/{d[2:]}/{keyid}" + rng.choice([".sig", ".sig", " .sig", ".si"])
        parsed = parse_key(key)
        ok = parsed is not None and (parsed.kind == "object" or parsed.keyid is not None)
        assert bool(_MEMBER_KEY.fullmatch(key)) == ok, key
        accepted += ok
    assert 2_000 < accepted < 18_000  # both sides of the rule were exercised


def test_a_catalog_read_during_the_checks_fails_once_not_twice(tmp_path, packed, casstore, s3_server, monkeypatch):
    # more keys than a few: pull reads the packs' catalog while forked children check the
    # signatures; a listing that keeps failing is reported after one round of retries
    _fresh_cache(tmp_path, monkeypatch)
    monkeypatch.setenv("CASSTORE_RETRY_ATTEMPTS", "2")
    monkeypatch.setenv("CASSTORE_RETRY_DEADLINE", "5")
    with FaultProxy(s3_server.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        proxy.set_plan(FaultPlan(share=1.0, kinds=("503",), path_contains="list-type", seed=5))
        r = casstore("pull", "--frozen", cwd=packed)
        assert r.exit_code == 1, r.stdout + r.stderr
        assert "cannot list" in r.stderr and "gave up after 2 attempts" in r.stderr, r.stderr
        # 2 attempts, one request each: the S3 client's own retries are off
        assert proxy.counters.failed == 2, proxy.counters


def test_the_pack_read_during_the_checks_is_the_one_used(tmp_path, packed, casstore, s3_server, s3_url, monkeypatch):
    _fresh_cache(tmp_path, monkeypatch)
    with FaultProxy(s3_server.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        r = casstore("pull", "--frozen", cwd=packed)
        assert r.exit_code == 0 and f"fetched {N} cassette(s)" in r.stdout, r.stdout + r.stderr
        # the listing, the index and one ranged GET, all sent while the signatures were
        # checked; the fetch after the checks used that read instead of sending it again
        assert proxy.counters.forwarded == 3, proxy.counters
    r = casstore("verify", cwd=packed)
    assert r.exit_code == 0 and f"verified {N}/{N}" in r.stdout, r.stdout + r.stderr
    # a pin whose signature no longer checks is not fetched: the early read does not count
    (packed / ".casstore" / "trusted_keys").write_text("")
    _fresh_cache(tmp_path, monkeypatch, "cache3")
    r = casstore("pull", "--frozen", cwd=packed)
    assert r.exit_code != 0 and "fetched 0 cassette(s)" in r.stdout + r.stderr, r.stdout + r.stderr
    assert not [p for p in (tmp_path / "cache3").rglob("*") if p.is_file() and "objects" in p.as_posix()]


def test_the_frames_read_during_the_checks_are_verified_then_and_once(tmp_path, packed, casstore, monkeypatch):
    # the packs read while the signatures are checked are decompressed and hashed then, not twice
    from casstore.ops import sync
    from casstore.store import signing

    events: list[str] = []
    real_pin, real_frame = signing.verify_pin, sync.verify_frame

    def pin(*args, **kwargs):  # type: ignore[no-untyped-def]
        events.append("signature")
        return real_pin(*args, **kwargs)

    def frame(*args, **kwargs):  # type: ignore[no-untyped-def]
        events.append("frame")
        return real_frame(*args, **kwargs)

    monkeypatch.setattr(signing, "verify_pin", pin)
    monkeypatch.setattr(sync, "verify_frame", frame)
    _fresh_cache(tmp_path, monkeypatch)
    r = casstore("pull", "--frozen", cwd=packed)
    assert r.exit_code == 0 and f"fetched {N} cassette(s)" in r.stdout, r.stdout + r.stderr
    assert events.count("signature") == N and events.count("frame") == N, events
    r = casstore("verify", cwd=packed)
    assert r.exit_code == 0 and f"verified {N}/{N}" in r.stdout, r.stdout + r.stderr


def test_a_pack_writer_knows_its_members_as_its_index_lists_them(tmp_path) -> None:
    # the catalog a write updates is built from the members it packed, not by reading its own
    # index back: it must be what parse_index reads from that index
    import hashlib

    from casstore.store.local import LocalStore
    from casstore.store.packs import PackedStore

    items = []
    for i in range(40):
        h = hashlib.sha256(str(i).encode()).hexdigest()
        items += [(f"objects/sha256/{h[:2]}/{h[2:]}", b"o" * (i + 1)), (f"signatures/sha256/{h[:2]}/{h[2:]}/{h[:16]}.sig",
                                                                            b"s" * (i + 2))]
    store = PackedStore(LocalStore(tmp_path / "store"), pack_threshold=1)
    store.catalog()  # loaded: the write updates it
    ((keys, write),) = store.write_packs(items)
    pack_id = write()
    index = (tmp_path / "store" / "packs" / f"{pack_id}.idx").read_bytes()
    assert store.catalog().contents[pack_id] == parse_index(index, pack_id)
    assert {k: store.read(k) for k in keys} == dict(items)
