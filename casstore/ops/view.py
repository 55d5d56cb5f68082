"""``casstore view``: pinned cassettes as page data (an index, or each cassette in full): only
pinned, verified objects, redacted again by the current rules."""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from typing import Any

from ..errors import CasstoreError
from ..model.cassette import Cassette, load_bytes
from ..model.lock import Pin
from ..model.numerals import parse_time
from ..model.recording import response_json_values
from ..model.redaction import RuleSet, redact
from ..model.redaction_bytes import b64_decode, content_encoding, decode
from ..model.scrub import redact_entries
from ..model.similarity import llm_text
from ..model.usage import response_usage
from ..project import Project
from ..store import signing
from ..store.signing import TrustedKeys
from .check_files import Limits
from .results import select
from .view_page import render_page

__all__ = ["view_page", "entry_view", "stream_answer", "ROW_FIELDS"]


# -- one entry, for display (pure) ------------------------------------------------------------
def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


HEX_BYTES = 512  # of a binary body, shown as a hex dump


def _hexdump(raw: bytes) -> str:
    """Lines of 16 bytes: offset, hex, and the printable ASCII ones (``.`` for the others)."""
    lines = []
    for at in range(0, len(raw), 16):
        part = raw[at:at + 16]
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in part)
        lines.append(f"{at:08x}  {part.hex(' '):<47}  {text}")
    return "\n".join(lines)


def _body_for_display(record: Mapping[str, Any], key: str) -> tuple[str | None, str | None]:
    """``(decoded text, note)`` of a base64 or compressed body; ``(None, None)`` when it is plain
    (the page shows plain bodies itself). Binary content is shown as a hex dump of its start."""
    value = record.get(key)
    raw: bytes | None = None
    if key == "body_base64" and isinstance(value, str):
        raw = b64_decode(value)
    elif isinstance(value, Mapping) and len(value) == 1 and isinstance(value.get("base64"), str):
        raw = b64_decode(value["base64"])
    if raw is None:
        return None, None
    coding = content_encoding(record)
    plain = decode(raw, coding) if coding else raw
    if plain is None:
        return None, f"{len(raw)} bytes, {coding} (cannot be decoded here)"
    note = f"{len(raw)} bytes" + (f", {coding} decoded to {len(plain)}" if coding else "")
    try:
        text = plain.decode("utf-8")
    except UnicodeDecodeError:
        shown = "" if len(plain) <= HEX_BYTES else f", the first {HEX_BYTES} shown"
        return _hexdump(plain[:HEX_BYTES]), f"{note}, binary (not UTF-8){shown}"
    try:
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        pass
    return text, note


