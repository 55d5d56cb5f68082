"""What the importers share: entries built as the replay library records them (identity of
the un-redacted request), the cassette builder (redaction afterwards), small helpers."""

from __future__ import annotations

import importlib.util
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import CassetteFormatError
from ..model.cassette import Cassette, make_entry
from ..model.identity import http_identity, jsonable, tool_identity
from ..model.names import validate_name
from ..model.numerals import parse_time
from ..model.recording import decode_content, encode_request, encode_response
from ..model.redaction import RuleSet
from ..model.scrub import assemble
from ..project import Project

__all__ = [
    "response_record",
    "http_entry",
    "tool_entry",
    "iso_timestamp",
    "file_mtime",
    "format_error",
    "name_from_path",
    "display_path",
    "build_cassette",
]

# Content codings whose failure to decode means "the body is already decoded" (vcrpy's
# requests and aiohttp stubs store the decoded body but keep the content-encoding header);
# br only when brotli is installed (else it cannot be tried: the bytes are kept as they are).
_CHECKABLE_CODINGS = frozenset({"gzip", "x-gzip", "deflate", "identity", "zstd"}) | (
    frozenset({"br"}) if importlib.util.find_spec("brotli") is not None else frozenset()
)


# -- entries, exactly as the replay library writes them --------------------------------------


def response_record(status: int, headers: Iterable[tuple[str, str]], raw: bytes, *,
                    decoded: bool = False) -> dict[str, Any]:
    """The response record a live capture writes for ``raw`` (decoded; one that does not decode
    under a coding we can check, or ``decoded``, was decoded already; an unknown coding is kept)."""
    items = [(str(k), str(v)) for k, v in headers]
    if decoded:
        return encode_response(status, items, raw, decoded=True)
    codings = [
        c.strip().lower()
        for k, v in items
        if k.lower() == "content-encoding"
        for c in v.split(",")
        if c.strip()
    ]
    if codings and decode_content(raw, ", ".join(codings)) is None and set(codings) <= _CHECKABLE_CODINGS:
        return encode_response(status, items, raw, decoded=True)
    return encode_response(status, items, raw)


def http_entry(
    method: str,
    url: str,
    headers: Iterable[tuple[str, str]],
    body: bytes | str | None,
    response: dict[str, Any],
    *,
    recorded_at: str | None = None,
) -> dict[str, Any]:
    """A format-v1 entry for one HTTP call, built by the same steps as a recording session."""
    items = [(str(k).lower(), str(v)) for k, v in headers]
    ident = http_identity(method, url, items, body)
    return make_entry(ident, encode_request(method, url, items, body), response, recorded_at=recorded_at)


def tool_entry(name: str, args: Sequence[Any], kwargs: Mapping[str, Any],
               response: dict[str, Any]) -> dict[str, Any]:
    """A format-v1 entry for one tool call, as ``casstore.tool()`` records it."""
    ident = tool_identity(name, args, kwargs)
    request = {"args": jsonable(list(args)), "kwargs": jsonable(dict(kwargs))}
    return make_entry(ident, request, response)


# -- small helpers ---------------------------------------------------------------------------


def iso_timestamp(value: Any) -> str | None:
    """``YYYY-MM-DDTHH:MM:SSZ`` (UTC) from an ISO string, an RFC 2822 date or epoch seconds/ms;
    ``None`` when ``value`` is empty or not a time."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = value / 1000.0 if value > 1e11 else float(value)  # above 1e11: milliseconds
        try:
            dt = datetime.fromtimestamp(seconds, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    elif (parsed := parse_time(value)) is not None:
        dt = parsed
    else:
        return None
    try:
        return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except OverflowError:  # "0001-01-01T00:00:00+01:00": a date, but before year 1 in UTC
        return None


def name_from_path(path: Path, base: Path | None = None) -> str:
    """Cassette name for an imported file: its stem, or its path below ``base`` without
    suffix (``test_mod/test_x[p].yaml`` → ``test_mod/test_x-p``, as the pytest plugin names it)."""
    rel = path.relative_to(base) if base is not None else Path(path.name)
    parts = list(rel.parts)
    parts[-1] = Path(parts[-1]).stem
    cleaned = [re.sub(r"[^A-Za-z0-9_.\-]+", "-", p).strip("-.") or "x" for p in parts]
    return validate_name("/".join(cleaned))


def file_mtime(path: Path) -> str | None:
    try:
        return iso_timestamp(os.stat(path).st_mtime)
    except OSError:
        return None


def format_error(source: str, line: int | None, message: str) -> CassetteFormatError:
    """``file:line: message`` — the one line a user sees for a malformed input."""
    where = f"{source}:{line}" if line else source
    return CassetteFormatError(f"{where}: {message}")


def display_path(project: Project, path: Path) -> str:
    """``path`` relative to the project root for messages (its name when outside)."""
    try:
        return path.resolve().relative_to(project.root.resolve()).as_posix()
    except ValueError:
        return path.name


# -- the cassette ------------------------------------------------------------------------------


def build_cassette(
    name: str,
    entries: Sequence[dict[str, Any]],
    *,
    recorder: str,
    source: str,
    redaction_config: Mapping[str, Any] | None,
    recorded_at: str | None = None,
) -> Cassette:
    """Redact ``entries`` (request and response, as a recording session does) and wrap them
    in a validated format-v1 cassette. Identities were computed before redaction."""
    stamps = [e["recorded_at"] for e in entries if isinstance(e.get("recorded_at"), str)]
    meta: dict[str, Any] = {
        "recorded_at": max(stamps) if stamps else (recorded_at or iso_timestamp(time.time())),
        "recorder": f"{recorder} (imported by casstore/{__version__})",
        "imported_from": source,
        "git": {},
    }
    cassette = assemble(name, (), entries, RuleSet.from_config(dict(redaction_config or {})), meta)
    # the model's own validation and canonical form, before anything is written
    Cassette.from_dict(cassette.to_dict(), source=f"imported cassette {name!r}")
    cassette.canonical_bytes()
    return cassette
