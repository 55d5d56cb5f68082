"""Diffs of cassettes and locks, and the 3-way merge of locks (pure: cassettes come from
the caller's ``load(pin)``). Entries match by call identity, occurrence by occurrence; the
per-recording fields (``seq``, ``recorded_at``, ``duration_ms``) never count as a change."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import CasstoreError
from .cassette import Cassette
from .fielddiff import changed_leaves, field_changes, short
from .lock import Lock, Pin, format_lock, format_pin, shown
from .numerals import counted

__all__ = [
    "EntryChange",
    "CassetteDiff",
    "LockDiff",
    "Conflict",
    "LockMerge",
    "field_changes",
    "diff_entries",
    "diff_locks",
    "render_lock_diff",
    "render_lock_summary",
    "describe_entry",
    "entry_field_pairs",
    "merge_locks",
    "format_merge",
]

VOLATILE_ENTRY_KEYS = frozenset({"seq", "recorded_at", "duration_ms"})
MAX_FIELDS = 6  # field-level lines shown per changed entry
Loader = Callable[[Pin], Cassette]


# -- field-level changes (the engine is model.fielddiff) ---------------------------------
def _expand_json_text(entry: Mapping[str, Any]) -> Any:
    """Parse ``response.body_text`` when it holds JSON, so its fields diff one by one."""
    resp = entry.get("response")
    if not isinstance(resp, Mapping) or not isinstance(resp.get("body_text"), str):
        return entry
    try:
        parsed = json.loads(resp["body_text"])
    except ValueError:
        return entry
    return {**entry, "response": {**resp, "body_text": parsed}}


def _content(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in VOLATILE_ENTRY_KEYS}


def entry_field_pairs(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(path, old leaf, new leaf)`` of a changed call, as :func:`diff_entries` compares it (for
    side-by-side views; :data:`~casstore.model.fielddiff.ABSENT` for a missing side)."""
    return changed_leaves(_expand_json_text(_content(old)), _expand_json_text(_content(new)))


