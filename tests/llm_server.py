"""Moved to ``tests/helpers/llm_server.py``; this re-export keeps old imports working."""

from tests.helpers.llm_server import LLMServer

__all__ = ["LLMServer"]
