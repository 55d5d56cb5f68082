"""Interop front: import vcrpy cassettes and JSONL traces, export readable copies.

Every import works in three phases so that nothing is ever half-imported:

1. **read and validate** every input (``casstore.import_vcr`` / ``casstore.import_jsonl``
   turn files into entries, or raise :class:`~casstore.errors.CassetteFormatError`
   naming the file and line);
2. **write** every working copy ``<cassette dir>/<name>.json`` atomically;
3. **pin** them (``--add``) through :func:`casstore.api.add`, which is all or nothing.

Imported entries are built exactly as the replay library builds the entries it records
(:func:`http_entry` mirrors ``Session.begin_http`` + ``Session.finish``): the same
request record (:func:`casstore.recording.encode_request`), the same response record
(:func:`casstore.recording.encode_response`) and the same identity
(:func:`casstore.identity.http_identity` / :func:`~casstore.identity.tool_identity`)
computed from the *un-redacted* request. Redaction is applied afterwards, so it never
changes an identity.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from ..errors import CassetteFormatError, UsageError
from ..model.cassette import Cassette
from ..model.identity import http_identity, jsonable, tool_identity
from ..model.names import validate_name
from ..model.recording import decode_content, encode_request, encode_response
from ..project import Project

__all__ = [
    "ImportedCassette",
    "http_entry",
    "tool_entry",
    "response_record",
    "iso_timestamp",
    "name_from_path",
    "build_cassette",
    "import_vcr",
    "import_jsonl",
    "export_cassette",
]

# Content codings whose failure to decode means "the body is already decoded" (vcrpy's
# urllib3 stub stores the decoded body but keeps the content-encoding header).
_CHECKABLE_CODINGS = frozenset({"gzip", "x-gzip", "deflate", "identity", "zstd"})


# -- entries, exactly as the replay library writes them --------------------------------------


def response_record(status: int, headers: Iterable[tuple[str, str]], raw: bytes) -> dict[str, Any]:
    """The response record the transports would write for ``raw`` (still encoded or not).

    A body stored compressed (``content-encoding: gzip``) is decoded, as a live capture
    is. A body that cannot be decoded under a coding we know how to check was already
    decoded by the recorder, so its ``content-encoding`` header is dropped; an unknown
    coding (``br`` without brotli) keeps the exact bytes and the header.
    """
    items = [(str(k), str(v)) for k, v in headers]
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
    duration_ms: int | None = None,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A format-v1 entry for one HTTP call (kind ``http``, or ``llm`` for LLM endpoints).

    Thin adapter over the replay library: the same steps as ``Session.begin_http`` (lower-
    cased header pairs → ``http_identity`` + ``encode_request``) and ``Session.finish``
    (the entry's fields), without a live session.
    """
    items = [(str(k).lower(), str(v)) for k, v in headers]
    ident = http_identity(method, url, items, body)
    entry: dict[str, Any] = {
        "identity": ident.identity,
        "kind": ident.kind,
        "target": ident.target,
        "request": encode_request(method, url, items, body),
        "response": response,
    }
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


