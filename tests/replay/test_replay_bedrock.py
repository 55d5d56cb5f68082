"""Amazon Bedrock through boto3 (urllib3 underneath): converse and converse_stream.

The stub speaks Bedrock's wire format, binary event stream included; SigV4 signs every
request with the time and the key, so the replay runs with other credentials.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import urllib3

import casstore
from tests.helpers.bedrock_server import BedrockServer
from tests.helpers.replay import record_then_replay

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"


@pytest.fixture
def bedrock() -> Iterator[BedrockServer]:
    with BedrockServer() as server:
        yield server


def _credentials(letter: str) -> dict[str, str]:
    """Obviously fake, built at run time; every part differs between two letters."""
    return {
        "aws_access_key_id": "AKIA" + letter * 16,
        "aws_secret_access_key": letter.lower() * 40,
        "aws_session_token": "FwoGZXIvYXdzE" + letter * 80,
    }


def _client(server: BedrockServer, letter: str) -> Any:
    return boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=server.url, **_credentials(letter))


def _ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"text": text}]}]


def test_converse_and_stream_replay_with_other_credentials(cassette_dir: Path, bedrock: BedrockServer, monkeypatch: pytest.MonkeyPatch) -> None:
    letters = iter("QZ")

    def run() -> list[Any]:
        client = _client(bedrock, next(letters))
        answer = client.converse(modelId=MODEL, messages=_ask("hello bedrock"), inferenceConfig={"temperature": 0.2})
        stream = client.converse_stream(modelId=MODEL, messages=_ask("stream please"))
        events = [event for event in stream["stream"]]
        return [answer["output"], answer["usage"], answer["stopReason"], events]

    live, replayed = record_then_replay("bedrock", cassette_dir, monkeypatch, bedrock, run)
    assert replayed == live
    assert live[0]["message"]["content"][0]["text"] == f"bedrock#1 {MODEL}: hello bedrock"
    kinds = [next(iter(e)) for e in live[3]]
    assert kinds[0] == "messageStart" and kinds[-3:] == ["contentBlockStop", "messageStop", "metadata"]
    text = "".join(e["contentBlockDelta"]["delta"]["text"] for e in live[3] if "contentBlockDelta" in e)
    assert text == f"bedrock#2 {MODEL}: stream please"

    # the recording holds one readable chunk per event-stream message, and no credential
    cassette = (cassette_dir / "bedrock.json").read_text()
    entries = json.loads(cassette)["entries"]
    assert len(entries[1]["response"]["chunks"]) == len(live[3])
    assert entries[1]["response"]["chunks"][0]["eventstream"]["headers"][0] == [":event-type", "messageStart"]
    signed = bedrock.seen[0][2]
    assert "Credential=AKIAQ" in signed["Authorization"]  # the stub saw a real SigV4 request
    for secret in (*_credentials("Q").values(), signed["Authorization"].rsplit("Signature=", 1)[1]):
        assert secret not in cassette
        assert secret[4:20] not in cassette


def test_event_stream_is_served_one_message_at_a_time(cassette_dir: Path, bedrock: BedrockServer, monkeypatch: pytest.MonkeyPatch) -> None:
    url = bedrock.url + "/model/m1/converse-stream"
    body = json.dumps({"messages": _ask("chunks")}).encode()

    def run() -> list[bytes]:
        r = urllib3.PoolManager().request("POST", url, body=body, headers={"content-type": "application/json"}, preload_content=False)
        return list(r.stream())

    live, replayed = record_then_replay("bedrock_chunks", cassette_dir, monkeypatch, bedrock, run)
    assert b"".join(replayed) == b"".join(live)
    sizes = [int.from_bytes(chunk[:4], "big") for chunk in replayed]
    assert sizes == [len(chunk) for chunk in replayed] and len(replayed) > 5  # each chunk one whole message


def test_a_miss_reaches_the_test_as_cassette_miss(cassette_dir: Path, bedrock: BedrockServer) -> None:
    with casstore.use("bedrock_miss", mode="replay", cassette_dir=cassette_dir):
        with pytest.raises(casstore.CassetteMiss, match="converse"):
            _client(bedrock, "Q").converse(modelId=MODEL, messages=_ask("never recorded"))
    assert bedrock.count == 0


def test_drift_compares_event_stream_payloads(cassette_dir: Path, bedrock: BedrockServer) -> None:
    def ask() -> None:
        stream = _client(bedrock, "Q").converse_stream(modelId=MODEL, messages=_ask("same question"))
        for _ in stream["stream"]:
            pass

    with casstore.use("bedrock_drift", mode="record", cassette_dir=cassette_dir):
        ask()
    with pytest.warns(casstore.DriftWarning), casstore.use("bedrock_drift", mode="drift", cassette_dir=cassette_dir) as session:
        ask()
    assert [item.status for item in session.drift] == ["changed"]
    # event-stream payloads are compared as JSON, event by event: only the request number moved
    assert session.drift[0].differences == ('body[2].payload.delta.text: "1 anthro" → "2 anthro"',)
