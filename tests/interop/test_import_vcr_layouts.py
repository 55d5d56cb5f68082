"""``casstore import vcr`` never loses a body: every layout seen in the wild, or a refusal.

Each test writes a cassette in one body layout (vcrpy's own, Ruby VCR's, vcrpy's aiohttp
stub, the ``parsed_body`` serializer many projects copy, compressed bodies), imports it
with the CLI and replays the call with a real client under ``CASSTORE_OFFLINE=1``: the
answer must be the recorded one, byte for byte where the file holds the bytes. A body
casstore cannot read is refused with ``file:line`` and the reason, and nothing is written.
"""

from __future__ import annotations

import base64
import gzip
import json
import textwrap
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import zstandard

import casstore as cs

pytestmark = pytest.mark.usefixtures("replay_env")

URL = "http://127.0.0.1:9"  # nothing listens there; replay runs offline anyway


def _import(casstore: Any, repo: Path, path: Path, *args: str) -> Any:
    return casstore("import", "vcr", str(path), "--json", *args, cwd=repo)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _state(repo: Path) -> tuple[str, list[str]]:
    lock = (repo / "casstore.lock").read_text() if (repo / "casstore.lock").exists() else ""
    copies = sorted(str(p.relative_to(repo)) for p in (repo / "tests").rglob("*.json")) if (repo / "tests").exists() else []
    return lock, copies


