"""Canonical JSON (UTF-8, keys sorted, no insignificant whitespace, no NaN: what gets hashed,
so two equal values give the same bytes) and digests (pure)."""

from __future__ import annotations

import gc
import hashlib
import json
import re
from typing import Any

from ..errors import IntegrityError

__all__ = ["canonical_json", "sha256_digest", "parse_digest", "DIGEST_RE", "loads_bounded"]

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}\Z")  # \Z: "$" would take a trailing newline
MAX_JSON_DEPTH = 200

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


def parse_digest(digest: str) -> str:
    """Return the 64-hex part of a ``sha256:<hex>`` digest, or raise."""
    if not isinstance(digest, str) or not DIGEST_RE.match(digest):
        raise IntegrityError(f"not a sha256 digest: {digest!r}")
    return digest[7:]


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


def loads_bounded(data: bytes | str, what: str = "JSON") -> Any:
    """``json.loads`` that refuses invalid UTF-8, nesting deeper than 200 and NaN, with a
    ValueError naming ``what`` (callers convert it to their own error class)."""
    too_deep = f"{what} is nested deeper than {MAX_JSON_DEPTH} levels"
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{what} is not valid UTF-8 (byte {exc.start})") from None

    def _no_const(name: str) -> Any:
        raise ValueError(f"{what} contains {name}, which JSON does not allow")

    # the collector paused over a large parse (1 MiB or more): parsing makes nothing it could
    # free, and its passes over the half-built value are much of a large parse's time
    pause = len(data) >= 1 << 20 and gc.isenabled()
    if pause:
        gc.disable()
    try:
        # CPython's JSON decoder guards its own recursion (RecursionError, never a crash);
        # the depth bound that protects the recursive code after it is checked once parsed
        value = json.loads(data, parse_constant=_no_const)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ValueError(too_deep) from None
    finally:
        if pause:
            gc.enable()
    deep = data.count("[") + data.count("{") > MAX_JSON_DEPTH  # fewer brackets cannot nest deeper
    if deep and isinstance(value, (dict, list)) and not _parsed_depth_ok(value):
        raise ValueError(too_deep)
    return value