# -- one-line descriptions of a call -----------------------------------------------------
def _text_of(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts: [{"type": "text", "text": ...}, ...]
        for part in value:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                text: str = part["text"]
                return text
    return None


def _dig(value: Any, *path: Any) -> Any:
    for p in path:
        if isinstance(p, int) and isinstance(value, list) and -len(value) <= p < len(value):
            value = value[p]
        elif isinstance(p, str) and isinstance(value, Mapping):
            value = value.get(p)
        else:
            return None
    return value


def _request_hint(req: Any) -> str:
    body = _dig(req, "body")
    if not isinstance(body, Mapping):
        if isinstance(req, Mapping) and ("args" in req or "kwargs" in req):  # a tool call
            return short({k: req[k] for k in ("args", "kwargs") if k in req})
        return short(body) if body is not None else ""
    bits = []
    if isinstance(body.get("model"), str):
        bits.append(body["model"])
    text = None
    for key in ("messages", "input"):
        msgs = body.get(key)
        if isinstance(msgs, list) and msgs:
            text = _text_of(_dig(msgs, -1, "content"))
        elif isinstance(msgs, str):
            text = msgs
        if text is not None:
            break
    if text is None and isinstance(body.get("prompt"), str):
        text = body["prompt"]
    if text is not None:
        bits.append(short(text))
    return " ".join(bits) if bits else short(body)


def _response_hint(resp: Any) -> str:
    if not isinstance(resp, Mapping):
        return short(resp)
    bits = [str(resp["status"])] if "status" in resp else []
    if resp.get("stream") and isinstance(resp.get("chunks"), list):
        bits.append(f"stream of {len(resp['chunks'])} chunks")
        return " ".join(bits)
    body = resp.get("body")
    if isinstance(resp.get("body_text"), str):
        try:
            body = json.loads(resp["body_text"])
        except ValueError:
            body = resp["body_text"]
    text = (
        _text_of(_dig(body, "choices", 0, "message", "content"))  # OpenAI chat
        or _text_of(_dig(body, "content"))  # Anthropic messages
        or _dig(body, "output_text")  # OpenAI responses
        or _text_of(_dig(body, "output", 0, "content"))
    )
    if isinstance(text, str):
        bits.append(short(text))
    elif body is not None:
        bits.append(short(body))
    elif "result" in resp or "error" in resp:  # a tool call
        bits.append(short({k: resp[k] for k in ("result", "error") if k in resp}))
    return " ".join(bits)


def describe_entry(entry: Mapping[str, Any]) -> str:
    """``llm POST https://…  id=1a2b3c4d5e6f  gpt-4o "hello" → 200 "hi"`` (one line)."""
    target = _target(entry)
    ident = str(entry.get("identity", ""))[:12]
    req = _request_hint(entry.get("request"))
    resp = _response_hint(entry.get("response"))
    return f"{entry.get('kind', '?')} {target}  id={ident}  {req} → {resp}".rstrip()


# -- entry-level diff --------------------------------------------------------------------
@dataclass(frozen=True)
class EntryChange:
    change: str  # "added" | "removed" | "changed"
    identity: str
    kind: str
    target: str
    old_seq: int | None = None
    new_seq: int | None = None
    summary: str = ""  # one-line description of the call (added/removed)
    fields: tuple[str, ...] = ()  # field-level changes (changed), or vs the closest removed call
    more_fields: int = 0


def _seq(entry: Mapping[str, Any], i: int) -> int:
    s = entry.get("seq", i)
    return s if isinstance(s, int) and not isinstance(s, bool) else i


def _target(entry: Mapping[str, Any]) -> str:
    t = entry.get("target")
    return t if isinstance(t, str) else short(t)


def _cap(lines: list[str]) -> tuple[tuple[str, ...], int]:
    return tuple(lines[:MAX_FIELDS]), max(0, len(lines) - MAX_FIELDS)


def diff_entries(old: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]]) -> tuple[list[EntryChange], int]:
    """Entry changes (removed, then changed and added in recorded order) and the unchanged count."""
    old_l, new_l = list(old), list(new)
    pending: dict[str, list[int]] = {}
    for i, e in enumerate(old_l):
        pending.setdefault(str(e.get("identity")), []).append(i)
    matched_old: set[int] = set()
    changes: list[EntryChange] = []
    added: list[int] = []
    unchanged = 0
    for j, e in enumerate(new_l):
        ident = str(e.get("identity"))
        queue = pending.get(ident)
        if not queue:
            added.append(j)
            continue
        i = queue.pop(0)
        matched_old.add(i)
        o = old_l[i]
        if _content(o) == _content(e):
            unchanged += 1
            continue
        diffs, more = _cap(field_changes(_expand_json_text(_content(o)), _expand_json_text(_content(e))))
        changes.append(EntryChange("changed", ident, str(e.get("kind")), _target(e), _seq(o, i), _seq(e, j),
                                   describe_entry(e), diffs, more))
    removed = [i for i in range(len(old_l)) if i not in matched_old]
    near = _closest_removed(old_l, new_l, removed, added)
    out = [
        EntryChange("removed", str(old_l[i].get("identity")), str(old_l[i].get("kind")), _target(old_l[i]),
                    old_seq=_seq(old_l[i], i), summary=describe_entry(old_l[i]))
        for i in removed
    ]
    for j in added:
        e = new_l[j]
        fields: tuple[str, ...] = ()
        more = 0
        if j in near:
            i, lines = near[j]
            fields, more = _cap([f"vs removed #{_seq(old_l[i], i)}: {x}" for x in lines])
        out.append(EntryChange("added", str(e.get("identity")), str(e.get("kind")), _target(e),
                               new_seq=_seq(e, j), summary=describe_entry(e), fields=fields, more_fields=more))
    changed_and_added = sorted(changes + out[len(removed):], key=lambda c: c.new_seq or 0)
    return out[: len(removed)] + changed_and_added, unchanged


def _closest_removed(old_l: list, new_l: list, removed: list[int], added: list[int]) -> dict[int, tuple[int, list[str]]]:
    """For each added call, the removed call of the same kind and target that differs least
    (a re-recorded call whose identity changed then reads as what differs); bounded work."""
    if not removed or not added or len(removed) * len(added) > 2500:
        return {}
    out: dict[int, tuple[int, list[str]]] = {}
    free = list(removed)
    for j in added:
        e = new_l[j]
        best: tuple[int, list[str]] | None = None
        for i in free:
            o = old_l[i]
            if o.get("kind") != e.get("kind") or o.get("target") != e.get("target"):
                continue
            lines = field_changes(o.get("request"), e.get("request"), "request")
            if best is None or len(lines) < len(best[1]):
                best = (i, lines)
        if best is not None:
            free.remove(best[0])
            out[j] = best
    return out


