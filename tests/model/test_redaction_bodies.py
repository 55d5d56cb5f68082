"""Secrets inside bodies the cassette keeps as base64, or as escaped JSON text (issue #16).

A body that is not UTF-8 text is stored as ``{"base64": ...}`` (or ``body_base64``): a
multipart upload with a binary part, a request sent with ``content-encoding: gzip``, a
binary request or answer. JSON written by PHP or Java serializers escapes ``/`` as ``\\/``
(and some write ``-`` as ``\\u002d``). Both hid a key from the value rules: it reached the
working copy, ``add`` pinned it and ``push`` uploaded it. Here real clients send fake keys
(built at run time) to the loopback stub; an attacker's reader then decodes every base64
field (and gunzips it) and unescapes the JSON text of the working copy, the store and the
cache, and the CLI must refuse a hand-made copy that still holds one.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard

from tests.helpers.cassettes import make_cassette
from tests.helpers.commands import git
from tests.helpers.fakes import openai_key, rnd
from tests.reliability.test_redteam import slack_webhook


def github_token() -> str:
    return "gh" + "p_" + rnd(36)


# -- what an attacker reads ---------------------------------------------------------------------
def _views(value: Any) -> Iterator[bytes]:
    """Every string of a JSON document, plus each base64 string decoded (and un-gzipped)."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _views(v)
    elif isinstance(value, list):
        for v in value:
            yield from _views(v)
    elif isinstance(value, str):
        yield value.encode("utf-8")
        if len(value) >= 8 and re.fullmatch(r"[A-Za-z0-9+/]+=*", value):
            try:
                raw = base64.b64decode(value, validate=True)
            except ValueError:
                return
            yield raw
            for undo in (gzip.decompress, zlib.decompress):
                try:
                    yield undo(raw)
                except (OSError, zlib.error, EOFError):
                    pass


def readable(data: bytes) -> bytes:
    """A file or stored object as an attacker reads it: unzstd'ed, base64 decoded, unescaped."""
    if data[:4] == b"\x28\xb5\x2f\xfd":
        data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
    out = [data, data.replace(b"\\/", b"/").replace(b"\\u002d", b"-")]
    try:
        out += list(_views(json.loads(data)))
    except ValueError:
        pass
    return b"\n".join(out)


def leaks(data: bytes, fakes: list[str]) -> list[str]:
    text = readable(data)
    return [f"{f[:6]}…" for f in fakes if f.encode() in text]


@pytest.fixture
def project(tmp_path: Path, casstore, monkeypatch) -> Path:  # type: ignore[no-untyped-def]
    root = tmp_path / "work"
    root.mkdir()
    git("init", "-q", cwd=root)
    assert casstore("init", cwd=root).exit_code == 0
    monkeypatch.chdir(root)
    return root


def _store_files(project: Path, user: Path) -> Iterator[Path]:
    for root in (project / ".casstore" / "store", user / "cache"):
        yield from (p for p in sorted(root.rglob("*")) if p.is_file())


