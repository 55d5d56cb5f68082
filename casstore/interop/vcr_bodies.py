"""Bodies of vcrpy interactions in every layout seen in the wild (vcrpy's, Ruby VCR's, aiohttp
mappings, ``parsed_body``); anything else is refused, naming its key, never read as "no body"."""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

__all__ = ["Body", "LayoutError", "request_body", "response_body", "check_keys", "REQUEST_KEYS", "RESPONSE_KEYS"]

# keys an interaction's request / response may carry besides its body (vcrpy 1.0+,
# vcrpy before 1.0, Ruby VCR, the old httpx layout, tornado's url)
REQUEST_KEYS = frozenset({"method", "uri", "url", "headers", "body", "parsed_body", "protocol", "host", "port", "path"})
RESPONSE_KEYS = frozenset(
    {"status", "status_code", "headers", "body", "parsed_body", "content", "url", "http_version", "adapter_metadata"}
)
_BODY_KEYS = frozenset({"string", "base64_string", "base64", "encoding"})


class LayoutError(Exception):
    """A body casstore cannot read. ``key`` is the dotted key it sits under (for its line)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass(frozen=True)
class Body:
    """A body as bytes (``None``: no body); ``parsed``: the file held a JSON value (``data``
    is the JSON a replay serves); ``content_type``: what the client sends with a mapping."""

    data: bytes | None
    parsed: bool = False
    content_type: str | None = None


def check_keys(part: str, mapping: Mapping[str, Any], known: frozenset[str]) -> None:
    """Refuse a key no layout uses: it may hold the body, and reading past it would lose it."""
    for key in mapping:
        if key not in known and mapping[key] not in (None, "", {}, []):
            readable = "'body' or 'parsed_body'"
            raise LayoutError(
                f"{part}.{key}",
                f"unknown key; casstore reads the body from {readable} only, so importing this "
                "interaction could lose its body (convert the file with the serializer that wrote it, "
                "or remove the key if it holds no body)",
            )


def _json_bytes(value: Any, key: str, *, canonical: bool) -> bytes:
    """The JSON text of a parsed body: vcrpy-style (``json.dumps``) or canonical (sorted, compact)."""
    try:
        if canonical:
            text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        else:
            text = json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise LayoutError(key, f"not a JSON value ({exc})") from None
    except RecursionError:
        raise LayoutError(key, "nested too deeply") from None
    return text.encode("utf-8")


def _text_bytes(value: Any, key: str) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            raise LayoutError(key, "not valid Unicode text") from None
    if isinstance(value, list):  # an iterator body, serialized as its items
        return b"".join(_text_bytes(v, key) or b"" for v in value)
    if isinstance(value, bool) or isinstance(value, (int, float)):
        raise LayoutError(key, f"expected text or bytes, got a {type(value).__name__} ({value!r})")
    raise LayoutError(key, f"expected text or bytes, got {type(value).__name__}")


def _base64(value: Any, key: str) -> bytes:
    try:
        text = value if isinstance(value, str) else bytes(value).decode("ascii")
        return base64.b64decode("".join(text.split()).encode("ascii"), validate=True)
    except (binascii.Error, ValueError, TypeError, UnicodeError):
        raise LayoutError(key, "not valid base64") from None


def _layout_mapping(value: Mapping[str, Any], key: str) -> bytes | None:
    """``{string: ...}``, ``{base64_string: ...}`` (Ruby VCR), ``{base64: ...}``, each with an
    optional ``encoding`` (Ruby's charset name, informative only)."""
    if "base64_string" in value:
        return _base64(value["base64_string"], key + ".base64_string")
    if "base64" in value:
        return _base64(value["base64"], key + ".base64")
    if "string" in value:
        return _text_bytes(value["string"], key + ".string")
    return None  # {} or {encoding: ...}: no body


def _same_json(data: bytes, value: Any) -> bool:
    try:
        return bool(json.loads(data.decode("utf-8")) == value)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False


def _parsed(part: str, container: Mapping[str, Any], exact: bytes | None, *, canonical: bool) -> Body | None:
    value = container.get("parsed_body")
    if value is None:
        return None
    if exact:  # the bytes are there too: keep them when they say the same thing
        if _same_json(exact, value):
            return Body(exact)
        raise LayoutError(f"{part}.parsed_body", "differs from the 'body' next to it; casstore cannot tell which one was sent")
    if isinstance(value, float) and not math.isfinite(value):
        raise LayoutError(f"{part}.parsed_body", "not a JSON value")
    return Body(_json_bytes(value, f"{part}.parsed_body", canonical=canonical), parsed=True)


def request_body(request: Mapping[str, Any], sent_type: str) -> Body:
    """The bytes a client sent, from any request layout (raises :class:`LayoutError`);
    ``sent_type``: the request's content-type header, "" when it has none."""
    check_keys("request", request, REQUEST_KEYS)
    raw = request.get("body")
    exact: bytes | None
    content_type: str | None = None
    if isinstance(raw, Mapping):
        if raw and set(raw) <= _BODY_KEYS:
            exact = _layout_mapping(raw, "request.body")
        elif raw:
            # vcrpy's aiohttp stub records json=/data= as given; aiohttp sends JSON for
            # json= (and sets the content type after vcrpy looked), a form for data=.
            if "x-www-form-urlencoded" in sent_type.lower():
                exact = urlencode([(str(k), v) for k, v in raw.items()], doseq=True).encode("utf-8")
            else:
                exact = _json_bytes(dict(raw), "request.body", canonical=False)
                if not sent_type:
                    content_type = "application/json"
        else:
            exact = None
    else:
        exact = _text_bytes(raw, "request.body")
    parsed = _parsed("request", request, exact, canonical=False)
    if parsed is not None:
        return parsed
    return Body(exact, content_type=content_type)


def response_body(response: Mapping[str, Any]) -> Body:
    """The bytes a client received (still content-encoded when the file kept them so)."""
    check_keys("response", response, RESPONSE_KEYS)
    raw = response["content"] if "content" in response and "body" not in response else response.get("body")
    key = "response.content" if "content" in response and "body" not in response else "response.body"
    exact: bytes | None
    if isinstance(raw, Mapping):
        unknown = sorted(str(k) for k in raw if k not in _BODY_KEYS)
        if unknown:
            raise LayoutError(
                f"{key}.{unknown[0]}",
                f"unknown body key(s) {unknown}; casstore reads 'string', 'base64_string' or 'base64' "
                "(or a parsed JSON 'parsed_body' next to 'body')",
            )
        exact = _layout_mapping(raw, key)
    else:
        exact = _text_bytes(raw, key)
    parsed = _parsed("response", response, exact, canonical=True)
    return parsed if parsed is not None else Body(exact)