# -- cassette and lock diffs -------------------------------------------------------------
@dataclass
class CassetteDiff:
    name: str
    status: str  # "added" | "removed" | "changed" | "re-signed"
    old_digest: str | None = None
    new_digest: str | None = None
    old_entries: int | None = None
    new_entries: int | None = None
    changes: list[EntryChange] = field(default_factory=list)
    unchanged: int = 0
    old_signers: list[str] = field(default_factory=list)
    new_signers: list[str] = field(default_factory=list)
    error: str | None = None  # why the entries could not be compared


@dataclass
class LockDiff:
    cassettes: list[CassetteDiff] = field(default_factory=list)
    unchanged: int = 0

    @property
    def errors(self) -> list[str]:
        return [f"{c.name}: {c.error}" for c in self.cassettes if c.error]


def _signers(pin: Pin | None) -> list[str]:
    return sorted({s.signer for s in pin.signatures}) if pin else []


def diff_locks(old: Lock, new: Lock, load: Loader) -> LockDiff:
    """Cassette by cassette: added, removed, re-pinned (with entry diffs) and re-signed."""
    out = LockDiff()
    for name in sorted(set(old.pins) | set(new.pins)):
        a, b = old.pins.get(name), new.pins.get(name)
        if a is not None and b is not None and a.digest == b.digest:
            if _signers(a) != _signers(b) or {s.keyid for s in a.signatures} != {s.keyid for s in b.signatures}:
                out.cassettes.append(CassetteDiff(name, "re-signed", a.digest, b.digest, a.entries, b.entries,
                                                  old_signers=_signers(a), new_signers=_signers(b)))
            else:
                out.unchanged += 1
            continue
        status = "added" if a is None else "removed" if b is None else "changed"
        cd = CassetteDiff(name, status, a.digest if a else None, b.digest if b else None,
                          a.entries if a else None, b.entries if b else None,
                          old_signers=_signers(a), new_signers=_signers(b))
        try:
            ca = load(a) if a is not None else None
            cb = load(b) if b is not None else None
        except CasstoreError as exc:
            cd.error = str(exc)
        else:
            cd.changes, cd.unchanged = diff_entries(ca.entries if ca else (), cb.entries if cb else ())
        out.cassettes.append(cd)
    return out


_MARK = {"added": "+", "removed": "-", "changed": "~", "re-signed": "="}


def _d(digest: str | None) -> str:
    return digest[:19] + "…" if digest else "-"


def _join(texts: Iterable[str]) -> str:
    """Signers or models of a lock, as one line (escaped: see :func:`shown`)."""
    return ", ".join(map(shown, texts))


def render_lock_diff(diff: LockDiff, *, max_calls: int = 50) -> str:
    """The human text of a lock diff (``casstore diff``)."""
    if not diff.cassettes:
        return f"no cassette changed ({diff.unchanged} unchanged)\n"
    lines: list[str] = []
    for c in diff.cassettes:
        if c.status == "re-signed":
            lines.append(f"= {c.name}  {_d(c.new_digest)}  signatures: {_join(c.old_signers) or '-'}"
                         f" → {_join(c.new_signers) or '-'}")
            continue
        head = f"{_MARK[c.status]} {c.name}  "
        if c.status == "changed":
            head += f"{_d(c.old_digest)} → {_d(c.new_digest)}  ({c.old_entries} → {counted(c.new_entries, 'entry', 'entries')})"
        else:
            n = c.new_entries if c.status == "added" else c.old_entries
            head += f"{_d(c.new_digest or c.old_digest)}  ({counted(n, 'entry', 'entries')})"
        counts = {k: sum(1 for x in c.changes if x.change == k) for k in ("added", "removed", "changed")}
        if not c.error:
            head += f"  calls: +{counts['added']} -{counts['removed']} ~{counts['changed']} ={c.unchanged}"
        if c.new_signers and c.status != "removed":
            head += f"  signed by {_join(c.new_signers)}"
        lines.append(head)
        if c.error:
            lines.append(f"    (calls not shown: {c.error})")
        for x in c.changes[:max_calls]:
            seq = x.new_seq if x.new_seq is not None else x.old_seq
            lines.append(f"    {_MARK[x.change]} #{seq} {x.summary}")
            lines.extend(f"        {f}" for f in x.fields)
            if x.more_fields:
                lines.append(f"        … and {x.more_fields} more field(s)")
        if len(c.changes) > max_calls:
            lines.append(f"    … and {len(c.changes) - max_calls} more call(s)")
    lines.append(f"{len(diff.cassettes)} cassette(s) changed, {diff.unchanged} unchanged")
    return "\n".join(lines) + "\n"


