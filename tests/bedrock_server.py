"""Moved to ``tests/helpers/bedrock_server.py``; this re-export keeps old imports working."""

from tests.helpers.bedrock_server import BedrockServer, frame

__all__ = ["BedrockServer", "frame"]