def test_parsed_body_serializer_request_and_response(
    tmp_path: Path, repo: Path, casstore: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The widespread custom serializer: JSON bodies kept parsed under ``parsed_body``."""
    path = _write(tmp_path, "parsed.yaml", f"""\
        interactions:
        - request:
            headers:
              accept:
              - application/json
              content-type:
              - application/json
            method: POST
            parsed_body:
              messages:
              - content: |-
                  two
                  lines
                role: user
              model: gpt-4o
              temperature: 0.0
            uri: {URL}/v1/chat/completions
          response:
            headers:
              content-encoding:
              - gzip
              content-type:
              - application/json
            parsed_body:
              choices:
              - index: 0
                message:
                  content: "héllo — “quoted”"
                  role: assistant
              object: chat.completion
              usage: {{total_tokens: 3}}
            status:
              code: 200
              message: OK
        version: 1
        """)
    r = _import(casstore, repo, path, "--add")
    assert r.exit_code == 0, r.stderr
    (report,) = r.json
    assert report["replayed"] == 1 and report["interactions"] == 1
    assert any("parsed_body" in n and "canonical JSON" in n for n in report["notes"]), report["notes"]
    human = casstore("import", "vcr", str(path), "--force", cwd=repo)
    assert "1 of 1 interactions replay" in human.stdout
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with cs.use("parsed", mode="replay"):
        resp = httpx.post(f"{URL}/v1/chat/completions", headers={"accept": "application/json"},
                          json={"model": "gpt-4o", "temperature": 0, "messages": [{"role": "user", "content": "two\nlines"}]})
    assert resp.json()["choices"][0]["message"]["content"] == "héllo — “quoted”"
    assert "content-encoding" not in resp.headers  # the parsed body is served as it is, not as gzip
    expected = json.dumps(resp.json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert resp.content == expected  # canonical JSON, as the report says


def test_body_string_mapping_plain_string_and_ruby_encoding(
    tmp_path: Path, repo: Path, casstore: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, "strings.yaml", f"""\
        interactions:
        - request:
            body:
              encoding: UTF-8
              string: 'name=a+b&x=1'
            headers:
              Accept: ['*/*']
              Content-Type: [application/x-www-form-urlencoded]
            method: PUT
            uri: {URL}/form
          response:
            body: "plain text answer\\n"
            headers:
              Content-Type: [text/plain]
            status: {{code: 201, message: Created}}
        - request:
            body: null
            headers:
              Accept: ['*/*']
            method: GET
            uri: {URL}/ruby
          response:
            body:
              encoding: UTF-8
              string: '{{"ok": true}}'
            headers:
              Content-Type: [application/json]
            status: {{code: 200, message: OK}}
        version: 1
        """)
    r = _import(casstore, repo, path)
    assert r.exit_code == 0, r.stderr
    assert r.json[0]["replayed"] == 2
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with cs.use("strings", mode="replay"):
        form = requests.put(f"{URL}/form", data={"name": "a b", "x": "1"}, timeout=5)
        ruby = requests.get(f"{URL}/ruby", timeout=5)
    assert (form.status_code, form.content) == (201, b"plain text answer\n")
    assert ruby.content == b'{"ok": true}'


def test_binary_and_base64_bodies_byte_for_byte(
    tmp_path: Path, repo: Path, casstore: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    blob = bytes(range(256)) * 3
    b64 = base64.b64encode(blob).decode()
    wrapped = "\n".join(b64[i : i + 60] for i in range(0, len(b64), 60))
    upload = base64.b64encode(b"\x00\xff upload").decode()
    path = _write(tmp_path, "binary.yaml", f"""\
        interactions:
        - request:
            body: !!binary |
              {upload}
            headers:
              Accept: ['*/*']
              Content-Type: [application/octet-stream]
            method: POST
            uri: {URL}/upload
          response:
            body:
              string: !!binary |
{textwrap.indent(wrapped, " " * 16)}
            headers:
              Content-Type: [application/octet-stream]
            status: {{code: 200, message: OK}}
        - request:
            body: null
            headers:
              Accept: ['*/*']
            method: GET
            uri: {URL}/ruby-b64
          response:
            body:
              encoding: ASCII-8BIT
              base64_string: |
{textwrap.indent(wrapped, " " * 16)}
            headers:
              Content-Type: [application/octet-stream]
            status: {{code: 200, message: OK}}
        - request:
            body: null
            headers:
              Accept: ['*/*']
            method: GET
            uri: {URL}/plain-b64
          response:
            body:
              base64: {b64}
            headers:
              Content-Type: [image/png]
            status: {{code: 200, message: OK}}
        version: 1
        """)
    r = _import(casstore, repo, path)
    assert r.exit_code == 0, r.stderr
    assert r.json[0]["replayed"] == 3
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with cs.use("binary", mode="replay"):
        up = requests.post(f"{URL}/upload", data=b"\x00\xff upload",
                           headers={"content-type": "application/octet-stream"}, timeout=5)
        ruby = requests.get(f"{URL}/ruby-b64", timeout=5)
        plain = requests.get(f"{URL}/plain-b64", timeout=5)
    assert up.content == ruby.content == plain.content == blob


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd"])
def test_compressed_bodies_are_decoded(
    tmp_path: Path, repo: Path, casstore: Any, monkeypatch: pytest.MonkeyPatch, coding: str
) -> None:
    payload = json.dumps({"coding": coding, "items": list(range(50))}).encode()
    if coding == "gzip":
        packed = gzip.compress(payload)
    elif coding == "deflate":
        packed = zlib.compress(payload)
    elif coding == "br":
        brotli = pytest.importorskip("brotli")
        packed = brotli.compress(payload)
    else:
        packed = zstandard.ZstdCompressor().compress(payload)
    path = _write(tmp_path, f"{coding}.yaml", f"""\
        interactions:
        - request:
            body: null
            headers:
              Accept: ['*/*']
            method: GET
            uri: {URL}/packed
          response:
            body:
              string: !!binary |
                {base64.b64encode(packed).decode()}
            headers:
              Content-Encoding: [{coding}]
              Content-Type: [application/json]
            status: {{code: 200, message: OK}}
        - request:
            body: null
            headers:
              Accept: ['*/*']
            method: GET
            uri: {URL}/already-decoded
          response:
            body:
              string: '{payload.decode()}'
            headers:
              Content-Encoding: [{coding}]
              Content-Type: [application/json]
            status: {{code: 200, message: OK}}
        version: 1
        """)
    r = _import(casstore, repo, path)
    assert r.exit_code == 0, r.stderr
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with cs.use(coding, mode="replay"):
        packed_r = httpx.get(f"{URL}/packed", headers={"accept": "*/*"})
        plain_r = requests.get(f"{URL}/already-decoded", timeout=5)
    assert packed_r.content == plain_r.content == payload
    assert "content-encoding" not in packed_r.headers and "content-encoding" not in plain_r.headers


def test_aiohttp_mapping_body_is_the_json_aiohttp_sent(tmp_path: Path, repo: Path, casstore: Any) -> None:
    path = _write(tmp_path, "aio.yaml", f"""\
        interactions:
        - request:
            body:
              model: gpt-4o
              messages:
              - {{role: user, content: hi}}
            headers: {{}}
            method: POST
            uri: {URL}/v1/chat/completions
          response:
            body:
              string: '{{"object": "chat.completion", "choices": []}}'
            headers:
              Content-Type: [application/json]
            status: {{code: 200, message: OK}}
        version: 1
        """)
    r = _import(casstore, repo, path)
    assert r.exit_code == 0, r.stderr
    assert r.json[0]["replayed"] == 1
    entry = json.loads((repo / "tests" / "cassettes" / "aio.json").read_text())["entries"][0]
    assert entry["kind"] == "llm"
    assert entry["request"]["body"] == {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    assert entry["request"]["headers"]["content-type"] == "application/json"


def test_parsed_body_in_a_json_serializer_file(
    tmp_path: Path, repo: Path, casstore: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = {"version": 1, "interactions": [{
        "request": {"method": "POST", "uri": f"{URL}/api", "headers": {"Accept": ["*/*"], "Content-Type": ["application/json"]},
                    "parsed_body": {"q": [1, 2.5, None], "s": "ü"}},
        "response": {"status": {"code": 200, "message": "OK"}, "headers": {"Content-Type": ["application/json"]},
                     "parsed_body": {"b": 1, "a": [True, False]}},
    }]}
    path = tmp_path / "parsed.json"
    path.write_text(json.dumps(doc, indent=4))
    r = _import(casstore, repo, path)
    assert r.exit_code == 0, r.stderr
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with cs.use("parsed", mode="replay"):
        resp = requests.post(f"{URL}/api", json={"s": "ü", "q": [1, 2.5, None]}, timeout=5)
    assert resp.content == b'{"a":[true,false],"b":1}'


@pytest.mark.parametrize(
    ("layout", "at", "words"),
    [
        ("request_key", "json_body:", ["request.json_body", "unknown key"]),
        ("body_key", "json:", ["response.body.json", "unknown body key"]),
        ("number", "body: 42", ["request.body", "int"]),
        ("both_differ", "parsed_body:", ["request.parsed_body", "differs from the 'body'"]),
        ("bad_base64", "base64_string:", ["response.body.base64_string", "not valid base64"]),
    ],
)
def test_unreadable_bodies_are_refused_with_file_and_line(
    tmp_path: Path, repo: Path, casstore: Any, layout: str, at: str, words: list[str]
) -> None:
    request = {
        "request_key": "    headers: {}\n    method: POST\n    uri: http://127.0.0.1:9/a\n    json_body: {q: 1}\n",
        "body_key": "    body: null\n    headers: {}\n    method: GET\n    uri: http://127.0.0.1:9/a\n",
        "number": "    body: 42\n    headers: {}\n    method: POST\n    uri: http://127.0.0.1:9/a\n",
        "both_differ": "    body: '{\"q\": 1}'\n    headers: {}\n    method: POST\n    parsed_body: {q: 2}\n"
                       "    uri: http://127.0.0.1:9/a\n",
        "bad_base64": "    body: null\n    headers: {}\n    method: GET\n    uri: http://127.0.0.1:9/a\n",
    }[layout]
    response_body = {
        "body_key": "    body:\n      json: {answer: 42}\n",
        "bad_base64": "    body:\n      base64_string: '%%% not base64'\n",
    }.get(layout, "    body: {string: ok}\n")
    good = tmp_path / "good.yaml"
    good.write_text("interactions:\n- request:\n    body: null\n    headers: {}\n    method: GET\n"
                    "    uri: http://127.0.0.1:9/ok\n  response:\n    body: {string: ok}\n    headers: {}\n"
                    "    status: {code: 200, message: OK}\nversion: 1\n")
    path = tmp_path / "bad.yaml"
    path.write_text(
        "interactions:\n"
        "- request:\n"
        "    headers: {}\n"
        "    method: GET\n"
        "    uri: http://127.0.0.1:9/first\n"
        "  response: {body: {string: ''}, headers: {}, status: {code: 204, message: No Content}}\n"
        "- request:\n" + request + "  response:\n" + response_body + "    headers: {}\n    status: {code: 200, message: OK}\n"
        "version: 1\n"
    )
    lines = path.read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if i > 7 and at in text)  # the key's own line
    before = _state(repo)
    r = casstore("import", "vcr", str(good), str(path), "--add", cwd=repo)
    assert r.exit_code == 2, r.stdout + r.stderr
    assert r.stderr.startswith(f"error: bad.yaml:{line}: interaction 2: "), r.stderr
    for w in words:
        assert w in r.stderr, r.stderr
    assert _state(repo) == before  # all or nothing


def test_an_interaction_that_would_not_replay_is_refused_unless_forced(
    tmp_path: Path, repo: Path, casstore: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file keeps a URL no client sends (a raw "é"): the import says which call would miss."""
    path = _write(tmp_path, "raw.yaml", f"""\
        interactions:
        - request:
            body: null
            headers: {{Accept: ['*/*']}}
            method: GET
            uri: {URL}/fine
          response: {{body: {{string: fine}}, headers: {{}}, status: {{code: 200, message: OK}}}}
        - request:
            body: null
            headers: {{Accept: ['*/*']}}
            method: GET
            uri: {URL}/café
          response: {{body: {{string: spaced}}, headers: {{}}, status: {{code: 200, message: OK}}}}
        version: 1
        """)
    before = _state(repo)
    r = casstore("import", "vcr", str(path), "--add", cwd=repo)
    assert r.exit_code == 1, r.stdout + r.stderr
    assert "1 of 2 interactions replay" in r.stderr
    assert "raw.yaml:8: interaction 2 (GET http://127.0.0.1:9/café) would not replay" in r.stderr
    assert "--force" in r.stderr
    assert _state(repo) == before
    forced = casstore("import", "vcr", str(path), "--add", "--force", cwd=repo)
    assert forced.exit_code == 0, forced.stderr
    assert "1 of 2 interactions replay" in forced.stdout and "interaction 2" in forced.stdout
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with cs.use("raw", mode="replay"):
        assert requests.get(f"{URL}/fine", timeout=5).text == "fine"
        with pytest.raises(cs.CassetteMiss):
            requests.get(f"{URL}/café", timeout=5)
