"""JSON values as identities see them (pure): canonical numbers, a JSON form of any Python
value, and the codec that parses a request body with its numbers already canonical."""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import math
import pathlib
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

from .canonical import canonical_json

_orjson: Any
try:  # the same canonical bytes, written ~5x faster (see _dumps_checked)
    import orjson as _orjson
except ImportError:  # pragma: no cover - a dependency, but casstore works without it
    _orjson = None

__all__ = ["canonical_value", "jsonable", "parse_body"]


def canonical_value(value: Any) -> Any:
    """Deep copy of a JSON-like value with numbers canonicalized: integral floats become
    ints (``-0.0 -> 0``), non-finite floats the strings ``"NaN"``, ``"Infinity"``,
    ``"-Infinity"``; tuples become lists."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if value.is_integer():
            return int(value)
        return value
    if isinstance(value, Mapping):
        return {str(k): canonical_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical_value(v) for v in value]
    return jsonable(value)


def jsonable(value: Any) -> Any:
    """A JSON-compatible rendering of an arbitrary Python value (tool args and results):
    dataclasses and pydantic models become dicts, sets sorted lists, bytes ``{"base64": ...}``,
    anything else ``{"repr": type name}`` (never its repr, which may hold memory addresses)."""
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [jsonable(v) for v in value]
        return sorted(items, key=lambda v: canonical_json(canonical_value(v)))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    dump = getattr(value, "model_dump", None)  # pydantic v2
    if callable(dump):
        try:
            return jsonable(dump(mode="json"))
        except Exception:  # noqa: BLE001 - fall through to the generic forms
            pass
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    isoformat = getattr(value, "isoformat", None)  # datetime, date, time
    if callable(isoformat):
        return isoformat()
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, pathlib.PurePath):
        return value.as_posix()
    return {"repr": f"{type(value).__module__}.{type(value).__qualname__}"}


# -- the canonical body codec ---------------------------------------------------------


class _NotOrjsonSafe(Exception):
    """A parsed float orjson would write differently from ``repr`` (never escapes this module)."""


_CHECKED_FLOATS: dict[str, Any] = {}  # number text -> its canonical value, checked (bounded)


def _canonical_float_checked(text: str) -> Any:
    """A JSON number with a fraction or exponent as :func:`canonical_value` renders it, refusing
    a float whose orjson form is not its ``repr`` (orjson writes ``1e-5``, json ``1e-05``)."""
    value = _CHECKED_FLOATS.get(text)
    if value is not None:  # the same few settings (temperature, top_p) in every request
        return value
    value = canonical_value(float(text))
    if type(value) is float and _orjson is not None and _orjson.dumps(value) != repr(value).encode("ascii"):
        raise _NotOrjsonSafe
    if len(_CHECKED_FLOATS) < 4096:
        _CHECKED_FLOATS[text] = value
    return value


_CANONICAL_CONSTANTS = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity"}


def _canonical_loads(parse_float: Callable[[str], Any]) -> Callable[[str], Any]:
    decoder = json.JSONDecoder(parse_float=parse_float, parse_constant=_CANONICAL_CONSTANTS.__getitem__)

    def loads(text: str) -> Any:
        """``canonical_value(json.loads(text))`` in one pass: numbers canonicalized while parsing."""
        if text.startswith("\ufeff"):  # what json.loads refuses
            raise ValueError("Unexpected UTF-8 BOM")
        return decoder.decode(text)

    return loads


def _dumps_checked(value: Any) -> bytes:
    """:func:`canonical_json` of a value parsed by :data:`_FAST`, with orjson: it sorts and
    escapes alike, and what it cannot write the same way (integers beyond 64 bits, nesting
    deeper than 255, lone surrogates) it refuses, and the standard path writes it."""
    try:
        data: bytes = _orjson.dumps(value, option=_orjson.OPT_SORT_KEYS)
        return data
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return canonical_json(value)


# (loads, dumps) of the identity form without a normalizer: numbers canonical as parsed.
_Codec = tuple[Callable[[str], Any], Callable[[Any], bytes]]
_PLAIN: _Codec = (_canonical_loads(lambda text: canonical_value(float(text))), canonical_json)
_FAST: _Codec | None = (_canonical_loads(_canonical_float_checked), _dumps_checked) if _orjson is not None else None


# -- bodies (identity documents and entry records classify a body alike) ---------------


def _as_bytes(body: bytes | str | None) -> bytes:
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")
    return bytes(body)


def parse_body(body: bytes | str | None, content_type: str) -> tuple[str, Any]:
    """Classify a body: ``("empty", None)``, ``("json", value)``, ``("form", pairs)``,
    ``("text", str)`` or ``("bytes", raw)``; JSON by its content type, or by content when
    there is none."""
    return _parse_body(body, content_type, json.loads)


def _parse_body(body: bytes | str | None, content_type: str, loads: Callable[[str], Any]) -> tuple[str, Any]:
    raw = _as_bytes(body)
    if not raw:
        return "empty", None
    ct = content_type.lower()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes", raw
    looks_json = "json" in ct or (not ct and text.lstrip()[:1] in ("{", "["))
    if looks_json:
        try:
            return "json", loads(text)
        except (ValueError, RecursionError):
            pass
    if "application/x-www-form-urlencoded" in ct:
        return "form", sorted(parse_qsl(text, keep_blank_values=True))
    return "text", text
