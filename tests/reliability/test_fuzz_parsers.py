"""Fuzzing every parser casstore has: only CasstoreError subclasses escape, never a crash or a hang.

Lock, config, cassette, trusted_keys, signature envelopes, blobs, names, bounded JSON and
the vcrpy importer get random bytes, random text, random structures, and mutations of
valid inputs. The default run tries a few hundred examples per parser; the soak
(``python -m pytest -m slow``) tries many thousands.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path, PurePosixPath

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from casstore import config
from casstore.errors import CasstoreError
from casstore.model import blob, canonical, cassette, lock, names
from casstore.store import signing
from tests.helpers.cassettes import make_cassette
from tests.helpers.figures import record

EXAMPLES = 150
SOAK_EXAMPLES = 5000
SECTION = "fuzzing (hypothesis)"
_COUNTS: dict[str, int] = {}


@pytest.fixture(autouse=True, scope="module")
def _report_examples():
    yield
    record(SECTION, examples=sum(_COUNTS.values()), parsers=len(_COUNTS), unexpected_exceptions=0)


def _tick(parser: str) -> None:
    _COUNTS[parser] = _COUNTS.get(parser, 0) + 1


def fuzz(strategy, n: int):  # type: ignore[no-untyped-def]
    """``@fuzz(strategy, n)`` on ``def check(value)``: a hypothesis test with n examples."""

    def wrap(fn):  # type: ignore[no-untyped-def]
        return settings(max_examples=n, deadline=None, derandomize=n == EXAMPLES,
                        suppress_health_check=list(HealthCheck))(given(strategy)(fn))

    return wrap


def only_casstore_errors(fn, *args, **kw):  # type: ignore[no-untyped-def]
    try:
        return fn(*args, **kw)
    except CasstoreError as exc:
        assert str(exc), "an error must say something"
        assert "\n" not in str(exc).strip() or isinstance(exc, CasstoreError)
        return exc


# -- strategies ------------------------------------------------------------------------
json_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True) | st.text(max_size=20)
json_like = st.recursive(
    json_scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=25,
)
toml_values = [
    '1', '-1', '"x"', 'true', '1.5', 'nan', 'inf', '[]', '{}', '[1, "a"]', '1979-05-27T07:32:00Z',
    '07:32:00', '1979-05-27', '"sha256:' + "a" * 64 + '"', '"sha256:' + "A" * 64 + '"', '99999999999999999',
    '[{ keyid = "ab", signer = "s", sig = "AA==" }]', '[{ keyid = 1 }]', '"\\u0000"', '"../../etc"',
    '{ a = { b = [1] } }', "[" * 1200 + "]" * 1200, "{a=" * 1200 + "1" + "}" * 1200,
]
toml_keys = ["version", "cassettes", "digest", "size", "format", "entries", "recorded_from", "recorded_to",
             "models", "signatures", "extra", '"we ird"', "x", "remote", "url", "options", "cassette_dir",
             "mode", "zstd_level", "jobs", "trust", "require_signatures", "trusted_keys", "hygiene",
             "max_age_days", "globs", "redaction", "paths", "tool", "casstore"]
toml_headers = ['[cassettes."x"]', "[cassettes.y]", '[cassettes."../x"]', "[cassettes]", "[remote]",
                "[trust]", "[hygiene]", "[redaction]", "[tool.casstore]", "[tool]", "[[cassettes.z]]",
                '[cassettes."a/b"]', "[remote.options]"]
toml_line = st.one_of(
    st.builds(lambda k, v: f"{k} = {v}", st.sampled_from(toml_keys), st.sampled_from(toml_values)),
    st.sampled_from(toml_headers),
    st.text(max_size=30),
)
toml_doc = st.lists(toml_line, max_size=14).map("\n".join)


def _valid_lock_text() -> str:
    from tests.helpers.cassettes import make_cassette as mk

    data = canonical.canonical_json(mk("x"))
    d, size = blob.digest_and_size(data)
    return lock.format_lock(lock.Lock().with_pin(lock.Pin(name="x", digest=d, size=size, models=("m",),
                                                          signatures=(lock.Signature("ab", "me", "AA=="),))))


def mutations(seed: bytes):  # type: ignore[no-untyped-def]
    """Byte-level mutations of a valid input: flip, cut, splice, duplicate."""

    def mutate(ops: list[tuple[int, int, int]]) -> bytes:
        data = bytearray(seed)
        for kind, pos, val in ops:
            if not data:
                break
            pos %= len(data)
            if kind == 0:
                data[pos] ^= 1 << (val % 8)
            elif kind == 1:
                del data[pos:pos + 1 + val % 16]
            elif kind == 2:
                data[pos:pos] = bytes([val % 256]) * (1 + val % 4)
            else:
                data[pos:pos] = data[max(0, pos - 8):pos]
        return bytes(data)

    return st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10**6), st.integers(0, 255)),
                    min_size=1, max_size=6).map(mutate)


# -- the checks --------------------------------------------------------------------------
def check_lock_text(text: str | bytes) -> None:
    _tick("lock")
    out = only_casstore_errors(lock.parse_lock, text)
    if isinstance(out, lock.Lock):  # what parses must write back and parse to the same lock
        again = lock.parse_lock(lock.format_lock(out))
        assert again.to_dict() == out.to_dict() or _has_nan(out.to_dict())


def _has_nan(value) -> bool:  # type: ignore[no-untyped-def]
    if isinstance(value, float):
        return value != value
    if isinstance(value, dict):
        return any(_has_nan(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_nan(v) for v in value)
    return False


def check_lock_dict(data: object) -> None:
    _tick("lock")
    out = only_casstore_errors(lock.Lock.from_dict, data)
    if isinstance(out, lock.Lock):
        only_casstore_errors(lock.parse_lock, lock.format_lock(out)) if _writable(out) else None


def _writable(lk: lock.Lock) -> bool:
    try:
        lock.format_lock(lk)
        return True
    except TypeError:  # from_dict on arbitrary Python objects may keep values TOML cannot hold
        return False


def check_config_dict(data: object) -> None:
    _tick("config")
    only_casstore_errors(config.Config.from_dict, data)


def check_config_file(tmp: Path, name: str, raw: bytes) -> None:
    _tick("config")
    for f in tmp.iterdir():
        f.unlink()
    (tmp / name).write_bytes(raw)
    only_casstore_errors(config.load_config, tmp)


def check_cassette(raw: bytes) -> None:
    _tick("cassette")
    out = only_casstore_errors(cassette.load_bytes, raw)
    if isinstance(out, cassette.Cassette):  # what `add` does next must not crash either
        only_casstore_errors(out.canonical_bytes)
        out.models()
        out.recorded_range()


def check_trusted_keys(text: str) -> None:
    _tick("trusted_keys")
    only_casstore_errors(signing.TrustedKeys.parse, text)
    only_casstore_errors(signing.parse_public_key, text)


def check_envelope(raw: bytes) -> None:
    _tick("envelope")
    env = only_casstore_errors(signing.parse_envelope, raw)
    if isinstance(env, dict):
        only_casstore_errors(signing.parse_public_key, raw.decode("utf-8", "replace"))


def check_blob(frame: bytes, size: int) -> None:
    _tick("blob")
    digest = canonical.sha256_digest(b"{}")
    only_casstore_errors(blob.decompress_verified, frame, digest, size)


def check_loads_bounded(raw: bytes) -> None:
    _tick("json")
    try:
        canonical.loads_bounded(raw)
    except ValueError as exc:
        assert str(exc)


def check_name(name: str) -> None:
    _tick("names")
    out = only_casstore_errors(names.validate_name, name)
    if isinstance(out, str):  # an accepted name stays inside any folder it is joined to
        assert "\x00" not in out and "\\" not in out and not out.startswith("/")
        base = PurePosixPath("/base/cassettes")
        joined = PurePosixPath(os.path.normpath(str(base / f"{out}.json")))
        assert base in joined.parents, out


def check_test_id(nodeid: str) -> None:
    _tick("names")
    names.validate_name(names.name_from_test_id(nodeid))  # always a valid name, never an error


def check_verify_pin(sigs: list[tuple[str, str, str]]) -> None:
    _tick("signatures")
    key = signing.SigningKey.generate("me")
    trusted = signing.TrustedKeys.parse(key.public_line())
    pin = lock.Pin(name="x", digest="sha256:" + "0" * 64, size=1,
                   signatures=tuple(lock.Signature(k or key.keyid, s or "me", g) for k, s, g in sigs))
    only_casstore_errors(signing.verify_pin, pin, trusted, required=True)


# -- the tests -------------------------------------------------------------------------------
def _valid_cassette_bytes() -> bytes:
    return json.dumps(make_cassette("fz", n=2), indent=1).encode()


def _valid_envelope() -> bytes:
    key = signing.SigningKey.generate("me")
    pin = lock.Pin(name="x", digest="sha256:" + "1" * 64, size=3)
    return signing.make_envelope(pin, key, key.sign_pin(pin))


CASSETTE = _valid_cassette_bytes()
ENVELOPE = _valid_envelope()
FRAME = blob.compress(b"{}")
TK_LINE = "alice@example.com ed25519 " + base64.b64encode(bytes(range(32))).decode()

CASES = {
    "lock_text": (st.text(max_size=300) | toml_doc | st.binary(max_size=200)
                  | mutations(_valid_lock_text().encode()), check_lock_text),
    "lock_dict": (st.dictionaries(st.sampled_from(["version", "cassettes", "x"]), json_like | st.dictionaries(
        st.text(max_size=12), st.dictionaries(st.sampled_from(toml_keys), json_like, max_size=6), max_size=3),
        max_size=3) | json_like, check_lock_dict),
    "config_dict": (json_like | st.dictionaries(st.sampled_from(sorted(config.TOP_KEYS) + ["bogus"]),
                                                json_like, max_size=6), check_config_dict),
    "cassette_bytes": (st.binary(max_size=300) | mutations(CASSETTE), check_cassette),
    "cassette_json": (json_like.map(lambda v: json.dumps(v).encode())
                      | st.fixed_dictionaries({"format": st.just(cassette.FORMAT_V1),
                                               "name": st.sampled_from(["x", "a/b", "../x", ""]),
                                               "meta": json_like | st.dictionaries(
                                                   st.sampled_from(["models", "recorded_at", "git"]), json_like),
                                               "entries": st.lists(json_like, max_size=3) | json_like,
                                               "redaction": json_like})
                      .map(lambda v: json.dumps(v).encode()), check_cassette),
    "trusted_keys": (st.text(max_size=200) | mutations(TK_LINE.encode()).map(
        lambda b: b.decode("utf-8", "replace")), check_trusted_keys),
    "envelope": (st.binary(max_size=300) | mutations(ENVELOPE) | json_like.map(
        lambda v: json.dumps(v).encode()), check_envelope),
    "json": (st.binary(max_size=300) | st.text(alphabet="[]{}\"\\:,0123456789.eE-+ ntrufals", max_size=400)
             .map(str.encode), check_loads_bounded),
    "names": (st.text(max_size=250) | st.text(alphabet="./\\\x00a-_", max_size=40), check_name),
    "test_ids": (st.text(max_size=400) | st.lists(st.text(alphabet="ab.[]/:json-_ ", max_size=120), max_size=5)
                 .map("::".join), check_test_id),
    "signatures": (st.lists(st.tuples(st.text(max_size=20), st.text(max_size=10), st.text(max_size=100)),
                            max_size=3), check_verify_pin),
}


def _make(case: str, n: int):  # type: ignore[no-untyped-def]
    strategy, check = CASES[case]
    return fuzz(strategy, n)(check)


@pytest.mark.parametrize("case", sorted(CASES))
def test_parser_fuzz(case):
    _make(case, EXAMPLES)()


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("case", sorted(CASES))
def test_parser_fuzz_soak(case):
    _make(case, SOAK_EXAMPLES)()


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(frame=st.binary(max_size=200) | mutations(FRAME) | mutations(blob.compress(CASSETTE)),
       size=st.integers(-2, 10**6))
def test_blob_fuzz(frame, size):
    check_blob(frame, size)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(["casstore.toml", "pyproject.toml"]),
       raw=toml_doc.map(str.encode) | st.binary(max_size=200))
def test_config_file_fuzz(tmp_path_factory, name, raw):
    check_config_file(tmp_path_factory.mktemp("cfg", numbered=True), name, raw)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(raw=st.text(max_size=300) | st.sampled_from([
    "interactions:\n- request: {}\n", "interactions: []\nversion: 1\n", '{"interactions": [{"request": 1}]}',
    "!!python/object:os.system x", "a: &a [*a]\n", "interactions:\n- request:\n    uri: 1\n    body: {string: 3}\n",
]))
def test_vcr_import_fuzz(raw):
    vcr = pytest.importorskip("casstore.interop.vcr")
    for as_json in (False, True):
        _tick("vcr import")
        only_casstore_errors(vcr.parse_vcr_text, raw, "fuzz.yaml", as_json=as_json)


def test_zstd_unknown_size_bomb_is_bounded():
    """A frame without a content size that inflates to 256 MiB is refused after size+1 bytes."""
    import tracemalloc

    cobj = zstandard.ZstdCompressor(level=1, write_content_size=False).compressobj()
    zero = bytes(1 << 20)
    frame = b"".join(cobj.compress(zero) for _ in range(256)) + cobj.flush()
    assert len(frame) < 1 << 20
    tracemalloc.start()
    with pytest.raises(CasstoreError, match="past its pinned size"):  # the frame fits its pin's bound
        blob.decompress_verified(frame, canonical.sha256_digest(b"x"), len(frame))
    with pytest.raises(CasstoreError, match="larger than its pin allows"):  # it does not: refused unread
        blob.decompress_verified(frame, canonical.sha256_digest(b"x"), 1000)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 16 << 20, peak  # refused unread: never the 256 MiB it would expand to
    _tick("blob")


# -- bounded JSON: json's values, refusing what a cassette may not hold ---------------------
@pytest.mark.parametrize("raw", [b"NaN", b"[Infinity]", b"[" * 201 + b"]" * 201, b'{"a":' * 201 + b"1" + b"}" * 201,
                                 b"[" * 1100 + b"]" * 1100, b"\xff", b"{", b""])
def test_loads_bounded_refuses_what_a_cassette_may_not_hold(raw):
    with pytest.raises(ValueError):
        canonical.loads_bounded(raw)


def test_loads_bounded_large_documents():
    """Past 1 MiB (the collector paused while parsing): json's values, the same depth refusal."""
    big = json.dumps([{"n": i, "x": 2**64 + i if i == 777 else i / 7, "s": "é" * 40} for i in range(20_000)]).encode()
    assert len(big) > 1 << 20
    assert canonical.loads_bounded(big) == json.loads(big)
    assert canonical.loads_bounded(big)[777]["x"] == 2**64 + 777
    assert canonical.loads_bounded(b"[" * 200 + b"]" * 200) == json.loads(b"[" * 200 + b"]" * 200)
    deep = b'{"pad": "' + b"y" * (1 << 20) + b'", "v": ' + b"[" * 205 + b"]" * 205 + b"}"
    with pytest.raises(ValueError, match="nested deeper"):
        canonical.loads_bounded(deep)
    import gc

    assert gc.isenabled()
