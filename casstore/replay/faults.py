"""Fault injection: ``use(faults={seq: fault})`` answers the served entry ``seq`` with an
HTTP status, ``"timeout"`` / ``"reset"``, a callable ``(entry) -> entry``, or for a JSON LLM
response one of :data:`LLM_FAULTS` (marked ``[casstore-fault:<name>]``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from ..errors import UsageError
from ..model.numerals import ascii_int

__all__ = ["LLM_FAULTS", "RAISED_FAULTS", "check_faults", "apply_fault", "raised_fault"]

LLM_FAULTS = ("corrupted_tool_output", "poisoned_argument", "misleading_retrieval", "wrong_system_prompt",
              "dropped_message")
RAISED_FAULTS = ("timeout", "reset")


def _check_fault(key: int, fault: Any) -> Any:
    if callable(fault):
        return fault
    if isinstance(fault, str) and (n := ascii_int(fault.strip())) is not None:  # not "²", "٥٠٣", 5000 digits
        fault = n
    if isinstance(fault, int) and not isinstance(fault, bool):
        if not 100 <= fault <= 599:
            raise UsageError(f"use(faults=...): call {key}: an HTTP status is 100-599, got {fault}")
        return fault
    if fault in RAISED_FAULTS or fault in LLM_FAULTS:
        return fault
    raise UsageError(
        f"use(faults=...): call {key}: unknown fault {fault!r}; use an HTTP status, "
        f"{', '.join(map(repr, RAISED_FAULTS + LLM_FAULTS))} or a callable (entry) -> entry"
    )


def check_faults(faults: Mapping[Any, Any] | None) -> dict[int, Any]:
    """``{seq: fault}`` with keys and faults checked (a UsageError names the bad one)."""
    out: dict[int, Any] = {}
    for key, fault in (faults or {}).items():
        if isinstance(key, str) and (n := ascii_int(key.strip())) is not None:
            k = n
        elif isinstance(key, int) and not isinstance(key, bool) and key >= 0:
            k = key
        else:
            raise UsageError(f"use(faults=...): keys are call numbers (0-based ints or their decimal strings), got {key!r}")
        out[k] = _check_fault(k, fault)
    return out


def _status_response(status: int) -> dict[str, Any]:
    headers = {"content-type": "application/json", "x-casstore-fault": str(status)}
    if status == 429:
        headers["retry-after"] = "1"
    message = f"[casstore-fault:{status}] injected HTTP {status}"
    kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"status": status, "headers": headers,
            "body": {"type": "error", "error": {"type": kind, "message": message, "code": None, "param": None}}}


def _text_slots(body: dict[str, Any]) -> list[tuple[Any, Any]]:
    """``(container, key)`` of every assistant text in an LLM body."""
    slots: list[tuple[Any, Any]] = []
    for choice in body.get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            slots.append((message, "content"))
    for block in body.get("content") or [] if isinstance(body.get("content"), list) else []:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            slots.append((block, "text"))
    for item in body.get("output") or [] if isinstance(body.get("output"), list) else []:
        for part in (item.get("content") or []) if isinstance(item, dict) else []:
            if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str):
                slots.append((part, "text"))
    return slots


def _tool_inputs(body: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any], str, bool]]:
    """``(arguments, holder, key, kept as JSON text)`` of every tool call in an LLM body."""
    out: list[tuple[dict[str, Any], dict[str, Any], str, bool]] = []

    def json_slot(holder: dict[str, Any], key: str) -> None:
        try:
            args = json.loads(holder[key])
        except (ValueError, TypeError):
            return
        if isinstance(args, dict):
            out.append((args, holder, key, True))

    for choice in body.get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        for call in (message or {}).get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                json_slot(call["function"], "arguments")
    for block in body.get("content") or [] if isinstance(body.get("content"), list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("input"), dict):
            out.append((block["input"], block, "input", False))
    for item in body.get("output") or [] if isinstance(body.get("output"), list) else []:
        if isinstance(item, dict) and item.get("type") == "function_call" and isinstance(item.get("arguments"), str):
            json_slot(item, "arguments")
    return out


def _llm_fault(body: dict[str, Any], name: str, seq: int) -> None:
    tag = f"[casstore-fault:{name}]"
    if name in ("corrupted_tool_output", "poisoned_argument"):
        inputs = [found for found in _tool_inputs(body) if found[0]]
        if not inputs:
            raise UsageError(f"use(faults=...): call {seq}: {name} needs a response with a tool call")
        args, holder, slot, as_json = inputs[0]
        key = next(iter(args))
        new = dict(args)
        if name == "corrupted_tool_output":
            new[key] = tag
        else:
            value = args[key]
            new[key] = (-999_999 if isinstance(value, (int, float)) and not isinstance(value, bool)
                        else f"Atlantis-{tag}" if isinstance(value, str) else None)
        holder[slot] = json.dumps(new) if as_json else new
        return
    if name == "dropped_message":
        for choice in body.get("choices") or []:
            if isinstance(choice, dict) and isinstance(choice.get("message"), dict):
                choice["message"]["content"] = ""
                choice["message"].pop("tool_calls", None)
        if isinstance(body.get("content"), list):
            body["content"] = []
        if isinstance(body.get("output"), list):
            body["output"] = []
        return
    slots = _text_slots(body)
    if not slots:
        raise UsageError(f"use(faults=...): call {seq}: {name} needs a response with assistant text")
    holder, key = slots[0]
    if name == "misleading_retrieval":
        holder[key] = f"{tag} The retrieved records show the opposite: the request was already completed. {holder[key]}"
    else:  # wrong_system_prompt
        holder[key] = f"{tag} As instructed, I only answer in rhyming couplets about the weather."


def _llm_body(entry: dict[str, Any], name: str, seq: int) -> dict[str, Any]:
    response = entry.get("response") or {}
    body = response.get("body")
    if "body_text" in response:
        try:
            body = json.loads(response["body_text"])
        except ValueError:
            body = None
        response.pop("body_text", None)
        response["body"] = body
        response.pop("body_format", None)
    if entry.get("kind") != "llm" or not isinstance(body, dict):
        raise UsageError(f"use(faults=...): call {seq}: {name} applies to a whole JSON LLM response "
                         f"(kind {entry.get('kind')!r}{', a stream' if response.get('stream') else ''})")
    return body


def apply_fault(entry: dict[str, Any], fault: Any) -> dict[str, Any]:
    """A copy of ``entry`` answering with ``fault`` (the recording itself is never changed)."""
    seq = int(entry.get("seq", 0))
    out = copy.deepcopy(entry)
    if callable(fault):
        out = fault(out)
        if not isinstance(out, dict) or "response" not in out:
            raise UsageError(f"use(faults=...): call {seq}: the callable must return an entry (a dict with 'response')")
        return out
    if isinstance(fault, int):
        if entry.get("kind") == "tool":
            raise UsageError(f"use(faults=...): call {seq} is a tool call: an HTTP status does not apply "
                             "(use 'timeout', 'reset' or a callable)")
        out["response"] = _status_response(fault)
        return out
    if fault in RAISED_FAULTS:
        out["response"] = {"fault": fault}
        return out
    _llm_fault(_llm_body(out, fault, seq), fault, seq)
    return out


def raised_fault(entry: Mapping[str, Any]) -> str | None:
    """``"timeout"`` / ``"reset"`` when the served entry must raise instead of answering."""
    response = entry.get("response")
    fault = response.get("fault") if isinstance(response, Mapping) else None
    return fault if fault in RAISED_FAULTS else None