def render_lock_summary(lock: Lock, load: Loader) -> str:
    """Readable text of a whole lock, one line per call: what ``git diff`` shows (textconv).
    No timestamps, so a call re-recorded identically shows no change."""
    lines = [f"# casstore.lock: {len(lock.pins)} cassette(s) (readable view by casstore; the file is TOML)"]
    for name, pin in lock.pins.items():
        signers = _join(_signers(pin)) or "unsigned"
        lines.append("")
        lines.append(f"cassette {name}")
        lines.append(f"  digest {pin.digest}  {pin.size} bytes  {counted(pin.entries, 'entry', 'entries')}  signed by {signers}")
        if pin.models:
            lines.append(f"  models {_join(pin.models)}")
        try:
            cas = load(pin)
        except CasstoreError as exc:
            lines.append(f"  (calls not shown: {exc})")
            continue
        for i, e in enumerate(cas.entries):
            lines.append(f"  call #{_seq(e, i)} {describe_entry(e)}")
    return "\n".join(lines) + "\n"


# -- 3-way merge of locks ----------------------------------------------------------------
@dataclass(frozen=True)
class Conflict:
    name: str
    base: Pin | None
    ours: Pin | None
    theirs: Pin | None

    def message(self) -> str:
        def side(p: Pin | None) -> str:
            return p.digest if p is not None else "deleted"

        return (f"cassette {self.name!r} changed on both sides: ours {side(self.ours)}, "
                f"theirs {side(self.theirs)} (base {side(self.base)})")


@dataclass(frozen=True)
class LockMerge:
    lock: Lock  # the merge; each conflicted cassette keeps our side here
    conflicts: tuple[Conflict, ...] = ()


def _union_pin(ours: Pin, theirs: Pin) -> Pin:
    sigs = {s.keyid: s for s in theirs.signatures}
    sigs.update({s.keyid: s for s in ours.signatures})
    extra = {**dict(theirs.extra), **dict(ours.extra)}
    return Pin(**{**ours.__dict__, "extra": extra}).with_signatures(sigs.values())


def merge_locks(base: Lock, ours: Lock, theirs: Lock) -> LockMerge:
    """3-way merge keyed by cassette name: a cassette changed on one side takes that side;
    the same digest on both sides unites the signatures; two different changes conflict."""
    pins: dict[str, Pin] = {}
    conflicts: list[Conflict] = []
    for name in sorted(set(base.pins) | set(ours.pins) | set(theirs.pins)):
        b, o, t = base.pins.get(name), ours.pins.get(name), theirs.pins.get(name)
        od, td, bd = (p.digest if p else None for p in (o, t, b))
        if od == td:
            if o is not None and t is not None:
                pins[name] = _union_pin(o, t)
        elif od == bd:
            if t is not None:
                pins[name] = t
        elif td == bd:
            if o is not None:
                pins[name] = o
        else:
            conflicts.append(Conflict(name, b, o, t))
            if o is not None:
                pins[name] = o
    extra = dict(ours.extra)
    for k, v in theirs.extra.items():
        if ours.extra.get(k) == base.extra.get(k):
            extra[k] = v
    for k in base.extra:
        if k not in theirs.extra and ours.extra.get(k) == base.extra.get(k):
            extra.pop(k, None)
    return LockMerge(Lock(pins=pins, extra=extra), tuple(conflicts))


def _block(pin: Pin) -> list[str]:
    return format_pin(pin).strip("\n").splitlines()


def format_merge(merge: LockMerge, *, marker_size: int = 7, ours: str = "ours", theirs: str = "theirs") -> str:
    """The merged lock as text; each conflict becomes a git-style conflict block."""
    if not merge.conflicts:
        return format_lock(merge.lock)
    conflicted = {c.name: c for c in merge.conflicts}
    out = format_lock(Lock(extra=merge.lock.extra)).splitlines()  # the head: comment, unknown keys, version
    for name in sorted(set(merge.lock.pins) | set(conflicted)):
        out.append("")
        c = conflicted.get(name)
        if c is None:
            out.extend(_block(merge.lock.pins[name]))
            continue
        out.append(f"# conflict: {c.message()}")
        out.append("<" * marker_size + f" {ours}")
        out.extend(_block(c.ours) if c.ours else [f"# (cassette {name!r} removed on {ours})"])
        out.append("=" * marker_size)
        out.extend(_block(c.theirs) if c.theirs else [f"# (cassette {name!r} removed on {theirs})"])
        out.append(">" * marker_size + f" {theirs}")
    return "\n".join(out) + "\n"
