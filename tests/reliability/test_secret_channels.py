"""No secret reaches the store, through any field or channel (issue #16, item 1).

An attacker's view: fake secrets (built at run time) are sent through every channel a
recording has -- a query value under a neutral name, a header with a neutral name, a JSON
body, a streamed (SSE) answer that splits the secret across chunks, tool arguments and
results, an exception's text, and a project's own ``[redaction] patterns`` rule -- by the
real clients (httpx, requests, the OpenAI SDK) against the loopback stub, and through
``casstore import vcr``. Then none of them may appear in the working copy, the pinned
object in the cache, the object pushed to S3 (moto on loopback), or what ``show``,
``export``, ``diff`` and a replay miss print. Streams are checked as an attacker reads
them: the text of every event joined, not chunk by chunk.
"""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard

from tests.helpers.commands import git
from tests.helpers.fakes import rnd
from tests.helpers.figures import record

SECTION = "secrets, every channel (attacker)"

CUSTOM_RULE = r"CUST-[0-9]{10}"


def fake_secrets() -> dict[str, str]:
    """One fake credential per rule, built at run time."""
    return {
        "openai": "sk-" + "proj-" + rnd(48),
        "github": "gh" + "p_" + rnd(36),
        "aws": "AK" + "IA" + rnd(16, string.ascii_uppercase + string.digits),
        "openai2": "sk-" + "proj-" + rnd(48),
        "github2": "gh" + "p_" + rnd(36),
        "custom": "CUST-" + "".join(secrets.choice(string.digits) for _ in range(10)),
    }


