"""One chat call to the fake provider, the way tests make it (through a real client)."""

from __future__ import annotations

from typing import Any

from tests.helpers.llm_server import LLMServer

__all__ = ["openai_chat", "requests_chat"]


def openai_chat(server: LLMServer, key: str, text: str) -> str:
    """The answer text of one chat completion through the OpenAI SDK."""
    import openai

    client = openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)
    out = client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": text}])
    return out.choices[0].message.content or ""


def requests_chat(server: LLMServer, q: str, **extra: Any) -> dict[str, Any]:
    """The JSON answer of one chat completion through requests (``extra``: more body fields)."""
    import requests

    r = requests.post(server.url + "/v1/chat/completions",
                      json={"model": "gpt-test", "messages": [{"role": "user", "content": q}], **extra}, timeout=5)
    r.raise_for_status()
    data: dict[str, Any] = r.json()
    return data
