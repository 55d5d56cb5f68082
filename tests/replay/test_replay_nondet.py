"""use(deterministic=True): time, datetime, uuid and random draws recorded and replayed."""

from __future__ import annotations

import datetime
import json
import random
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import openai
import pytest

import casstore
from casstore.errors import DrawMiss, NotAllPlayed
from tests.helpers.llm_server import LLMServer


def _agent(server: LLMServer, key: str) -> dict[str, Any]:
    """Code under test that draws: ids, timestamps and random choices, one of them sent to the LLM."""
    out: dict[str, Any] = {
        "time": time.time(),
        "time_ns": time.time_ns(),
        "uuid4": uuid.uuid4(),
        "uuid1": uuid.uuid1(),
        "random": random.random(),
        "randint": random.randint(1, 10**12),
        "choice": random.choice(["a", "b", "c", "d", "e", "f", "g"]),
        "sample": random.sample(range(1000), 5),
        "bytes": random.randbytes(40),
        "now": datetime.datetime.now(),
        "now_utc": datetime.datetime.now(datetime.timezone.utc),
        "utcnow": datetime.datetime.utcnow(),
        "today": datetime.date.today(),
    }
    deck = list(range(20))
    random.shuffle(deck)
    out["deck"] = deck
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)
    reply = client.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": f"session {out['uuid4']} at {out['time']}"}]
    )
    out["reply"] = reply.choices[0].message.content
    return out


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # datetime.utcnow()
def test_time_uuid_random_and_datetime_replay_identically(cassette_dir: Path, llm_server: LLMServer, fake_key: str) -> None:
    real_time, real_datetime = time.time, datetime.datetime
    with casstore.use("draws", mode="record", cassette_dir=cassette_dir, deterministic=True):
        recorded = _agent(llm_server, fake_key)
    assert time.time is real_time and datetime.datetime is real_datetime  # restored at exit
    kinds = {d["kind"] for d in json.loads((cassette_dir / "draws.json").read_text())["meta"]["draws"]}
    assert {"time.time", "time.time_ns", "uuid.uuid4", "uuid.uuid1", "random.random", "random.getrandbits",
            "datetime.now", "datetime.utcnow", "date.today"} <= kinds
    time.sleep(0.01)
    calls = llm_server.count
    with casstore.use("draws", mode="replay", cassette_dir=cassette_dir, deterministic=True, all_played=True):
        replayed = _agent(llm_server, fake_key)
    assert replayed == recorded  # the request carried a uuid and a time: the identity matched too
    assert llm_server.count == calls
    assert isinstance(replayed["now"], datetime.datetime) and isinstance(replayed["today"], datetime.date)
    assert replayed["now_utc"].tzinfo is datetime.timezone.utc
    with casstore.use("draws", mode="replay", cassette_dir=cassette_dir):  # not deterministic: real draws
        assert time.time() != recorded["time"]


def test_more_draws_than_recorded_fail_clearly_and_fewer_fail_all_played(cassette_dir: Path) -> None:
    with casstore.use("few", mode="record", cassette_dir=cassette_dir, deterministic=True):
        first = uuid.uuid4()
    with casstore.use("few", mode="replay", cassette_dir=cassette_dir, deterministic=True):
        assert uuid.uuid4() == first
        with pytest.raises(DrawMiss, match=r"uuid.uuid4 draw #2 but the recording holds 1"):
            uuid.uuid4()
    with pytest.raises(NotAllPlayed, match=r"1 x uuid.uuid4") as info:
        with casstore.use("few", mode="replay", cassette_dir=cassette_dir, deterministic=True, all_played=True):
            pass
    assert info.value.draws == {"uuid.uuid4": 1}


def test_record_new_keeps_the_recorded_draws_and_records_the_rest(cassette_dir: Path) -> None:
    with casstore.use("grow", mode="record", cassette_dir=cassette_dir, deterministic=True):
        first = random.random()
    lookup = casstore.tool("lookup", lambda n: n * 2)
    with casstore.use("grow", mode="record-new", cassette_dir=cassette_dir, deterministic=True):
        assert random.random() == first
        second = random.random()
        lookup(1)  # a new entry, so the cassette is written
    with casstore.use("grow", mode="replay", cassette_dir=cassette_dir, deterministic=True, all_played=True):
        assert (random.random(), random.random()) == (first, second)
        lookup(1)


def test_only_the_blocks_own_context_draws(cassette_dir: Path) -> None:
    with casstore.use("ctx", mode="record", cassette_dir=cassette_dir, deterministic=True):
        recorded = time.time()
    time.sleep(0.02)
    seen: list[float] = []
    go = threading.Event()

    def outside() -> None:  # a thread started outside the block: not the block's
        go.wait(30)
        seen.append(time.time())

    worker = threading.Thread(target=outside)
    worker.start()
    with casstore.use("ctx", mode="replay", cassette_dir=cassette_dir, deterministic=True):
        go.set()
        worker.join()
        assert time.time() == recorded
    assert seen and seen[0] > recorded
    lookup = casstore.tool("stamp", lambda: time.time())
    with casstore.use("tool", mode="record", cassette_dir=cassette_dir, deterministic=True):
        stamped = lookup()  # a tool running live draws for real: replay will not run it
    assert "draws" not in json.loads((cassette_dir / "tool.json").read_text())["meta"] or not \
        json.loads((cassette_dir / "tool.json").read_text())["meta"]["draws"]
    with casstore.use("tool", mode="replay", cassette_dir=cassette_dir, deterministic=True, all_played=True):
        assert lookup() == stamped
