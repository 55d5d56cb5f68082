"""Red-team pass over issues #15 (hermetic replay) and #16 (no secret reaches the store).

An attacker's and an unlucky user's view, through what users see: real clients (httpx,
requests, urllib3, http.client) against the loopback stub, ``casstore.use`` and the CLI in
a real git repository. Each test is named after the hole it shows. A hole that is not
closed yet is marked ``xfail(strict=True)`` with the gap named, so the day it closes the
marker must go.

Fake secrets are built at run time, random-looking (redaction skips ``xxxx…`` placeholders).
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote, unquote

import httpx
import pytest
import requests

import casstore as cs
from tests.helpers.cassettes import make_cassette
from tests.helpers.fakes import openai_key, rnd
from tests.helpers.llm_server import LLMServer


def slack_webhook() -> str:
    return "https://hooks.slack.com/services/" + "T" + rnd(9).upper() + "/B" + rnd(9).upper() + "/" + rnd(24)


def _leaks(text: str, secret: str) -> bool:
    """The secret, in clear or percent-encoded as a client sends it in a query value."""
    tail = secret[-16:]
    return tail in text or tail in unquote(text) or quote(secret, safe="") in text


# -- #16 item 1: a secret hidden by percent-encoding in a query value ---------------------------
@pytest.mark.parametrize("client", ["requests", "httpx"])
def test_percent_encoded_webhook_in_a_neutral_query_value_is_redacted(
    client: str, llm_server: LLMServer, cassette_dir: Path
) -> None:
    # requests and httpx encode ':' and '/' in a query value, which hid the Slack webhook's
    # shape from the value rules: it was written in clear into target and request.url
    hook = slack_webhook()
    with cs.use("hook", mode="record", cassette_dir=cassette_dir):
        if client == "requests":
            requests.get(llm_server.url + "/echo", params={"callback": hook}, timeout=10)
        else:
            httpx.get(llm_server.url + "/echo", params={"callback": hook})
    assert llm_server.count == 1
    text = (cassette_dir / "hook.json").read_text()
    assert not _leaks(text, hook), "the webhook reached the working copy"
    doc = json.loads(text)
    entry = doc["entries"][0]
    assert "[REDACTED:slack-webhook]" in unquote(entry["target"])
    assert doc["redaction"]["hits"].get("slack-webhook", 0) >= 1
    # the identity is taken before redaction: the call still replays offline
    with cs.use("hook", mode="replay", cassette_dir=cassette_dir):
        if client == "requests":
            r = requests.get(llm_server.url + "/echo", params={"callback": hook}, timeout=10)
            assert r.status_code == 200
        else:
            assert httpx.get(llm_server.url + "/echo", params={"callback": hook}).status_code == 200
    assert llm_server.count == 1


@pytest.mark.parametrize("where", ["path segment", "header value"])
def test_percent_encoded_secret_in_a_path_segment_or_header_is_redacted(
    where: str, llm_server: LLMServer, cassette_dir: Path
) -> None:
    hook = slack_webhook()
    with cs.use("enc", mode="record", cassette_dir=cassette_dir):
        if where == "path segment":
            httpx.get(llm_server.url + "/echo/" + quote(hook, safe=""))
        else:
            httpx.get(llm_server.url + "/echo", headers={"x-forward": quote(hook, safe="")})
    text = (cassette_dir / "enc.json").read_text()
    assert not _leaks(text, hook), f"the webhook reached the working copy through a {where}"
    assert json.loads(text)["redaction"]["hits"].get("slack-webhook", 0) >= 1


def test_add_refuses_a_percent_encoded_secret_in_a_hand_edited_url(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    key = openai_key()
    doc = make_cassette("hand")
    url = "http://127.0.0.1/v1/chat/completions?next=" + quote("https://x.example/?k=" + key, safe="")
    doc["entries"][1]["target"] = "POST " + url
    doc["entries"][1]["request"]["url"] = url
    path = repo / "tests" / "cassettes" / "hand.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    r = casstore("add", str(path), cwd=repo)
    out = r.stdout + r.stderr
    assert r.exit_code == 1, out
    assert "(openai-key)" in out and "entries[1]" in out
    assert key[-16:] not in out
    assert not (repo / "casstore.lock").exists() or "hand" not in (repo / "casstore.lock").read_text()


# -- #15 item 3: offline means offline, through every supported client -----------------------
def test_offline_blocks_a_direct_urllib3_connection(
    llm_server: LLMServer, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import urllib3

    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with cs.use("u3conn", mode="live", cassette_dir=cassette_dir):
        conn = urllib3.connection.HTTPConnection("127.0.0.1", llm_server.port)
        try:
            with pytest.raises(cs.LiveCallBlocked):
                conn.request("GET", "/echo")
                conn.getresponse().read()
        finally:
            conn.close()
    assert llm_server.count == 0


def test_offline_blocks_raw_bytes_sent_on_an_http_client_connection(
    llm_server: LLMServer, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import http.client

    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with cs.use("rawsend", mode="live", cassette_dir=cassette_dir):
        conn = http.client.HTTPConnection("127.0.0.1", llm_server.port)
        try:
            with pytest.raises(cs.LiveCallBlocked):
                conn.connect()
                conn.send(b"GET /echo HTTP/1.0\r\nHost: x\r\n\r\n")
                conn.sock.makefile("rb").read()
        finally:
            conn.close()
    assert llm_server.count == 0


# -- #16 item 4: gc never deletes a fresh pin -------------------------------------------------
def test_gc_remote_keeps_an_old_object_re_pinned_by_another_clone(
    tmp_path: Path, casstore, isolated_user: Path, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    import os
    import time

    from tests.helpers.commands import git

    origin, store = tmp_path / "origin.git", tmp_path / "store"
    git("init", "-q", "--bare", str(origin), cwd=tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    git("clone", "-q", str(origin), str(a), cwd=tmp_path)
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(tmp_path / "cache-a"))
    assert casstore("init", "--remote", str(store), cwd=a).exit_code == 0
    git("add", "-A", cwd=a)
    git("commit", "-qm", "casstore", cwd=a)
    git("push", "-q", "origin", "HEAD:main", cwd=a)
    cassette = json.dumps(make_cassette("x"), indent=2)

    # clone a pins x on a branch that is later abandoned; its object ages in the store
    git("checkout", "-qb", "abandoned", cwd=a)
    (a / "tests" / "cassettes").mkdir(parents=True, exist_ok=True)
    (a / "tests" / "cassettes" / "x.json").write_text(cassette)
    assert casstore("add", "tests/cassettes/x.json", cwd=a).exit_code == 0
    assert casstore("push", cwd=a).exit_code == 0
    git("add", "casstore.lock", cwd=a)
    git("commit", "-qm", "pin x", cwd=a)
    git("push", "-q", "origin", "abandoned", cwd=a)
    objects = [p for p in (store / "objects").rglob("*") if p.is_file()]
    assert objects
    old = time.time() - 3 * 86400
    for p in store.rglob("*"):
        if p.is_file():
            os.utime(p, (old, old))
    git("push", "-q", "origin", "--delete", "abandoned", cwd=a)
    git("checkout", "-q", "main", cwd=a)
    git("branch", "-qD", "abandoned", cwd=a)
    git("fetch", "-q", "--prune", cwd=a)

    # clone b pins the same recording again: its push finds the object and uploads nothing
    git("clone", "-q", str(origin), str(b), cwd=tmp_path)
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(tmp_path / "cache-b"))
    git("checkout", "-qb", "new", cwd=b)
    (b / "tests" / "cassettes").mkdir(parents=True, exist_ok=True)
    (b / "tests" / "cassettes" / "x.json").write_text(cassette)
    assert casstore("add", "tests/cassettes/x.json", cwd=b).exit_code == 0
    assert casstore("push", cwd=b).exit_code == 0
    git("add", "casstore.lock", cwd=b)
    git("commit", "-qm", "pin x again", cwd=b)
    git("push", "-q", "origin", "new", cwd=b)

    # clone a, which has not fetched branch new, collects the store
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(tmp_path / "cache-a"))
    r = casstore("gc", "--remote", cwd=a)
    assert r.exit_code == 0, r.stderr
    assert all(p.exists() for p in objects), "gc --remote deleted the object branch 'new' pins"

    # branch new's CI, with an empty cache
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(tmp_path / "cache-ci"))
    r = casstore("pull", "--frozen", cwd=b)
    assert r.exit_code == 0, r.stdout + r.stderr