# -- what an attacker reads --------------------------------------------------------------------
def _stream_texts(doc: Any) -> Iterator[str]:
    """For every recorded stream: the text of its events joined, per JSON path (deltas)."""
    if isinstance(doc, dict):
        if doc.get("stream") and isinstance(doc.get("chunks"), list):
            joined: dict[str, list[str]] = {}
            for chunk in doc["chunks"]:
                if not isinstance(chunk, str):
                    continue
                for line in chunk.splitlines():
                    if not line.startswith("data:"):
                        continue
                    try:
                        event = json.loads(line[5:].strip())
                    except ValueError:
                        continue
                    for path, text in _leaves(event, "$"):
                        joined.setdefault(path, []).append(text)
            yield "".join(chunk for chunk in doc["chunks"] if isinstance(chunk, str))
            yield from ("".join(parts) for parts in joined.values())
        for v in doc.values():
            yield from _stream_texts(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _stream_texts(v)


def _leaves(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")
    elif isinstance(value, str):
        yield path, value


def readable(data: bytes | str) -> list[str]:
    """The text of a file or object, decompressed and with its streams joined."""
    if isinstance(data, bytes):
        if data[:4] == b"\x28\xb5\x2f\xfd":  # a zstd frame
            data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
        text = data.decode("utf-8", "replace")
    else:
        text = data
    out = [text]
    try:
        out += list(_stream_texts(json.loads(text)))
    except ValueError:
        pass
    return out


def leaked(where: str, data: bytes | str, fakes: dict[str, str]) -> list[str]:
    found = [f"{name} in {where}" for name, s in fakes.items() for t in readable(data) if s in t]
    record(SECTION, places_searched=1, leaks=len(found))
    return found


def files_under(root: Path) -> Iterator[Path]:
    if root.is_dir():
        yield from (p for p in sorted(root.rglob("*")) if p.is_file())


def bucket_objects(s3_server, s3_url: str) -> dict[str, bytes]:  # type: ignore[no-untyped-def]
    bucket, prefix = s3_url[len("s3://"):].split("/", 1)
    s3 = s3_server.client()
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            out[obj["Key"]] = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
    return out


# -- the project -------------------------------------------------------------------------------
@pytest.fixture
def project(tmp_path: Path, casstore, s3_url: str, monkeypatch) -> Path:  # type: ignore[no-untyped-def]
    root = tmp_path / "work"
    root.mkdir()
    git("init", "-q", cwd=root)
    assert casstore("init", "--remote", s3_url, cwd=root).exit_code == 0
    cfg = root / "casstore.toml"
    cfg.write_text(cfg.read_text() + f"\n[redaction]\npatterns = [{json.dumps(CUSTOM_RULE)}]\n")
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "casstore set up", cwd=root)
    monkeypatch.chdir(root)
    for var in ("CASSTORE_MODE", "CASSTORE_OFFLINE", "CI"):
        monkeypatch.delenv(var, raising=False)
    return root


def record_every_channel(llm_server, fakes: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    import httpx
    import openai
    import requests

    import casstore as cs

    def lookup(q: str, note: str = "") -> dict[str, str]:
        return {"found": f"row for {q}", "note": note}

    def explode(n: int) -> None:
        raise ValueError(f"upstream refused credential {fakes['github2']} for call {n}")

    with cs.use("leaky", mode="record"):
        # query values under neutral names, and a custom pattern in the query
        httpx.get(f"{llm_server.url}/echo", params={"q": fakes["openai"], "gh": fakes["github"],
                                                      "a": fakes["aws"], "ref": fakes["custom"]})
        # a header with a neutral name, and a JSON body
        requests.post(f"{llm_server.url}/echo", headers={"x-trace": fakes["openai2"]},
                      json={"note": fakes["github"], "ticket": fakes["custom"]}, timeout=10)
        # an SSE stream whose chunks split the secret (the stub answers in 7-character deltas)
        client = openai.OpenAI(base_url=llm_server.url + "/v1", api_key="sk-" + "fake" + rnd(30), max_retries=0)
        stream = client.chat.completions.create(
            model="gpt-test", stream=True,
            messages=[{"role": "user", "content": f"repeat {fakes['aws']} and {fakes['openai2']}"}])
        assert fakes["aws"] in "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        # tool arguments, results and an exception's text
        assert cs.tool("lookup", lookup)(fakes["github2"], note=fakes["custom"])["note"] == fakes["custom"]
        with pytest.raises(ValueError):
            cs.tool("explode", explode)(7)


def test_no_channel_leaks_into_the_copy_the_cache_the_bucket_or_any_output(
        project: Path, casstore, llm_server, s3_server, s3_url: str, isolated_user: Path) -> None:  # type: ignore[no-untyped-def]
    fakes = fake_secrets()
    record_every_channel(llm_server, fakes)
    record(SECTION, fake_secrets=len(fakes), calls_recorded=5)
    sent = "".join(repr(s) for s in llm_server.seen)
    assert all(s in sent for s in (fakes["openai"], fakes["github"], fakes["aws"], fakes["openai2"])), \
        "the secrets did not reach the stub: the test would prove nothing"

    wc = project / "tests" / "cassettes" / "leaky.json"
    problems = leaked("the working copy", wc.read_bytes(), fakes)
    doc = json.loads(wc.read_text())
    hits = doc["redaction"]["hits"]
    assert hits.get(f"pattern:{CUSTOM_RULE}", 0) >= 2, hits

    r = casstore("add", str(wc))
    assert r.exit_code == 0, r.stdout + r.stderr
    r = casstore("push")
    assert r.exit_code == 0, r.stdout + r.stderr
    for p in files_under(isolated_user / "cache"):
        problems += leaked(f"cache {p.name}", p.read_bytes(), fakes)
    stored = bucket_objects(s3_server, s3_url)
    assert any("/objects/" in k for k in stored)
    for key, data in stored.items():
        problems += leaked(f"bucket {key}", data, fakes)

    outputs = {
        "show": casstore("show", "leaky"),
        "show --json": casstore("show", "--json", "leaky"),
        "export": casstore("export", "leaky"),
        "export --format vcr": casstore("export", "--format", "vcr", "leaky"),
        "diff": casstore("diff"),
        "diff --json": casstore("diff", "--json"),
        "check": casstore("check"),
        "ls --json": casstore("ls", "--json"),
    }
    for what, res in outputs.items():
        assert res.exit_code == 0, (what, res.stdout, res.stderr)
        problems += leaked(what, res.stdout + res.stderr, fakes)
    assert "GET http://127.0.0.1" in outputs["show"].stdout  # the calls are listed, only masked
    assert not problems, problems


def test_replay_miss_and_drift_messages_never_print_a_secret(project: Path, casstore, llm_server,  # type: ignore[no-untyped-def]
                                                             monkeypatch) -> None:
    import httpx

    import casstore as cs

    fakes = fake_secrets()
    record_every_channel(llm_server, fakes)
    before = llm_server.count
    with pytest.raises(cs.CassetteMiss) as info, cs.use("leaky", mode="replay"):
        # the same target with a new neutral parameter: the closest entry is shown
        httpx.get(f"{llm_server.url}/echo", params={"q": fakes["openai"], "gh": fakes["github"],
                                                      "a": fakes["aws"], "ref": fakes["custom"], "page": "2"})
    assert llm_server.count == before
    text = str(info.value) + repr(info.value.target) + repr(info.value.closest) + repr(info.value.differences)
    assert "/echo" in text
    assert not leaked("the miss", text, fakes)

    with pytest.warns(cs.DriftWarning) as warned, cs.use("leaky", mode="drift"):
        httpx.get(f"{llm_server.url}/echo", params={"q": fakes["openai"], "other": fakes["github2"]})
    report = "\n".join(str(w.message) for w in warned)
    assert "/echo" in report
    assert not leaked("the drift report", report, fakes)

    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with pytest.raises(cs.LiveCallBlocked) as blocked, cs.use("leaky", mode="record-new"):
        httpx.get(f"{llm_server.url}/echo", params={"q": fakes["openai"], "new": "1"})
    assert "/echo" in str(blocked.value)
    assert not leaked("the offline refusal", str(blocked.value), fakes)


def _vcr_file(path: Path, fakes: dict[str, str]) -> None:
    import yaml

    doc = {"version": 1, "interactions": [{
        "request": {
            "method": "POST",
            "uri": f"https://api.example.test/v1/things?q={fakes['openai']}&a={fakes['aws']}&ref={fakes['custom']}",
            "headers": {"Content-Type": ["application/json"], "X-Trace": [fakes["openai2"]]},
            "body": json.dumps({"note": fakes["github"]}),
        },
        "response": {
            "status": {"code": 500, "message": "Internal Server Error"},
            "headers": {"Content-Type": ["application/json"]},
            "body": {"string": json.dumps({"error": {"message": f"bad key {fakes['github2']}"}})},
        },
    }]}
    path.write_text(yaml.safe_dump(doc))


def test_import_redacts_every_field_before_anything_is_written_or_pinned(
        project: Path, casstore, s3_server, s3_url: str, isolated_user: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fakes = fake_secrets()
    src = tmp_path / "legacy.yaml"
    _vcr_file(src, fakes)
    r = casstore("import", "vcr", "--add", str(src))
    assert r.exit_code == 0, r.stdout + r.stderr
    assert casstore("push").exit_code == 0
    problems = leaked("import output", r.stdout + r.stderr, fakes)
    wc = project / "tests" / "cassettes" / "legacy.json"
    problems += leaked("the working copy", wc.read_bytes(), fakes)
    entry = json.loads(wc.read_text())["entries"][0]
    assert entry["target"].startswith("POST https://api.example.test/v1/things?")
    for p in files_under(isolated_user / "cache"):
        problems += leaked(f"cache {p.name}", p.read_bytes(), fakes)
    for key, data in bucket_objects(s3_server, s3_url).items():
        problems += leaked(f"bucket {key}", data, fakes)
    for args in (("show", "legacy"), ("export", "legacy"), ("export", "--format", "vcr", "legacy"), ("diff",)):
        res = casstore(*args)
        assert res.exit_code == 0, (args, res.stdout, res.stderr)
        problems += leaked(" ".join(args), res.stdout + res.stderr, fakes)
    assert not problems, problems


def test_redaction_never_changes_identity(project: Path, casstore, llm_server) -> None:  # type: ignore[no-untyped-def]
    """Two calls that differ only in a secret query value stay two entries and both replay."""
    import httpx

    import casstore as cs

    a, b = "sk-" + "proj-" + rnd(48), "sk-" + "proj-" + rnd(48)
    with cs.use("two", mode="record"):
        ra = httpx.get(f"{llm_server.url}/echo", params={"q": a}).json()
        rb = httpx.get(f"{llm_server.url}/echo", params={"q": b}).json()
    doc = json.loads((project / "tests" / "cassettes" / "two.json").read_text())
    assert len({e["identity"] for e in doc["entries"]}) == 2
    assert doc["entries"][0]["target"] == doc["entries"][1]["target"]  # both masked the same way
    before = llm_server.count
    with cs.use("two", mode="replay"):
        assert httpx.get(f"{llm_server.url}/echo", params={"q": b}).json()["n"] == rb["n"]
        assert httpx.get(f"{llm_server.url}/echo", params={"q": a}).json()["n"] == ra["n"]
    assert llm_server.count == before


def test_show_export_and_diff_mask_a_secret_pinned_before_redaction_covered_it(
        project: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    """A pin made by an older casstore (the target was not redacted): printing never leaks it."""
    from tests.helpers.cassettes import leaky_doc, smuggle

    fakes = fake_secrets()
    smuggle(project, leaky_doc("legacy", fakes["openai"]))
    problems: list[str] = []
    for args in (("show", "legacy"), ("show", "--json", "legacy"), ("export", "legacy"),
                 ("export", "--format", "vcr", "legacy"), ("diff",), ("diff", "--json"), ("ls", "--json")):
        res = casstore(*args)
        assert res.exit_code == 0, (args, res.stdout, res.stderr)
        assert "legacy" in res.stdout
        problems += leaked(" ".join(args), res.stdout + res.stderr, fakes)
    assert not problems, problems


def test_aiohttp_urllib3_and_urllib_recordings_leak_nothing(project: Path, llm_server, casstore) -> None:  # type: ignore[no-untyped-def]
    """The same channels through the other intercepted clients: one writer, one redaction pass."""
    import asyncio
    import urllib.request

    import aiohttp
    import urllib3

    import casstore as cs

    fakes = fake_secrets()

    async def aio() -> None:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{llm_server.url}/echo", params={"q": fakes["openai"], "ref": fakes["custom"]}) as r:
                await r.read()

    with cs.use("other_clients", mode="record"):
        asyncio.run(aio())
        urllib3.PoolManager().request("POST", f"{llm_server.url}/echo?gh={fakes['github']}",
                                      body=json.dumps({"note": fakes["aws"]}).encode(),
                                      headers={"content-type": "application/json", "x-trace": fakes["openai2"]})
        with urllib.request.urlopen(f"{llm_server.url}/echo?a={fakes['aws']}&z={fakes['github2']}", timeout=10) as f:
            f.read()
    sent = "".join(repr(s) for s in llm_server.seen)
    assert all(s in sent for s in fakes.values()), "the secrets did not reach the stub"
    wc = project / "tests" / "cassettes" / "other_clients.json"
    doc = json.loads(wc.read_text())
    assert len(doc["entries"]) == 3
    problems = leaked("the working copy", wc.read_bytes(), fakes)
    r = casstore("add", str(wc))
    assert r.exit_code == 0, r.stdout + r.stderr
    problems += leaked("show", casstore("show", "other_clients").stdout, fakes)
    assert not problems, problems
