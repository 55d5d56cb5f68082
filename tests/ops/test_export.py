"""``casstore export``: readable copies of a pinned cassette.

``--format json`` is the working copy byte for byte; ``--format vcr`` is a cassette the
real vcrpy replays, with the bodies casstore serves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import vcr
import yaml

import casstore as cs
from tests.helpers.llm_server import LLMServer

pytestmark = pytest.mark.usefixtures("replay_env")


def _calls(url: str) -> list[Any]:
    out: list[Any] = []

    def keep(r: Any) -> None:
        out.append((r.status_code, r.headers.get("content-type"), r.content))

    keep(requests.post(url + "/echo?a=1", json={"q": "hi"}, timeout=5))
    keep(requests.get(url + "/gzip", timeout=5))
    keep(requests.post(url + "/bytes", data=b"\x00\x01 raw", timeout=5))
    with httpx.Client(timeout=5) as client:
        keep(client.post(url + "/v1/chat/completions",
                         json={"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}))
        keep(client.post(url + "/v1/chat/completions",
                         json={"model": "gpt-test", "stream": True, "messages": [{"role": "user", "content": "go"}]}))
        keep(client.get(url + "/text"))
        keep(client.get(url + "/text"))  # same request twice: answers in recorded order
        keep(client.get(url + "/status/404"))
    return out


@pytest.fixture
def pinned(repo: Path, casstore: Any) -> tuple[Path, list[Any], LLMServer]:
    """A cassette recorded by casstore itself (HTTP calls and one tool call), pinned."""
    server = LLMServer().start()
    try:
        with cs.use("recorded", mode="record"):
            live = _calls(server.url)
            cs.tool("add", lambda a, b: a + b)(2, 3)
    finally:
        server.stop()
    r = casstore("add", "tests/cassettes/recorded.json", cwd=repo)
    assert r.exit_code == 0, r.stderr
    return repo, live, server


def test_export_json_is_the_working_copy(pinned: tuple[Path, list[Any], LLMServer], casstore: Any, tmp_path: Path) -> None:
    repo, _, _ = pinned
    working = (repo / "tests" / "cassettes" / "recorded.json").read_bytes()
    r = casstore("export", "recorded", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.encode() == working
    (repo / "tests" / "cassettes" / "recorded.json").unlink()  # from the pinned object alone
    out = tmp_path / "copy.json"
    r = casstore("export", "recorded", "--format", "json", "-o", str(out), cwd=repo)
    assert r.exit_code == 0 and out.read_bytes() == working


def test_export_vcr_replays_in_vcrpy(pinned: tuple[Path, list[Any], LLMServer], casstore: Any, tmp_path: Path) -> None:
    repo, live, server = pinned
    out = tmp_path / "exported.yaml"
    r = casstore("export", "recorded", "--format", "vcr", "-o", str(out), cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert "left out 1 tool/non-HTTP entry" in r.stderr
    data = yaml.safe_load(out.read_text())
    assert data["version"] == 1 and len(data["interactions"]) == len(live)
    count = server.count
    # the real vcrpy, with the server stopped: record_mode none never touches the network
    with vcr.VCR(record_mode="none").use_cassette(str(out)) as cassette:
        replayed = _calls(server.url)
        assert cassette.all_played
    assert replayed == live
    assert server.count == count


def test_export_vcr_round_trips_through_import(
    pinned: tuple[Path, list[Any], LLMServer], casstore: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, live, server = pinned
    out = tmp_path / "again.yaml"
    assert casstore("export", "recorded", "--format", "vcr", "-o", str(out), cwd=repo).exit_code == 0
    r = casstore("import", "vcr", str(out), cwd=repo)
    assert r.exit_code == 0, r.stderr
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with cs.use("again", mode="replay"):
        assert _calls(server.url) == live


def test_export_errors(repo: Path, casstore: Any) -> None:
    r = casstore("export", "nothing-here", cwd=repo)
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    assert "'nothing-here' is not pinned in casstore.lock" in r.stderr and "no working copy" in r.stderr
    r = casstore("export", "../etc/passwd", cwd=repo)
    assert r.exit_code == 2 and "invalid cassette name" in r.stderr
    r = casstore("export", "x", "--format", "har", cwd=repo)
    assert r.exit_code == 2
