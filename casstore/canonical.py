"""Canonical JSON and digests (pure, no I/O).

Canonical JSON is UTF-8, keys sorted, no insignificant whitespace, no NaN/Infinity.
It is what gets hashed, so two equal values always give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from .errors import IntegrityError

__all__ = ["canonical_json", "sha256_digest", "parse_digest", "DIGEST_RE", "loads_bounded"]

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
MAX_JSON_DEPTH = 200


def canonical_json(value: Any) -> bytes:
    """Serialize ``value`` to canonical JSON bytes."""
    try:
        return json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode("utf-8")
    except (ValueError, TypeError, RecursionError) as exc:
        raise IntegrityError(f"value cannot be written as canonical JSON: {exc}") from exc


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def parse_digest(digest: str) -> str:
    """Return the 64-hex part of a ``sha256:<hex>`` digest, or raise."""
    if not isinstance(digest, str) or not DIGEST_RE.match(digest):
        raise IntegrityError(f"not a sha256 digest: {digest!r}")
    return digest[7:]


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _depth_ok(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Cheap pre-scan so deeply nested JSON is refused before any parser recurses.

    Strings are blanked out and everything but brackets dropped with two C-speed regex
    passes; only the brackets are walked in Python.
    """
    if text.count("[") + text.count("{") <= limit:
        return True
    depth = 0
    for ch in _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)):
        if ch in "[{":
            depth += 1
            if depth > limit:
                return False
        else:
            depth -= 1
    return True


def loads_bounded(data: bytes | str, what: str = "JSON") -> Any:
    """``json.loads`` that refuses invalid UTF-8, nesting deeper than 200 and NaN.

    Raises :class:`ValueError` with a message naming ``what``; callers convert it to
    their own error class.
    """
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{what} is not valid UTF-8 (byte {exc.start})") from None
    if not _depth_ok(data):
        raise ValueError(f"{what} is nested deeper than {MAX_JSON_DEPTH} levels")

    def _no_const(name: str) -> Any:
        raise ValueError(f"{what} contains {name}, which JSON does not allow")

    try:
        return json.loads(data, parse_constant=_no_const)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply") from None
