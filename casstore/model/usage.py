"""Tokens spent, read from the usage fields of recorded responses (pure), whole or streamed:
a later value of a field replaces the earlier; cache reads and writes count as input."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .recording import response_json_values

__all__ = ["Usage", "response_usage", "total_usage"]

_INPUT = ("prompt_tokens", "input_tokens", "inputTokens", "promptTokenCount",
          "cache_creation_input_tokens", "cache_read_input_tokens")
_OUTPUT = ("completion_tokens", "output_tokens", "outputTokens", "candidatesTokenCount")


class Usage(tuple[int, int]):
    """``(input tokens, output tokens)``."""

    @property
    def input(self) -> int:
        return self[0]

    @property
    def output(self) -> int:
        return self[1]

    @property
    def total(self) -> int:
        return self[0] + self[1]


def _counts(usage: Any) -> dict[str, int]:
    if not isinstance(usage, Mapping):
        return {}
    return {k: int(v) for k, v in usage.items()
            if k in _INPUT + _OUTPUT and isinstance(v, (int, float)) and not isinstance(v, bool)}


def _usages(value: Any) -> Iterable[Any]:
    """Every usage object in one JSON value (a body, or one stream event)."""
    if not isinstance(value, Mapping):
        return
    for key in ("usage", "usageMetadata"):
        if key in value:
            yield value[key]
    message = value.get("message")
    if isinstance(message, Mapping) and "usage" in message:  # anthropic message_start
        yield message["usage"]
    response = value.get("response")
    if isinstance(response, Mapping) and "usage" in response:  # openai responses stream
        yield response["usage"]


def _event_values(record: Mapping[str, Any]) -> list[Any]:
    chunks = record.get("chunks")
    if record.get("stream") and isinstance(chunks, list) and any(isinstance(c, Mapping) for c in chunks):
        values = []
        for chunk in chunks:  # AWS event-stream messages: their payload text
            payload = (chunk.get("eventstream") or {}).get("payload") if isinstance(chunk, Mapping) else None
            if isinstance(payload, str):
                try:
                    values.append(json.loads(payload))
                except ValueError:
                    continue
        return values
    values = response_json_values(record)
    return values if record.get("stream") else [values]


def response_usage(record: Mapping[str, Any]) -> Usage | None:
    """The tokens one response record reports spending, or ``None`` when it says nothing."""
    fields: dict[str, int] = {}
    for value in _event_values(record):
        for usage in _usages(value):
            fields.update(_counts(usage))  # a later stream event's count replaces an earlier one
    if not fields:
        return None
    return Usage((sum(fields.get(k, 0) for k in _INPUT), sum(fields.get(k, 0) for k in _OUTPUT)))


def total_usage(responses: Iterable[Mapping[str, Any]]) -> tuple[Usage, int]:
    """``(summed usage, how many responses reported usage)``."""
    inp = out = n = 0
    for record in responses:
        usage = response_usage(record)
        if usage is not None:
            inp, out, n = inp + usage.input, out + usage.output, n + 1
    return Usage((inp, out)), n
