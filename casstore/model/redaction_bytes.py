"""Bodies stored as base64, as redaction reads them (pure): the content-encoding undone, the
bytes read as UTF-8 or byte for byte, and a redacted body encoded again the same way."""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Mapping
from typing import Any

__all__ = ["b64_decode", "b64_encode", "content_encoding", "decode", "encode",
           "bytes_to_text", "text_to_bytes"]


def b64_decode(value: str) -> bytes | None:
    try:
        return base64.b64decode(value, validate=True)
    except (ValueError, binascii.Error):
        return None


def b64_encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def content_encoding(record: Mapping[str, Any]) -> str:
    """The ``content-encoding`` header of a request or response record ("" when none)."""
    headers = record.get("headers")
    if not isinstance(headers, Mapping):
        return ""
    for k, v in headers.items():
        if isinstance(k, str) and k.lower() == "content-encoding":
            return ", ".join(map(str, v)) if isinstance(v, list) else str(v)
    return ""


def decode(raw: bytes, coding: str) -> bytes | None:
    """``raw`` with ``coding`` undone; None when casstore cannot undo it."""
    if not coding.strip():
        return raw
    from .recording import decode_content  # lazy: the scan of `status`/`check` loads less

    return decode_content(raw, coding)


def encode(data: bytes, coding: str) -> bytes | None:
    """``data`` encoded again with ``coding`` (the codings listed in order); None when it cannot be."""
    codings = [c.strip().lower() for c in coding.split(",") if c.strip()]
    try:
        for c in codings:
            if c == "identity":
                continue
            if c in ("gzip", "x-gzip"):
                import gzip  # only to encode again (recording): the hook's scan never does

                data = gzip.compress(data, mtime=0)
            elif c == "deflate":
                data = zlib.compress(data)
            elif c == "zstd":
                import zstandard

                data = zstandard.ZstdCompressor().compress(data)
            elif c == "br":
                import brotli

                data = brotli.compress(data)
            else:
                return None
    except ImportError:
        return None
    return data


def bytes_to_text(data: bytes) -> tuple[str, bool]:
    """(text, is_utf8): UTF-8 text, or the bytes one character each (latin-1) for binary."""
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("latin-1"), False


def text_to_bytes(text: str, is_utf8: bool) -> bytes:
    if is_utf8:
        return text.encode("utf-8")
    # a placeholder outside latin-1 (a custom [redaction] placeholder) is written as UTF-8
    return b"".join(ch.encode("latin-1") if ord(ch) < 256 else ch.encode("utf-8") for ch in text) \
        if any(ord(ch) > 255 for ch in text) else text.encode("latin-1")
