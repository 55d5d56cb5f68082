"""Cassette format v1: the model, validation, canonical bytes (what the store hashes and
pins) and the working-copy file."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import CassetteFormatError, InvalidName
from .canonical import canonical_json, loads_bounded
from .fsutil import atomic_write
from .names import validate_name

if TYPE_CHECKING:
    from .identity import CallIdentity

__all__ = [
    "FORMAT_V1", "Cassette", "load_bytes", "load_file", "read_file", "MAX_CASSETTE_BYTES", "make_entry", "models_used",
]

FORMAT_V1 = "casstore.cassette/v1"
MAX_CASSETTE_BYTES = 2 * 1024 * 1024 * 1024  # a hard safety cap; hygiene.max_cassette_bytes is the policy
_HEX64 = re.compile(r"^[0-9a-f]{64}\Z")


@dataclass(frozen=True)
class Cassette:
    name: str
    entries: tuple[dict[str, Any], ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    redaction: dict[str, Any] = field(default_factory=lambda: {"rules": [], "hits": {}})
    extra: dict[str, Any] = field(default_factory=dict)

    # -- model ---------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Any, *, source: str = "cassette") -> Cassette:
        problems: list[str] = []
        if not isinstance(data, dict):
            raise CassetteFormatError(f"{source}: a cassette is a JSON object, got {type(data).__name__}")
        fmt = data.get("format")
        if fmt != FORMAT_V1:
            problems.append(f"'format' must be {FORMAT_V1!r}, got {fmt!r}")
        name = data.get("name")
        try:
            validate_name(name)
        except InvalidName as exc:
            problems.append(f"'name': {exc}")
        meta = data.get("meta", {})
        if not isinstance(meta, dict):
            problems.append("'meta' must be an object")
            meta = {}
        redaction = data.get("redaction", {"rules": [], "hits": {}})
        if not isinstance(redaction, dict):
            problems.append("'redaction' must be an object")
            redaction = {"rules": [], "hits": {}}
        entries = data.get("entries")
        if not isinstance(entries, list):
            problems.append("'entries' must be a list")
            entries = []
        for i, entry in enumerate(entries):
            where = f"'entries[{i}]"
            if not isinstance(entry, dict):
                problems.append(f"{where}' must be an object")
                continue
            ident = entry.get("identity")
            if not isinstance(ident, str) or not _HEX64.match(ident):
                problems.append(f"{where}.identity' must be 64 lowercase hex characters")
            if not isinstance(entry.get("kind"), str):
                problems.append(f"{where}.kind' must be a string")
            for key in ("request", "response"):
                if key not in entry:
                    problems.append(f"{where}.{key}' is missing")
            seq = entry.get("seq", i)
            if not isinstance(seq, int) or isinstance(seq, bool):
                problems.append(f"{where}.seq' must be an integer")
        if problems:
            raise CassetteFormatError(f"{source} is not a valid {FORMAT_V1} cassette: " + "; ".join(problems))
        known = {"format", "name", "meta", "entries", "redaction"}
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(name=str(name), entries=tuple(entries), meta=meta, redaction=redaction, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        return {**self.extra, "format": FORMAT_V1, "name": self.name, "meta": self.meta,
                "entries": list(self.entries), "redaction": self.redaction}

    def canonical_bytes(self) -> bytes:
        try:
            return canonical_json(self.to_dict())
        except Exception as exc:  # IntegrityError from canonical_json
            raise CassetteFormatError(f"cassette {self.name!r} cannot be canonicalized: {exc}") from exc

    # -- summaries used by the lock ---------------------------------------------
    def models(self) -> list[str]:
        return models_used(self.entries, self.meta.get("models"))

    def recorded_range(self) -> tuple[str | None, str | None]:
        stamps = [e["recorded_at"] for e in self.entries if isinstance(e.get("recorded_at"), str)]
        if not stamps and isinstance(self.meta.get("recorded_at"), str):
            stamps = [self.meta["recorded_at"]]
        if not stamps:
            return None, None
        return min(stamps), max(stamps)

    # -- working copy -----------------------------------------------------------
    def pretty_bytes(self) -> bytes:
        return (json.dumps(self.to_dict(), sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()

    def write_file(self, path: Path | str) -> None:
        atomic_write(Path(path), self.pretty_bytes())


# -- building entries --------------------------------------------------------------
def make_entry(ident: CallIdentity, request: dict[str, Any], response: dict[str, Any], *,
               seq: int | None = None, recorded_at: str | None = None, duration_ms: float | None = None,
               meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One format-v1 entry: the call's identity fields, what was sent and answered, when, and
    ``meta`` (with the models the identity names)."""
    entry: dict[str, Any] = ident.entry_fields()
    if seq is not None:
        entry["seq"] = seq
    entry["request"] = request
    entry["response"] = response
    if recorded_at:
        entry["recorded_at"] = recorded_at
    if duration_ms is not None:
        entry["duration_ms"] = int(duration_ms)
    extra = dict(meta or {})
    if ident.models:
        extra["models"] = ident.models
    if extra:
        entry["meta"] = extra
    return entry


def models_used(entries: Iterable[Mapping[str, Any]], listed: Any = None) -> list[str]:
    """The models a cassette uses, sorted: ``listed`` (its ``meta.models``), each entry's
    ``meta.models`` (Bedrock and Gemini name the model in the URL) and each request body's
    ``model``. The one rule for the cassette's meta, the lock's pin summary and imports."""
    found: set[str] = set()
    for m in listed if isinstance(listed, list) else []:
        if isinstance(m, str):
            found.add(m)
    for e in entries:
        meta = e.get("meta")
        for m in (meta.get("models") if isinstance(meta, dict) else None) or ():
            if isinstance(m, str):
                found.add(m)
        req = e.get("request")
        body = req.get("body") if isinstance(req, dict) else None
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            found.add(body["model"])
    return sorted(found)


def load_bytes(data: bytes, *, source: str = "cassette") -> Cassette:
    if len(data) > MAX_CASSETTE_BYTES:
        raise CassetteFormatError(f"{source}: larger than {MAX_CASSETTE_BYTES} bytes")
    try:
        parsed = loads_bounded(data, what=source)
    except ValueError as exc:
        raise CassetteFormatError(str(exc)) from None
    return Cassette.from_dict(parsed, source=source)


def read_file(path: Path | str) -> tuple[bytes, os.stat_result]:
    """The bytes of a cassette file and its stat, taken on the open file before the read (a
    later write shows in it)."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            return fh.read(), st
    except FileNotFoundError:
        raise CassetteFormatError(f"{path}: no such cassette file") from None
    except OSError as exc:
        raise CassetteFormatError(f"{path}: cannot read ({exc.strerror or exc})") from None


def load_file(path: Path | str) -> Cassette:
    path = Path(path)
    return load_bytes(read_file(path)[0], source=str(path))