# -- 1. bodies stored as base64 -----------------------------------------------------------------
def test_base64_bodies_are_redacted_inside_and_still_replay(project: Path, casstore, llm_server,  # type: ignore[no-untyped-def]
                                                             isolated_user: Path) -> None:
    import httpx
    import requests
    import urllib3

    import casstore as cs

    key, token = openai_key(), github_token()
    password = "pw-" + rnd(12)  # no shape: found by its field's name
    fakes = [key, token, password]
    gz = gzip.compress(json.dumps({"prompt": f"use {key}"}).encode())
    binary = b"\xff\xfe\x00" + token.encode() + b"\x00\x81"

    def calls() -> list[bytes]:
        return [
            # a multipart upload: a binary image part and a text field carrying the key
            requests.post(f"{llm_server.url}/echo", timeout=10, files={
                "image": ("a.png", b"\x89PNG\r\n\x1a\n\x00\xff"), "api_key": (None, key),
                "password": (None, password)}).content,
            # a gzip request body (content-encoding: gzip)
            httpx.post(f"{llm_server.url}/echo", content=gz,
                       headers={"content-encoding": "gzip", "content-type": "text/plain"}).content,
            # a request body that is not UTF-8, answered by a binary body that repeats it
            urllib3.request("POST", f"{llm_server.url}/binary", body=binary).data,
        ]

    with cs.use("bodies", mode="record"):
        live = calls()
    assert key.encode() in llm_server.seen[0][3] and gz == llm_server.seen[1][3], "the stub saw no secret"
    assert token.encode() in live[2]

    wc = project / "tests" / "cassettes" / "bodies.json"
    doc = json.loads(wc.read_text())
    assert not leaks(wc.read_bytes(), fakes)
    entries = doc["entries"]
    assert all(isinstance(e["request"]["body"], dict) and "base64" in e["request"]["body"] for e in entries)
    # the gzip body is gzip again (its recorded content-encoding still tells the truth)
    assert b'name="password"\r\n\r\n[REDACTED:password]\r\n' in base64.b64decode(entries[0]["request"]["body"]["base64"])
    assert entries[1]["request"]["headers"]["content-encoding"] == "gzip"
    assert json.loads(gzip.decompress(base64.b64decode(entries[1]["request"]["body"]["base64"]))) == \
        {"prompt": "use [REDACTED:openai-key]"}
    # the binary answer keeps its bytes around the placeholder
    served = base64.b64decode(entries[2]["response"]["body"]["base64"])
    assert served.startswith(b"\x89PNG") and b"[REDACTED:github-token]" in served and b"\xff\xfe\x00" in served
    hits = doc["redaction"]["hits"]  # the echo of the multipart upload holds the key a third time
    assert hits.get("openai-key", 0) >= 2 and hits.get("github-token", 0) == 2, hits

    # identities are those of the un-redacted calls: the same calls replay, offline
    before = llm_server.count
    with cs.use("bodies", mode="replay"):
        replayed = calls()
    assert llm_server.count == before
    assert b"[REDACTED:github-token]" in replayed[2]

    r = casstore("add", str(wc))
    assert r.exit_code == 0, r.stdout + r.stderr
    assert casstore("push").exit_code == 0
    stored = list(_store_files(project, isolated_user))
    assert any("objects" in p.parts for p in stored)
    assert not [(p.name, leaks(p.read_bytes(), fakes)) for p in stored if leaks(p.read_bytes(), fakes)]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_add_and_check_look_inside_base64_bodies(project: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    """A working copy made by hand (or by an old casstore) with keys inside base64 bodies."""
    key, token = openai_key(), github_token()
    doc = make_cassette("handmade", n=3)
    e0, e1, e2 = doc["entries"]
    e0["request"]["headers"]["content-encoding"] = "gzip"
    e0["request"]["body"] = {"base64": _b64(gzip.compress(json.dumps({"note": key}).encode()))}
    e1["response"]["headers"] = {"content-type": "application/octet-stream"}
    e1["response"]["body"] = {"base64": _b64(b"\x89PNG\xff\x00" + token.encode() + b"\x00")}
    e2["response"]["headers"] = {"content-type": "application/json", "content-encoding": "deflate"}
    e2["response"]["body_base64"] = _b64(zlib.compress(json.dumps({"k": key}).encode()))
    del e2["response"]["body"]
    path = project / "tests" / "cassettes" / "handmade.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))

    r = casstore("check", str(path))
    assert r.exit_code == 1
    out = r.stdout + r.stderr
    for where, rule in (("entries[0].request.body.base64<decoded>", "openai-key"),
                        ("entries[1].response.body.base64<bytes>", "github-token"),
                        ("entries[2].response.body_base64<decoded>", "openai-key")):
        assert re.search(rf"secret \({rule}\) in entry \d at \$\.{re.escape(where)}", out), out
    r = casstore("add", str(path))
    assert r.exit_code == 1
    out += r.stdout + r.stderr
    lock = project / "casstore.lock"
    assert "nothing pinned" in out and (not lock.exists() or "handmade" not in lock.read_text())
    assert key not in out and token not in out and key[8:30] not in out


def test_a_secret_in_a_body_casstore_cannot_decode_refuses_the_write(project: Path, llm_server) -> None:  # type: ignore[no-untyped-def]
    """An unknown content-encoding: the bytes cannot be re-encoded after a redaction, so the
    recording is refused in one line (cassette, entry, field, rule) and nothing is written."""
    import httpx

    import casstore as cs

    key = openai_key()
    with pytest.raises(cs.RedactionRefused) as info, cs.use("odd", mode="record"):
        r = httpx.post(f"{llm_server.url}/odd-encoding", content=b"\x00\x01" + key.encode(),
                       headers={"content-type": "application/octet-stream"})
        assert key.encode() in r.content
    message = str(info.value)
    assert "\n" not in message and key not in message and key[8:30] not in message
    assert message.startswith("cassette 'odd', entry 0, ")
    assert "response.body_base64" in message and "openai-key" in message and "x-odd" in message
    assert not (project / "tests" / "cassettes" / "odd.json").exists()


# -- 2. JSON text with escaped characters -------------------------------------------------------
def test_escaped_json_text_is_scanned_unescaped(project: Path, casstore, llm_server, isolated_user: Path) -> None:  # type: ignore[no-untyped-def]
    """An answer written as PHP's json_encode does ("https:\\/\\/…", "sk\\u002dproj…") is kept
    as body_text: its Slack webhook, URL password and key are redacted, and kept escaped."""
    import httpx

    import casstore as cs

    key, hook, password = openai_key(), slack_webhook(), rnd(20)
    cred = f"https://deploy:{password}@git.example.com/repo.git"
    fakes = [key, hook, password]
    with cs.use("escaped", mode="record"):
        live = httpx.post(f"{llm_server.url}/escaped", params={"cb": hook}, content=f"{cred} {key}".encode(),
                          headers={"content-type": "text/plain"})
    assert "\\/\\/hooks.slack.com" in live.text and "sk\\u002dproj" in live.text  # escaped on the wire
    assert live.json()["body"] == f"{cred} {key}"

    wc = project / "tests" / "cassettes" / "escaped.json"
    response = json.loads(wc.read_text())["entries"][0]["response"]
    assert "body_text" in response
    assert not leaks(wc.read_bytes(), fakes)
    served = json.loads(response["body_text"])  # still JSON, still in the server's style
    assert "\\/" in response["body_text"]
    assert served["query"] == [["cb", "[REDACTED:slack-webhook]"]]
    # the whole user information goes, user and password (issue #29: a token may be the user)
    assert served["body"] == "https://[REDACTED:url-credentials]@git.example.com/repo.git [REDACTED:openai-key]"

    # a copy written before this rule: check and add find all three, never print them
    old = wc.with_name("old.json")
    doc = json.loads(wc.read_text())
    doc["name"] = "old"
    doc["entries"][0]["response"]["body_text"] = live.text
    old.write_text(json.dumps(doc))
    r = casstore("check", str(old))
    out = r.stdout + r.stderr
    assert r.exit_code == 1
    for rule in ("slack-webhook", "url-credentials", "openai-key"):
        assert f"secret ({rule}) in entry 0 at $.entries[0].response.body_text" in out, out
    r = casstore("add", str(old))
    assert r.exit_code == 1 and "nothing pinned" in r.stdout + r.stderr
    assert not [f for f in fakes if f in out + r.stdout + r.stderr]
    assert casstore("add", str(wc)).exit_code == 0
