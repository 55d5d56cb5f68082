"""One redaction pass over a finished cassette entry (pure): every field but its identity and
per-recording numbers; a stream's events are also joined per JSON field and scanned, so a
secret spread over several chunks is found and every piece of it masked."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import RedactionRefused
from .cassette import Cassette, models_used
from .redaction import RuleSet, redact, secrets_in

__all__ = ["redact_entry", "redact_entries", "redact_text", "assemble", "KEPT_FIELDS"]

KEPT_FIELDS = frozenset({"identity", "seq", "recorded_at", "duration_ms"})


def redact_text(text: str, rules: RuleSet | None = None) -> str:
    """``text`` with every secret the rules know replaced by its placeholder."""
    return redact(text, rules)[0] if text else text


def redact_entry(entry: Mapping[str, Any], rules: RuleSet) -> tuple[dict[str, Any], dict[str, int]]:
    """A redacted copy of ``entry`` (every field but :data:`KEPT_FIELDS`) and hits per rule."""
    hits: dict[str, int] = {}
    out: dict[str, Any] = {}
    for key, value in entry.items():
        if key in KEPT_FIELDS:
            out[key] = value
            continue
        if key == "response" and isinstance(value, Mapping) and isinstance(value.get("chunks"), list):
            value = dict(value)
            value["chunks"] = _redact_stream(value["chunks"], rules, hits)
        try:
            new, h = redact(value, rules)
        except RedactionRefused as exc:
            raise exc.at(field=key + exc.field[1:]) from None
        out[key] = new
        _add(hits, h)
    return out, dict(sorted(hits.items()))


def redact_entries(entries: Iterable[Mapping[str, Any]], rules: RuleSet) -> tuple[list[dict[str, Any]], dict[str, int]]:
    hits: dict[str, int] = {}
    out = []
    for i, entry in enumerate(entries):
        try:
            new, h = redact_entry(entry, rules)
        except RedactionRefused as exc:
            raise exc.at(entry=i) from None
        out.append(new)
        _add(hits, h)
    return out, dict(sorted(hits.items()))


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for rule, n in more.items():
        into[rule] = into.get(rule, 0) + int(n)


# -- streams ----------------------------------------------------------------------------------
def _events(chunks: list[Any]) -> list[tuple[str, Any] | None]:
    """Per chunk: (the raw data payload, its parsed JSON or the raw text), None if no data line."""
    out: list[tuple[str, Any] | None] = []
    for chunk in chunks:
        data_lines = [ln for ln in chunk.split("\n") if ln.startswith("data:")] if isinstance(chunk, str) else []
        if len(data_lines) != 1:
            out.append(None)
            continue
        raw = data_lines[0][5:].lstrip(" ")
        try:
            out.append((raw, json.loads(raw)))
        except ValueError:
            out.append((raw, raw))
    return out


def _leaves(value: Any, path: tuple[Any, ...], out: list[tuple[tuple[Any, ...], str]]) -> None:
    if isinstance(value, str):
        out.append((path, value))
    elif isinstance(value, Mapping):
        for k, v in value.items():
            _leaves(v, (*path, k), out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _leaves(v, (*path, i), out)


def _redact_stream(chunks: list[Any], rules: RuleSet, hits: dict[str, int]) -> list[Any]:
    """Mask secrets whose pieces sit in several events of one stream."""
    events = _events(chunks)
    streams: dict[tuple[Any, ...], list[tuple[int, str]]] = {}
    for i, ev in enumerate(events):
        if ev is None:
            continue
        leaves: list[tuple[tuple[Any, ...], str]] = []
        _leaves(ev[1], (), leaves)
        for path, text in leaves:
            streams.setdefault(path, []).append((i, text))
    edits: dict[int, dict[tuple[Any, ...], str]] = {}
    for path, pieces in streams.items():
        if len(pieces) < 2:
            continue
        texts = [t for _, t in pieces]
        new_texts = _mask_across(texts, rules, hits)
        for (i, old), new in zip(pieces, new_texts, strict=True):
            if new != old:
                edits.setdefault(i, {})[path] = new
    if not edits:
        return chunks
    out = list(chunks)
    for i, changes in edits.items():
        _raw, value = events[i]  # type: ignore[misc]
        for path, new in changes.items():
            value = _set(value, path, new)
        payload = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        lines = out[i].split("\n")
        at = next(k for k, ln in enumerate(lines) if ln.startswith("data:"))
        lines[at] = "data: " + payload
        out[i] = "\n".join(lines)
    return out


def _set(value: Any, path: tuple[Any, ...], new: str) -> Any:
    if not path:
        return new
    copy: Any = dict(value) if isinstance(value, Mapping) else list(value)
    copy[path[0]] = _set(value[path[0]], path[1:], new)
    return copy


def _mask_across(texts: list[str], rules: RuleSet, hits: dict[str, int]) -> list[str]:
    """``texts`` with each secret found in their concatenation masked where it spans pieces."""
    joined = "".join(texts)
    found = secrets_in(joined, rules)
    if not found:
        return texts
    starts = list(itertools.accumulate(map(len, texts[:-1]), initial=0))
    spans: list[tuple[int, int, str]] = []
    for rule, secret in found:
        at = joined.find(secret)
        while at != -1:
            spans.append((at, at + len(secret), rule))
            at = joined.find(secret, at + 1)
    # keep only the spans over more than one piece (one piece alone is redacted field by field)
    cross: list[tuple[int, int, str]] = []
    for a, b, rule in sorted(set(spans)):
        first = max(i for i, s in enumerate(starts) if s <= a)
        last = max(i for i, s in enumerate(starts) if s < b)
        if first != last and not any(a < cb and ca < b for ca, cb, _ in cross):
            cross.append((a, b, rule))
    if not cross:
        return texts
    out = []
    for i, t in enumerate(texts):
        s, e = starts[i], starts[i] + len(t)
        pieces: list[str] = []
        cur = s
        for a, b, rule in cross:
            if b <= s or a >= e:
                continue
            pieces.append(joined[cur:max(a, s)])
            if a >= s:  # the piece where the secret starts carries the placeholder
                pieces.append(rules.placeholder_for(rule))
            cur = min(b, e)
        pieces.append(joined[cur:e])
        out.append("".join(pieces))
    for _a, _b, rule in cross:
        hits[rule] = hits.get(rule, 0) + 1
    return out


def assemble(name: str, kept: Iterable[Mapping[str, Any]], new: Sequence[dict[str, Any]], rules: RuleSet,
             meta: Mapping[str, Any], *, old_hits: Mapping[str, int] | None = None) -> Cassette:
    """The one way a cassette is put together (the recorder, every importer): ``new`` entries
    redacted, ``kept`` ones as written, all renumbered, ``meta.models`` and the redaction
    record (the rules, and the hits per rule: ``old_hits`` plus the new ones) filled in."""
    kept = list(kept)
    try:
        redacted, new_hits = redact_entries(new, rules)
    except RedactionRefused as exc:
        raise exc.at(cassette=name, entry=len(kept) + (exc.entry or 0)) from None
    entries = [dict(e) for e in kept] + redacted
    hits: dict[str, int] = dict(old_hits or {})
    _add(hits, new_hits)
    for i, entry in enumerate(entries):
        entry["seq"] = i
    return Cassette(
        name=name,
        entries=tuple(entries),
        meta={**meta, "models": models_used(entries)},
        redaction={"rules": list(rules.describe()), "hits": hits},
    )
