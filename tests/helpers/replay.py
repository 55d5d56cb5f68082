"""Shared by the client adapter tests: record a run, then replay it offline.

Used by ``tests/replay/test_replay_{urllib3,httpclient,aiohttp,bedrock}.py``. The stub server keeps
running during the replay, so its request count proves replay sent nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pytest

import casstore

__all__ = ["record_then_replay", "Counted"]


class Counted(Protocol):
    @property
    def count(self) -> int: ...


def record_then_replay(
    name: str, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch, server: Counted, run: Callable[[], Any]
) -> tuple[Any, Any]:
    """``(live result, replayed result)``: ``run`` once recording, once under CASSTORE_OFFLINE=1."""
    with casstore.use(name, mode="record", cassette_dir=cassette_dir) as recording:
        live = run()
    assert recording.live > 0 and recording.written
    sent = server.count
    assert sent == recording.live
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with casstore.use(name, mode="replay", cassette_dir=cassette_dir) as replay:
        replayed = run()
    monkeypatch.delenv("CASSTORE_OFFLINE")
    assert server.count == sent, "replay reached the server"
    assert replay.served == recording.live and replay.live == 0
    return live, replayed
