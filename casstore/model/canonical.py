"""Canonical JSON and digests (pure, no I/O).

Canonical JSON is UTF-8, keys sorted, no insignificant whitespace, no NaN/Infinity.
It is what gets hashed, so two equal values always give the same bytes.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import IntegrityError

__all__ = ["canonical_json", "sha256_digest", "parse_digest", "DIGEST_RE", "loads_bounded", "loads_canonical",
           "collector_paused", "has_canonical_digest"]

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}\Z")  # \Z: "$" would take a trailing newline
MAX_JSON_DEPTH = 200
# what _fast_loads answers instead of a value
INVALID = object()  # orjson refused the text
SLOW = object()  # orjson read it, but json must (an integer past 64 bits)
DEEP = object()  # nested deeper than the bound


@functools.cache
def _orjson() -> Any:
    """orjson, imported on first use (its imports, uuid and datetime among them, are
    ones `verify` and `pull` never need); None without it (json alone gives the same values)."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - a dependency
        return None
    return orjson


# what json.dumps(value, sort_keys=True, ...) builds on every call, built once (stateless)
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> bytes:
    """Serialize ``value`` to canonical JSON bytes."""
    try:
        return _ENCODER.encode(value).encode("utf-8")
    except (ValueError, TypeError, RecursionError) as exc:
        raise IntegrityError(f"value cannot be written as canonical JSON: {exc}") from exc


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# a number of magnitude 1e18 or more as canonical JSON writes a float (repr: 9.2e+18)
_BIG_EXPONENT = re.compile(rb"[0-9]e\+(?:1[89]|[2-9][0-9]|[0-9]{3})")


def has_canonical_digest(data: bytes, digest: str) -> bool:
    """True when the JSON document ``data`` is, once canonical, the bytes of ``digest``
    (a pin's digest: that of canonical bytes).

    orjson parses and writes it with sorted keys (~4x less CPU than :func:`loads_bounded`
    + :func:`canonical_json`). A match proves it: orjson writes every value faithfully, so
    bytes equal to a canonical text (the digest's) hold its value, whose canonical form is
    that text. orjson reads an integer literal past 64 bits as a float, which writes as
    ``...e+18`` or larger: such a document is never proven here. False means "not proven"
    (a different document, or one orjson writes otherwise: ``1e-05``), never "different"."""
    oj = _orjson()
    if oj is None:
        return False
    try:
        out = oj.dumps(oj.loads(data), option=oj.OPT_SORT_KEYS)
    except (oj.JSONDecodeError, oj.JSONEncodeError):
        return False  # invalid, or nested past orjson's bound (no pinned cassette is)
    if b"e+" in out and _BIG_EXPONENT.search(out):
        return False
    return "sha256:" + hashlib.sha256(out).hexdigest() == digest


def parse_digest(digest: str) -> str:
    """Return the 64-hex part of a ``sha256:<hex>`` digest, or raise."""
    if not isinstance(digest, str) or not DIGEST_RE.match(digest):
        raise IntegrityError(f"not a sha256 digest: {digest!r}")
    return digest[7:]