def _decoded(entry: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for side in ("request", "response"):
        record = _map(entry.get(side))
        for key in ("body_base64", "body"):
            text, note = _body_for_display(record, key)
            if text is not None or note:
                out[side] = {"text": text, "note": note}
                break
    return out


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, Mapping):
                if isinstance(p.get("text"), str):
                    parts.append(p["text"])
                elif p.get("type") == "tool_result":
                    parts.append(_content_text(p.get("content")))
            elif isinstance(p, str):
                parts.append(p)
        return "\n".join(parts)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _tool_calls(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Tool calls an assistant message makes (OpenAI ``tool_calls``, Anthropic ``tool_use`` blocks)."""
    calls = []
    for c in message.get("tool_calls") or []:
        if isinstance(c, Mapping):
            fn = _map(c.get("function"))
            calls.append({"id": c.get("id"), "name": fn.get("name"), "arguments": fn.get("arguments")})
    content = message.get("content")
    for b in content if isinstance(content, list) else []:
        if isinstance(b, Mapping) and b.get("type") in ("tool_use", "function_call"):
            calls.append({"id": b.get("id"), "name": b.get("name"), "arguments": b.get("input", b.get("arguments"))})
    return calls


def _turns(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The conversation a request sends; a turn whose text is a message's string ``content``
    names the message instead (``"m"``: its index): the page reads the text from the request."""
    turns: list[dict[str, Any]] = []
    system = body.get("system") if body.get("system") is not None else body.get("instructions")
    if system is not None:
        turns.append({"role": "system", "text": _content_text(system)})
    msgs = body.get("messages")
    if msgs is None:
        msgs = body.get("input")
    listed = isinstance(msgs, list)  # the body's own list: its string contents can be named
    if isinstance(msgs, str):
        msgs = [{"role": "user", "content": msgs}]
    if msgs is None and isinstance(body.get("prompt"), str):
        msgs = [{"role": "user", "content": body["prompt"]}]
    for j, m in enumerate(msgs if isinstance(msgs, list) else []):
        if not isinstance(m, Mapping):
            continue
        if m.get("type") == "function_call_output":  # OpenAI responses: a tool's answer
            turns.append({"role": "tool", "tool_call_id": m.get("call_id"), "text": _content_text(m.get("output"))})
            continue
        role = str(m.get("role") or m.get("type") or "?")
        content = m.get("content")
        results = [b for b in content if isinstance(b, Mapping) and b.get("type") == "tool_result"] \
            if isinstance(content, list) else []
        for r in results:  # Anthropic: tool results ride in a user turn
            turns.append({"role": "tool", "tool_call_id": r.get("tool_use_id"), "text": _content_text(r.get("content"))})
        text = _content_text([b for b in _list(content) if b not in results] if results else content)
        if results and not text:
            continue
        turn: dict[str, Any] = {"role": role, "m": j} if listed and isinstance(content, str) else {"role": role, "text": text}
        if m.get("tool_call_id") is not None:
            turn["tool_call_id"] = m.get("tool_call_id")
        calls = _tool_calls(m)
        if calls:
            turn["tool_calls"] = calls
        turns.append(turn)
    return turns


def _answer_tool_calls(values: Any, stream: bool) -> list[dict[str, Any]]:
    """Tool calls in a response, whole or assembled from a stream's deltas."""
    if not stream:
        if not isinstance(values, Mapping):
            return []
        calls: list[dict[str, Any]] = []
        for ch in values.get("choices") or []:
            if isinstance(ch, Mapping) and isinstance(ch.get("message"), Mapping):
                calls += _tool_calls(ch["message"])
        if isinstance(values.get("content"), list):
            calls += _tool_calls(values)
        return calls
    by_index: dict[Any, dict[str, Any]] = {}
    for v in values if isinstance(values, list) else []:
        if not isinstance(v, Mapping):
            continue
        for ch in v.get("choices") or []:  # OpenAI chat deltas
            delta = ch.get("delta") if isinstance(ch, Mapping) else None
            for tc in (delta.get("tool_calls") or []) if isinstance(delta, Mapping) else []:
                if not isinstance(tc, Mapping):
                    continue
                slot = by_index.setdefault(("o", tc.get("index")), {"id": None, "name": None, "arguments": ""})
                fn = _map(tc.get("function"))
                slot["id"] = slot["id"] or tc.get("id")
                slot["name"] = slot["name"] or fn.get("name")
                slot["arguments"] += str(fn.get("arguments") or "")
        block = v.get("content_block")  # Anthropic: tool_use block, then input_json_delta
        if v.get("type") == "content_block_start" and isinstance(block, Mapping) and block.get("type") == "tool_use":
            by_index[("a", v.get("index"))] = {"id": block.get("id"), "name": block.get("name"), "arguments": ""}
        delta = v.get("delta")
        if isinstance(delta, Mapping) and delta.get("type") == "input_json_delta" and ("a", v.get("index")) in by_index:
            by_index[("a", v.get("index"))]["arguments"] += str(delta.get("partial_json") or "")
    return list(by_index.values())


def _stream(resp: Mapping[str, Any], timing: Mapping[str, Any]) -> tuple[list[Any], list[list[Any]]]:
    """A stream's JSON values, and each chunk's ``[offset ms from the start of the call or
    None, text or None]``: each chunk parsed once, for both."""
    offsets = _list(timing.get("chunks_ms"))
    values: list[Any] = []
    chunks = []
    for i, c in enumerate(_list(resp.get("chunks"))):
        try:
            vs = response_json_values({"stream": True, "chunks": [c]})
        except (ValueError, TypeError, CasstoreError):
            vs = []
        values += vs
        texts = [t for t in (llm_text({"body": v}) for v in vs) if t is not None]  # a record of one value
        chunks.append([offsets[i] if i < len(offsets) else None, "".join(texts) if texts else None])
    return values, chunks


def _conversation(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    req, resp = entry.get("request"), entry.get("response")
    body = req.get("body") if isinstance(req, Mapping) else None
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            body = None
    if not isinstance(body, Mapping) or not isinstance(resp, Mapping):
        return None
    turns = _turns(body)
    if not turns:
        return None
    stream = bool(resp.get("stream")) and isinstance(resp.get("chunks"), list)
    values: Any = None
    if stream:
        values, chunks = _stream(resp, _map(entry.get("timing")))
    else:
        try:
            values = response_json_values(resp)
        except (ValueError, TypeError, CasstoreError):
            pass
    usage = response_usage(resp)
    convo: dict[str, Any] = {
        "model": body.get("model") if isinstance(body.get("model"), str) else None, "turns": turns,
        "usage": None if usage is None else [usage.input, usage.output],  # the page adds them up
    }
    tools = [str((t.get("function") or t).get("name")) for t in body.get("tools") or []
             if isinstance(t, Mapping) and isinstance(t.get("function") or t, Mapping)]
    if tools:
        convo["tools"] = tools
    calls = _answer_tool_calls(values, stream)
    if calls:
        convo["answer_tool_calls"] = calls
    if stream:  # the answer is its chunks' texts joined (the page joins them)
        convo["chunks"] = chunks
    else:
        convo["answer"] = llm_text(resp)
    return convo


def stream_answer(convo: Mapping[str, Any]) -> str | None:
    """The assistant text of a conversation: its answer, or its streamed chunks' texts joined."""
    if "chunks" not in convo:
        return convo.get("answer")
    texts = [t for _ms, t in convo["chunks"] if t is not None]
    return "".join(texts) if texts else None


ABSENT_TARGET = 0  # detail["target"] of an entry that has none (a target is a string)
ROW_FIELDS = ("seq", "kind", "what", "status", "ms", "ttfb", "identity", "hint", "stream")
"""A timeline row's columns: each row is a list in this order (the page names them once)."""


def entry_view(entry: Mapping[str, Any], index: int) -> tuple[list[Any], dict[str, Any]]:
    """``(row, detail)`` of one entry: the timeline's columns (:data:`ROW_FIELDS`), and what an
    opened row shows (conversation, decoded bodies, the entry less what the row holds)."""
    req = _map(entry.get("request"))
    resp = _map(entry.get("response"))
    kind = str(entry.get("kind", "?"))
    timing = _map(entry.get("timing"))
    chunks_ms = _list(timing.get("chunks_ms"))
    if kind == "tool":
        status: Any = "error" if "error" in resp else "ok"
        what = str(entry.get("target", ""))
    else:
        status = resp.get("status")
        what = f"{req.get('method', '')} {req.get('url', entry.get('target', ''))}".strip()
    # the row holds identity, kind and (most often) the target: the page puts them back
    detail: dict[str, Any] = {"entry": {k: v for k, v in entry.items() if k not in ("identity", "kind", "target")}}
    if entry.get("target") != what:
        detail["target"] = entry["target"] if "target" in entry else ABSENT_TARGET
    convo = _conversation(entry) if kind == "llm" else None
    if convo is not None:
        detail["convo"] = convo
    decoded = _decoded(entry)
    if decoded:
        detail["decoded"] = decoded
    hint = ""
    if convo is not None:
        answer = stream_answer(convo) or ", ".join(f"{c.get('name')}()" for c in convo.get("answer_tool_calls", []))
        hint = f"{convo['model'] or ''} → {answer[:80]}" if answer else convo["model"] or ""
    stream = bool(resp.get("stream"))
    row = [entry.get("seq", index), kind, what, status, entry.get("duration_ms"),
           chunks_ms[0] if stream and chunks_ms else timing.get("headers_ms"),
           str(entry.get("identity", "")), hint, stream]
    return row, detail


# -- reading what is pinned ---------------------------------------------------------------
def _age_days(recorded: str | None, now: _dt.datetime) -> float | None:
    t = parse_time(recorded)
    return None if t is None else round((now - t).total_seconds() / 86400, 1)


def _trust(pin: Pin, trusted: TrustedKeys, required: bool) -> tuple[list[str], str | None]:
    try:
        return signing.verify_pin(pin, trusted, required=required), None
    except CasstoreError as exc:
        return [], str(exc)


def _used_by(project: Project, pin: Pin) -> tuple[str | None, str | None]:
    """``(test file, None)``: the test file that recorded the pinned cassette (``meta.test_file``),
    else ``(None, why it is not known)``. Read from the local cache only: the index never downloads."""
    data = project.cache.get(pin.digest, pin.size)
    if data is None:
        return None, "not in the local cache (casstore pull)"
    try:
        test_file = load_bytes(data, source=pin.name).meta.get("test_file")
    except CasstoreError as exc:
        return None, str(exc)
    if isinstance(test_file, str) and test_file:
        return test_file, None
    return None, "not recorded by a pytest run"


def view_page(project: Project, names: list[str], rev: str | None = None) -> tuple[str, dict[str, Any]]:
    """``(html, data)`` of ``casstore view``: an index of the pins of the work tree or ``rev``, or
    each named cassette in full (one that does not verify raises: nothing unverified is shown)."""
    if rev is None:
        lock, trusted = project.load_lock(), project.trusted_keys()
    else:
        from ..git.history import lock_at
        from ..git.trust import trusted_keys_at

        lock, trusted = lock_at(project, rev), trusted_keys_at(project, rev)
    now = _dt.datetime.now(_dt.timezone.utc)
    required = project.signatures_required(trusted)
    rules = RuleSet.from_config(project.config.redaction)
    lim = Limits.of(project)
    limits = {"max_age_days": lim.max_age_days, "warn_age_days": lim.warn_age_days,
              "max_cassette_bytes": lim.max_cassette_bytes}
    head = {"rev": rev or "working tree", "project": project.root.name, "limits": limits,
            "generated": now.strftime("%Y-%m-%dT%H:%M:%SZ")}
    if not names:
        rows = []
        for p in lock.pins.values():
            good, problem = _trust(p, trusted, required)
            used_by, unknown = _used_by(project, p) if problem is None else (None, "its signature does not verify")
            rows.append({"name": p.name, "entries": p.entries, "models": list(p.models), "size": p.size,
                         "recorded_from": p.recorded_from, "recorded_to": p.recorded_to,
                         "age_days": _age_days(p.recorded_from, now), "digest": p.digest,
                         "signers": [s.signer for s in p.signatures], "trusted": good, "trust_error": problem,
                         "used_by": used_by, "used_by_unknown": unknown})
        data, _hits = redact({**head, "page": "index", "pins": rows}, rules)
        return render_page(data), dict(data)
    cassettes = []
    for pin in select(lock, list(dict.fromkeys(names))):
        name = pin.name
        cas: Cassette = project.load_pinned(pin, trusted)  # verifies signature, digest and size
        entries, hits = redact_entries(cas.entries, rules)  # redacted again by today's rules
        header, _h = redact({"name": name, "digest": pin.digest, "size": pin.size, "models": list(pin.models),
                             "signers": [s.signer for s in pin.signatures],
                             "trusted": _trust(pin, trusted, required)[0],
                             "recorded_from": pin.recorded_from, "recorded_to": pin.recorded_to,
                             "age_days": _age_days(pin.recorded_from, now),
                             "meta": cas.meta, "redaction": cas.redaction, "rehits": hits}, rules)
        views = [entry_view(e, i) for i, e in enumerate(entries)]
        cassettes.append({**header, "rows": [r for r, _d in views], "details": [d for _r, d in views]})
    page = {**head, "page": "cassettes", "row_fields": ROW_FIELDS, "cassettes": cassettes}
    return render_page(page), page
