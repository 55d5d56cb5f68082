"""Canonical JSON and digests (pure, no I/O).

Canonical JSON is UTF-8, keys sorted, no insignificant whitespace, no NaN/Infinity.
It is what gets hashed, so two equal values always give the same bytes.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any

from ..errors import IntegrityError

__all__ = ["canonical_json", "sha256_digest", "parse_digest", "DIGEST_RE", "loads_bounded", "fast_loads",
           "collector_paused", "has_canonical_digest"]

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
MAX_JSON_DEPTH = 200
# what fast_loads answers instead of a value
INVALID = object()  # orjson refused the text
SLOW = object()  # orjson read it, but json must (an integer past 64 bits)
DEEP = object()  # nested deeper than the bound

_orjson: Any
try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - a dependency; json alone gives the same values
    _orjson = None


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
    if _orjson is None:
        return False
    try:
        out = _orjson.dumps(_orjson.loads(data), option=_orjson.OPT_SORT_KEYS)
    except (_orjson.JSONDecodeError, _orjson.JSONEncodeError):
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


def _fast_value_ok(value: Any, limit: int = MAX_JSON_DEPTH) -> bool | None:
    """:func:`_parsed_depth_ok` of a value orjson parsed; ``None`` when it holds a float of
    magnitude 2**63 or more: orjson reads an integer literal beyond 64 bits as such a float
    (json as an int), so that document is parsed again by json."""
    level = [value] if type(value) is dict or type(value) is list else []
    if type(value) is float and not -_BIG < value < _BIG:
        return None
    depth = 1
    while level:
        if depth > limit:
            return False
        below: list[Any] = []
        push = below.append
        for node in level:
            for child in node.values() if type(node) is dict else node:
                t = type(child)
                if t is str:
                    continue
                if t is dict or t is list:
                    push(child)
                elif t is float and not -_BIG < child < _BIG:
                    return None
        level = below
        depth += 1
    return True


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


def fast_loads(data: bytes | bytearray, limit: int = MAX_JSON_DEPTH) -> Any:
    """``orjson.loads`` of ``data`` when it gives what json would: ~2x faster, no str copy
    of the text. ``INVALID`` when orjson refuses it (invalid UTF-8 or JSON, NaN,
    infinities, lone surrogates, nesting past 1024: json decides, and gives the message);
    ``SLOW`` when json must parse it (:func:`_fast_value_ok`); ``DEEP`` when it nests
    deeper than ``limit``."""
    if _orjson is None:
        return INVALID
    try:
        value = _orjson.loads(data)
    except _orjson.JSONDecodeError:
        return INVALID
    ok = _fast_value_ok(value, limit)
    return SLOW if ok is None else value if ok else DEEP


def loads_bounded(data: bytes | str, what: str = "JSON") -> Any:
    """``json.loads`` that refuses invalid UTF-8, nesting deeper than 200 and NaN.

    Raises :class:`ValueError` with a message naming ``what``; callers convert it to
    their own error class. Bytes are parsed by orjson when it is installed and gives the
    same value (:func:`fast_loads`); the json module otherwise.
    """
    too_deep = f"{what} is nested deeper than {MAX_JSON_DEPTH} levels"
    if isinstance(data, bytes):
        with collector_paused(len(data)):
            value = fast_loads(data)
        if value is DEEP:
            raise ValueError(too_deep)
        if value is not SLOW and value is not INVALID:
            return value
    return _loads_json(data, what, too_deep)


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