def _depth_ok(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Cheap pre-check: a text with fewer brackets than ``limit`` cannot nest deeper."""
    return text.count("[") + text.count("{") <= limit


def _parsed_depth_ok(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Depth check of parsed JSON, level by level: no recursion, one pass over containers."""
    level = [value]
    depth = 1
    while level:
        if depth > limit:
            return False
        below = []
        for node in level:
            for child in node.values() if type(node) is dict else node:
                if type(child) is dict or type(child) is list:
                    below.append(child)
        level = below
        depth += 1
    return True


_BIG = float(1 << 63)


_TINY = 1e-4  # below this magnitude repr (so json) writes 1e-05 and orjson 0.00001


def _fast_value_check(value: Any, limit: int) -> tuple[bool | None, bool]:
    """:func:`_fast_value_ok`'s answer, and whether every float in ``value`` is *plain*: 0.0,
    or of magnitude 1e-4 or more (below 2**63), which orjson writes as json does."""
    plain = True
    level = [value] if type(value) is dict or type(value) is list else []
    if type(value) is float:
        if not -_BIG < value < _BIG:
            return None, False
        plain = not (-_TINY < value < _TINY) or not value
    depth = 1
    dict_, list_, float_ = dict, list, float  # locals: ~3% fewer instructions a node
    while level:
        if depth > limit:
            return False, plain
        below: list[Any] = []
        push = below.append
        for node in level:
            for child in node.values() if type(node) is dict_ else node:
                t = type(child)
                if t is dict_ or t is list_:
                    push(child)
                elif t is float_:
                    if not -_BIG < child < _BIG:
                        return None, False
                    if -_TINY < child < _TINY and child:
                        plain = False
        level = below
        depth += 1
    return True, plain


_PAUSE_GC = 1 << 20  # documents this large are parsed with the collector paused


@contextlib.contextmanager
def collector_paused(size: int) -> Iterator[None]:
    """Pause the garbage collector while a document of ``size`` bytes (1 MiB or more) is
    parsed: its passes over the half-built value are a third of a large parse's time, and
    parsing makes nothing it could free (the value is acyclic)."""
    pause = size >= _PAUSE_GC and gc.isenabled()
    if pause:
        gc.disable()
    try:
        yield
    finally:
        if pause:
            gc.enable()


def _fast_loads(data: bytes | bytearray, limit: int) -> tuple[Any, bool]:
    """``orjson.loads`` of ``data`` when it gives what json would (~2x faster, no str copy
    of the text), and whether orjson writes the value as canonical JSON
    (:func:`_fast_value_check`). ``INVALID`` when orjson refuses it (invalid UTF-8 or JSON,
    NaN, infinities, lone surrogates, nesting past 1024: json decides, and gives the
    message); ``SLOW`` when json must parse it; ``DEEP`` when it nests deeper than ``limit``."""
    oj = _orjson()
    if oj is None:
        return INVALID, False
    try:
        value = oj.loads(data)
    except oj.JSONDecodeError:
        return INVALID, False
    ok, plain = _fast_value_check(value, limit)
    return (SLOW if ok is None else value if ok else DEEP), plain


def loads_bounded(data: bytes | str, what: str = "JSON") -> Any:
    """``json.loads`` that refuses invalid UTF-8, nesting deeper than 200 and NaN.

    Raises :class:`ValueError` with a message naming ``what``; callers convert it to
    their own error class. Bytes are parsed by orjson when it is installed and gives the
    same value (:func:`_fast_loads`); the json module otherwise.
    """
    return _loads(data, what)[0]


def loads_canonical(data: bytes | str, what: str = "JSON") -> tuple[Any, Callable[[Any], bytes]]:
    """:func:`loads_bounded`, and what writes that value (or one made of its parts) as
    canonical JSON: orjson with sorted keys (~4x less CPU than :func:`canonical_json`) when
    orjson parsed the text and every float in it is plain (:func:`_fast_value_check`),
    else :func:`canonical_json`. Both give the same bytes for such a value: orjson's strings,
    integers, key order and plain floats are json's (checked once per process on a probe,
    :func:`_orjson_writes_canonical`; tests/reliability/test_fuzz_parsers.py compares both on generated
    values); a value orjson cannot write (an integer past 64 bits) falls back."""
    value, plain = _loads(data, what)
    return value, (_orjson_canonical if plain and _orjson_writes_canonical() else canonical_json)


def _orjson_canonical(value: Any) -> bytes:
    oj = _orjson()  # not None: _orjson_writes_canonical() said so
    try:
        out: bytes = oj.dumps(value, option=oj.OPT_SORT_KEYS)
        return out
    except oj.JSONEncodeError:
        return canonical_json(value)


# what orjson must write as canonical_json does before it writes canonical bytes: plain
# floats at the edges of the range, both zeros, 64-bit integers, every kind of escape, keys
# that sort differently by UTF-16 and by code point
_PROBE: Any = {
    "floats": [0.0, -0.0, 1e-4, -1e-4, 0.1, 1.5, -2.5e-3, 123.456, 1e15, 9999999999999998.0, 1e16, 1.5e300,
               1.7976931348623157e308, 9.2e18, 0.30000000000000004],
    "ints": [0, -1, 2**53 + 1, 2**63 - 1, -2**63, 2**64 - 1],
    "other": [True, False, None, "", [], {}],
    "".join(map(chr, range(0x20))) + '"\\/\x7f\x80\u2028\u2029\ufeff\uffff\U0001f600é': "\U00010000\ue000",
    "\uffff": 1, "\U0001f600": 2, "\ue000": 3, "Z": 4, "a": {"b": 1, "A": [{"y": 1, "x": 2}]},
}


@functools.cache
def _orjson_writes_canonical() -> bool:
    """Whether this orjson writes :data:`_PROBE` byte for byte as :func:`canonical_json` does."""
    oj = _orjson()
    if oj is None:
        return False
    try:
        return bool(oj.dumps(_PROBE, option=oj.OPT_SORT_KEYS) == canonical_json(_PROBE))
    except (oj.JSONEncodeError, IntegrityError):
        return False


def _loads(data: bytes | str, what: str) -> tuple[Any, bool]:
    """:func:`loads_bounded`, and whether orjson parsed it and every float is plain."""
    too_deep = f"{what} is nested deeper than {MAX_JSON_DEPTH} levels"
    if isinstance(data, bytes):
        if len(data) < _PAUSE_GC:  # what collector_paused does for a small document: nothing
            value, plain = _fast_loads(data, MAX_JSON_DEPTH)
        else:
            with collector_paused(len(data)):
                value, plain = _fast_loads(data, MAX_JSON_DEPTH)
        if value is DEEP:
            raise ValueError(too_deep)
        if value is not SLOW and value is not INVALID:
            return value, plain
    return _loads_json(data, what, too_deep), False


def _loads_json(data: bytes | str, what: str, too_deep: str) -> Any:
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{what} is not valid UTF-8 (byte {exc.start})") from None

    def _no_const(name: str) -> Any:
        raise ValueError(f"{what} contains {name}, which JSON does not allow")

    try:
        # CPython's JSON decoder guards its own recursion (RecursionError, never a crash);
        # the depth bound that protects the recursive code after it is checked once parsed
        value = json.loads(data, parse_constant=_no_const)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ValueError(too_deep) from None
    if not _depth_ok(data) and isinstance(value, (dict, list)) and not _parsed_depth_ok(value):
        raise ValueError(too_deep)
    return value