def tool_entry(
    name: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    response: dict[str, Any],
    *,
    recorded_at: str | None = None,
    duration_ms: int | None = None,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A format-v1 entry for one tool call, as ``casstore.tool()`` records it."""
    ident = tool_identity(name, args, kwargs)
    entry: dict[str, Any] = {
        "identity": ident.identity,
        "kind": "tool",
        "target": name,
        "request": {"args": jsonable(list(args)), "kwargs": jsonable(dict(kwargs))},
        "response": response,
    }
    if recorded_at:
        entry["recorded_at"] = recorded_at
    if duration_ms is not None:
        entry["duration_ms"] = int(duration_ms)
    if meta:
        entry["meta"] = dict(meta)
    return entry


# -- small helpers ---------------------------------------------------------------------------


def iso_timestamp(value: Any) -> str | None:
    """``YYYY-MM-DDTHH:MM:SSZ`` (UTC) from an ISO string, an RFC 2822 date or epoch seconds/ms.

    ``None`` when ``value`` is empty or not a time.
    """
    if value is None or isinstance(value, bool):
        return None
    dt: datetime | None = None
    if isinstance(value, (int, float)):
        seconds = float(value)
        if seconds > 1e11:  # milliseconds
            seconds /= 1000.0
        try:
            dt = datetime.fromtimestamp(seconds, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            try:
                dt = parsedate_to_datetime(text)
            except (TypeError, ValueError, IndexError):
                return None
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def name_from_path(path: Path, base: Path | None = None) -> str:
    """Cassette name for an imported file: its stem (``legacy.yaml`` → ``legacy``), or the
    path relative to ``base`` without suffix for files found in a folder
    (``test_mod/test_x[p].yaml`` → ``test_mod/test_x-p``, as the pytest plugin names it).
    """
    rel = path.relative_to(base) if base is not None else Path(path.name)
    parts = list(rel.parts)
    parts[-1] = Path(parts[-1]).stem
    cleaned = [re.sub(r"[^A-Za-z0-9_.\-]+", "-", p).strip("-.") or "x" for p in parts]
    return validate_name("/".join(cleaned))


def _utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class _FallbackRules:
    """Used only while ``casstore.redaction`` is not importable: auth-like headers only."""

    words = ("authorization", "cookie", "api-key", "apikey", "token", "secret", "password")

    def describe(self) -> list[str]:
        return ["auth-headers"]


def _fallback_redact(obj: Any, rules: Any) -> tuple[Any, dict[str, int]]:
    if not isinstance(obj, dict) or not isinstance(obj.get("headers"), dict):
        return obj, {}
    hits = 0
    headers = dict(obj["headers"])
    for k in list(headers):
        if any(w in k.lower() for w in _FallbackRules.words):
            headers[k] = "<redacted>"
            hits += 1
    out = dict(obj)
    out["headers"] = headers
    return out, ({"auth-headers": hits} if hits else {})


def load_redaction(config: Mapping[str, Any] | None) -> tuple[Any, Callable[[Any, Any], tuple[Any, dict[str, int]]]]:
    """``(rules, redact)`` from the hygiene module (imported lazily), else a header-only fallback."""
    try:
        from ..model import redaction  # type: ignore[attr-defined]
    except ImportError:
        return _FallbackRules(), _fallback_redact
    return redaction.RuleSet.from_config(dict(config or {})), redaction.redact


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
    rules, redact = load_redaction(redaction_config)
    hits: dict[str, int] = {}
    out: list[dict[str, Any]] = []
    models: set[str] = set()
    for seq, entry in enumerate(entries):
        e = dict(entry)
        for key in ("request", "response"):
            e[key], h = redact(entry[key], rules)
            for rule, n in (h or {}).items():
                hits[rule] = hits.get(rule, 0) + int(n)
        e["seq"] = seq
        out.append(e)
        models.update((e.get("meta") or {}).get("models") or [])
    stamps = [e["recorded_at"] for e in out if isinstance(e.get("recorded_at"), str)]
    from .. import __version__

    meta: dict[str, Any] = {
        "recorded_at": max(stamps) if stamps else (recorded_at or _utc_now()),
        "recorder": f"{recorder} (imported by casstore/{__version__})",
        "imported_from": source,
        "models": sorted(models),
        "git": {},
    }
    cassette = Cassette(
        name=name,
        entries=tuple(out),
        meta=meta,
        redaction={"rules": list(rules.describe()), "hits": hits},
    )
    # the model's own validation and canonical form, before anything is written
    Cassette.from_dict(cassette.to_dict(), source=f"imported cassette {name!r}")
    cassette.canonical_bytes()
    return cassette


# -- the import/export API ---------------------------------------------------------------------


@dataclass
class ImportedCassette:
    """One working copy an import wrote (and, with ``add``, pinned)."""

    name: str
    sources: list[str]
    path: str
    entries: int
    kinds: dict[str, int]
    redaction_hits: dict[str, int]
    notes: list[str] = field(default_factory=list)
    digest: str | None = None
    signed_by: str | None = None


def _rel(project: Project, path: Path) -> str:
    try:
        return path.resolve().relative_to(project.root.resolve()).as_posix()
    except ValueError:
        return path.name


def _kinds(cassette: Cassette) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in cassette.entries:
        out[str(e.get("kind"))] = out.get(str(e.get("kind")), 0) + 1
    return out


def _write_and_pin(
    project: Project,
    planned: list[tuple[Cassette, list[Path], list[str]]],
    *,
    add: bool,
    force: bool,
) -> list[ImportedCassette]:
    """Phase 2 and 3: check destinations, write every working copy, then pin them all."""
    targets: list[Path] = []
    seen: dict[str, str] = {}
    for cassette, sources, _ in planned:
        if cassette.name in seen:
            raise UsageError(
                f"{sources[0].name} and {seen[cassette.name]} would both become cassette {cassette.name!r}; "
                "import them separately with --name"
            )
        seen[cassette.name] = sources[0].name
        target = project.working_copy_path(cassette.name)
        for src in sources:
            if src.resolve() == target.resolve():
                raise UsageError(
                    f"{src}: importing would overwrite the file being imported; pass --name to choose another name"
                )
        if target.exists() and not force:
            raise UsageError(
                f"{_rel(project, target)} already exists; pass --force to replace it, or --name to pick another name"
            )
        targets.append(target)
    created: list[Path] = []
    try:
        for (cassette, _, _), target in zip(planned, targets, strict=True):
            existed = target.exists()
            cassette.write_file(target)
            if not existed:
                created.append(target)
    except BaseException:
        for path in created:  # a failed write (disk full, ...) leaves no new copies behind
            with contextlib.suppress(OSError):
                path.unlink()
        raise
    results = [
        ImportedCassette(
            name=cassette.name,
            sources=[s.name for s in sources],
            path=_rel(project, target),
            entries=len(cassette.entries),
            kinds=_kinds(cassette),
            redaction_hits=dict(cassette.redaction.get("hits") or {}),
            notes=notes,
        )
        for (cassette, sources, notes), target in zip(planned, targets, strict=True)
    ]
    if add:
        from ..ops import api

        try:
            pinned = {a.name: a for a in api.add(project, targets)}
        except BaseException:
            for path in created:  # nothing was pinned (add is all or nothing): no new copies either
                with contextlib.suppress(OSError):
                    path.unlink()
            raise
        for r in results:
            if r.name in pinned:
                r.digest, r.signed_by = pinned[r.name].digest, pinned[r.name].signed_by
    return results


def _expand_vcr(paths: Sequence[Path]) -> list[tuple[Path, Path | None]]:
    """Files to import with the folder they were found in (``None`` for files given)."""
    out: list[tuple[Path, Path | None]] = []
    for p in paths:
        if p.is_dir():
            found = sorted(
                x for x in p.rglob("*") if x.is_file() and x.suffix.lower() in (".yaml", ".yml", ".json")
            )
            out.extend((x, p) for x in found)
        elif p.exists():
            out.append((p, None))
        else:
            raise UsageError(f"{p}: no such file or folder")
    return out


def import_vcr(
    project: Project,
    paths: Sequence[Path | str],
    *,
    name: str | None = None,
    add: bool = False,
    force: bool = False,
) -> list[ImportedCassette]:
    """Import vcrpy cassette files (or folders of them) as format-v1 working copies.

    Each file becomes ``<cassette dir>/<name>.json``; the name defaults to the file stem
    (for files found in a folder: the path below it). ``name`` overrides it for a single
    file. With ``add`` the copies are pinned in the lock. All or nothing: every file is
    read and validated before any working copy is written.
    """
    from .vcr import is_casstore_file, read_vcr_file

    given = [Path(p) for p in paths]
    if not given:
        raise UsageError("no vcrpy cassette files given")
    files = _expand_vcr(given)
    if name is not None:
        if len(files) != 1 or files[0][1] is not None:
            raise UsageError("--name needs exactly one cassette file")
        validate_name(name)
    if not files:
        raise UsageError(f"no .yaml, .yml or .json files in {', '.join(str(p) for p in given)}")
    planned: list[tuple[Cassette, list[Path], list[str]]] = []
    for path, base in files:
        if base is not None and is_casstore_file(path):
            continue  # a folder may hold casstore working copies next to vcrpy files
        parsed = read_vcr_file(path)
        cas_name = name if name is not None else name_from_path(path, base)
        cassette = build_cassette(
            cas_name,
            parsed.entries,
            recorder=parsed.recorder,
            source=path.name,
            redaction_config=project.config.redaction,
            recorded_at=parsed.fallback_recorded_at,
        )
        planned.append((cassette, [path], parsed.notes))
    if not planned:
        raise UsageError(f"no vcrpy cassettes in {', '.join(str(p) for p in given)}")
    return _write_and_pin(project, planned, add=add, force=force)


def import_jsonl(
    project: Project,
    paths: Sequence[Path | str],
    *,
    name: str,
    mapping: Mapping[str, str] | None = None,
    base_urls: Mapping[str, str] | None = None,
    add: bool = False,
    force: bool = False,
) -> ImportedCassette:
    """Import JSONL call logs (one call a line) as one format-v1 working copy ``name``.

    ``mapping`` maps fields (``request``, ``response``, ``model``, ...) to dot-paths in
    each record; ``base_urls`` maps ``openai`` / ``anthropic`` / ``*`` to the SDK base URL
    the calls replay under; see :mod:`casstore.import_jsonl` for the defaults.
    """
    from .jsonl import read_jsonl_files

    validate_name(name)
    files = [Path(p) for p in paths]
    if not files:
        raise UsageError("no JSONL files given")
    for f in files:
        if not f.is_file():
            raise UsageError(f"{f}: no such file")
    entries, notes = read_jsonl_files(files, mapping=mapping or {}, base_urls=base_urls)
    if not entries:
        raise UsageError(f"no call records in {', '.join(str(f) for f in files)}")
    cassette = build_cassette(
        name,
        entries,
        recorder="jsonl trace",
        source=", ".join(f.name for f in files),
        redaction_config=project.config.redaction,
    )
    return _write_and_pin(project, [(cassette, files, notes)], add=add, force=force)[0]


def export_cassette(project: Project, name: str, fmt: str = "json") -> tuple[bytes, list[str]]:
    """``(bytes, notes)``: a readable copy of cassette ``name`` (pinned first, else the
    working copy), as the format-v1 working copy (``json``) or a vcrpy YAML cassette (``vcr``)."""
    from .export import export_bytes

    cassette = project.resolve_cassette(name)
    if cassette is None:
        raise UsageError(
            f"no cassette {name!r}: not pinned in casstore.lock and no working copy "
            f"{_rel(project, project.working_copy_path(name))}"
        )
    return export_bytes(cassette, fmt)


def file_mtime(path: Path) -> str | None:
    try:
        return iso_timestamp(os.stat(path).st_mtime)
    except OSError:
        return None


def format_error(source: str, line: int | None, message: str) -> CassetteFormatError:
    """``file:line: message`` — the one line a user sees for a malformed input."""
    where = f"{source}:{line}" if line else source
    return CassetteFormatError(f"{where}: {message}")
