"""The assistant text of an LLM response, whole or streamed, and the built-in drift scorer
(pure): it sees shared words, not meaning (``use(scorer=...)`` takes a meaning-aware one)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from .recording import response_json_values

__all__ = ["llm_text", "text_similarity"]

_WORD = re.compile(r"\w+")


def text_similarity(recorded: str, live: str) -> float:
    """Cosine similarity of word counts: 1.0 same words, 0.0 none shared."""
    a, b = Counter(_WORD.findall(recorded.lower())), Counter(_WORD.findall(live.lower()))
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    dot = sum(n * b[w] for w, n in a.items() if w in b)
    return dot / (math.sqrt(sum(n * n for n in a.values())) * math.sqrt(sum(n * n for n in b.values())))


def _texts(value: Any, out: list[str]) -> None:
    if not isinstance(value, Mapping):
        return
    for choice in value.get("choices") or []:
        if isinstance(choice, Mapping):
            for key in ("message", "delta"):
                part = choice.get(key)
                if isinstance(part, Mapping) and isinstance(part.get("content"), str):
                    out.append(part["content"])
            if isinstance(choice.get("text"), str):
                out.append(choice["text"])
    content = value.get("content")
    if isinstance(content, list):
        out.extend(b["text"] for b in content if isinstance(b, Mapping) and isinstance(b.get("text"), str))
    delta = value.get("delta")
    if isinstance(delta, Mapping) and isinstance(delta.get("text"), str):  # anthropic text_delta
        out.append(delta["text"])
    elif isinstance(delta, str) and str(value.get("type", "")).endswith("output_text.delta"):
        out.append(delta)
    for item in value.get("output") or [] if isinstance(value.get("output"), list) else []:
        for part in (item.get("content") or []) if isinstance(item, Mapping) else []:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                out.append(part["text"])
    message = (value.get("output") or {}).get("message") if isinstance(value.get("output"), Mapping) else None
    if isinstance(message, Mapping):
        _texts(message, out)
    for cand in value.get("candidates") or []:
        parts = ((cand.get("content") or {}).get("parts") or []) if isinstance(cand, Mapping) else []
        out.extend(p["text"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str))


def llm_text(record: Mapping[str, Any]) -> str | None:
    """The assistant text of a response record, or ``None`` when it holds none."""
    values = response_json_values(record)
    out: list[str] = []
    for value in values if record.get("stream") and isinstance(values, list) else [values]:
        _texts(value, out)
    return "".join(out) if out else None
