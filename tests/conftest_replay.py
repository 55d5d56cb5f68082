"""Fixtures for the replay library tests: the fake LLM provider and a clean mode setup.

Imported from ``tests/conftest.py``. Nothing here reaches beyond 127.0.0.1; API keys are
obviously fake and built at run time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm_server import LLMServer

__all__ = ["llm_server", "fake_key", "replay_env", "cassette_dir"]


@pytest.fixture
def llm_server() -> Iterator[LLMServer]:
    """A running fake OpenAI/Anthropic server on 127.0.0.1 (stopped at teardown)."""
    server = LLMServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fake_key() -> str:
    """An ``sk-``-shaped key that is obviously fake (built at run time, never a literal).

    Random-looking on purpose: redaction ignores ``sk-testtest…``-style placeholders.
    """
    return "sk-" + "fakeT3st" + hashlib.sha256(b"casstore fake key").hexdigest()[:32]


@pytest.fixture
def replay_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No mode from the environment, pytest options or CI: each test says what it wants."""
    from casstore.replay import api as replay
    from casstore.replay.context import CURRENT

    for var in ("CASSTORE_MODE", "CASSTORE_OFFLINE", "CI"):
        monkeypatch.delenv(var, raising=False)
    saved = replay._forced_mode
    replay._forced_mode = None
    try:
        yield
    finally:
        replay._forced_mode = saved
        assert CURRENT.get() is None, "a use() block leaked out of the test"


@pytest.fixture
def cassette_dir(tmp_path: Path, replay_env: None) -> Path:
    """A private cassette dir (so no test writes into the repository)."""
    d = tmp_path / "cassettes"
    d.mkdir()
    return d
