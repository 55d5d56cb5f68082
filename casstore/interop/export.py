"""Readable copies of a cassette: ``json``, the format-v1 working copy; ``vcr``, a vcrpy
YAML cassette of its HTTP entries with the exact bodies casstore serves (tool entries left out)."""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from ..model.cassette import Cassette
from ..model.names import not_pinned
from ..model.recording import decode_response, reason_phrase, request_body_bytes
from ..model.redaction import RuleSet
from ..model.scrub import redact_entries
from ..model.yaml_load import yaml_module
from ..project import Project
from .build import display_path

__all__ = ["FORMATS", "export_bytes", "to_vcr_dict", "export_cassette"]

FORMATS = ("json", "vcr")


def _text_or_bytes(data: bytes) -> str | bytes:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def _headers(items: list[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for k, v in items:
        out.setdefault(k, []).append(v)
    return out


def _interaction(entry: dict[str, Any]) -> dict[str, Any]:
    request = entry.get("request") or {}
    headers = request.get("headers") or {}
    req_items = [(str(k), str(x)) for k, v in headers.items() for x in (v if isinstance(v, list) else [v])]
    body = request_body_bytes(request)
    status, resp_items, resp_body, chunks = decode_response(entry.get("response") or {})
    data = resp_body if resp_body is not None else b"".join(chunks or [])
    return {
        "request": {
            "method": str(request.get("method", "GET")),
            "uri": str(request.get("url", "")),
            "headers": _headers(req_items),
            "body": _text_or_bytes(body) if body else None,
        },
        "response": {
            "status": {"code": status, "message": reason_phrase(status)},
            "headers": _headers(resp_items),
            "body": {"string": _text_or_bytes(data)},
        },
    }


def to_vcr_dict(cassette: Cassette) -> tuple[dict[str, Any], int]:
    """``(vcrpy cassette dict, number of entries left out)``."""
    interactions = []
    skipped = 0
    for entry in sorted(cassette.entries, key=lambda e: e.get("seq", 0)):
        request = entry.get("request")
        if entry.get("kind") == "tool" or not isinstance(request, dict) or "url" not in request:
            skipped += 1
            continue
        interactions.append(_interaction(entry))
    return {"interactions": interactions, "version": 1}, skipped


def export_bytes(cassette: Cassette, fmt: str = "json") -> tuple[bytes, list[str]]:
    """``(bytes, notes)`` of ``cassette`` in ``fmt`` (``json`` or ``vcr``)."""
    if fmt == "json":
        return cassette.pretty_bytes(), []
    if fmt != "vcr":
        raise UsageError(f"unknown export format {fmt!r} (use one of {', '.join(FORMATS)})")
    data, skipped = to_vcr_dict(cassette)
    text = yaml_module().safe_dump(data, sort_keys=True, default_flow_style=False, allow_unicode=True, width=1 << 16)
    notes = [f"left out {skipped} tool/non-HTTP entr{'y' if skipped == 1 else 'ies'}: vcrpy records HTTP only"] if skipped else []
    return text.encode("utf-8"), notes


def export_cassette(project: Project, name: str, fmt: str = "json") -> tuple[bytes, list[str]]:
    """``(bytes, notes)``: a readable copy of cassette ``name`` (pinned first, else the
    working copy), as the format-v1 working copy (``json``) or a vcrpy YAML cassette (``vcr``)."""
    cassette = project.resolve_cassette(name)
    if cassette is None:
        raise UsageError(
            not_pinned([name], project.load_lock().pins)
            + f"; no working copy {display_path(project, project.working_copy_path(name))} either"
        )
    # a copy printed or handed on is redacted again: a pin made before a rule covered a
    # field (or by an older casstore) never prints a secret the rules now know
    entries, _hits = redact_entries(cassette.entries, RuleSet.from_config(project.config.redaction))
    shown = Cassette(name=cassette.name, entries=tuple(entries), meta=cassette.meta,
                     redaction=cassette.redaction, extra=cassette.extra)
    return export_bytes(shown, fmt)
