"""``casstore import vcr``: cassettes recorded by the real vcrpy replay under casstore.use().

The HTTP server is the fake provider on 127.0.0.1 (``tests/helpers/llm_server.py``); vcrpy,
requests and httpx are the real ones. Each test records with vcrpy, imports with the CLI,
stops the server, and replays the same code offline (``CASSTORE_OFFLINE=1``).
"""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import vcr

import casstore as cs
from casstore.model.cassette import load_file
from tests.helpers.llm_server import LLMServer

pytestmark = pytest.mark.usefixtures("replay_env")


def _calls(url: str, key: str, *, binary: bool) -> list[Any]:
    """What the code under test does: every kind of body vcrpy stores.

    ``binary`` adds the calls whose bodies vcrpy's JSON serializer cannot hold (binary
    request/response bodies, httpx's compressed gzip body).
    """
    out: list[Any] = []

    def keep(label: str, r: Any) -> None:
        out.append((label, r.status_code, r.headers.get("content-type"), r.content))

    keep("requests json", requests.post(url + "/echo?a=1&b=2", json={"q": "hi", "n": 1.5},
                                        headers={"Authorization": "Bearer " + key}, timeout=5))
    keep("requests gzip", requests.get(url + "/gzip", timeout=5))  # vcrpy stores it decoded
    keep("requests form", requests.put(url + "/text", data={"x": "1", "y": "two words"}, timeout=5))
    keep("requests 404", requests.get(url + "/status/404", timeout=5))
    with httpx.Client(timeout=5) as client:
        keep("httpx chat", client.post(url + "/v1/chat/completions", headers={"Authorization": "Bearer " + key},
                                       json={"model": "gpt-test", "messages": [{"role": "user", "content": "héllo"}],
                                             "temperature": 0}))
        keep("httpx stream", client.post(url + "/v1/chat/completions",
                                         json={"model": "gpt-test", "stream": True,
                                               "messages": [{"role": "user", "content": "stream it"}]}))
        keep("httpx text", client.get(url + "/text", params={"page": 2}))
        keep("httpx repeat", client.post(url + "/echo", content=b"same"))
        keep("httpx repeat", client.post(url + "/echo", content=b"same"))  # same identity, recorded order
        if binary:
            keep("httpx gzip", client.get(url + "/gzip"))  # vcrpy stores the compressed bytes
            keep("httpx bytes", client.post(url + "/bytes", content=bytes(range(256))))
    if binary:
        keep("requests bytes", requests.post(url + "/bytes", data=b"\x00\xff\xfe binary", timeout=5))
    return out


def _record(tmp_path: Path, key: str, serializer: str, *, binary: bool) -> tuple[Path, list[Any], LLMServer]:
    suffix = "yaml" if serializer == "yaml" else "json"
    path = tmp_path / "vcr" / f"legacy.{suffix}"
    server = LLMServer().start()
    try:
        recorder = vcr.VCR(serializer=serializer)
        with recorder.use_cassette(str(path), record_mode="once"):
            live = _calls(server.url, key, binary=binary)
    finally:
        server.stop()
    return path, live, server


@pytest.mark.parametrize(("serializer", "binary"), [("yaml", True), ("json", False)])
def test_vcrpy_cassette_replays_byte_identical_offline(
    tmp_path: Path, repo: Path, casstore: Any, fake_key: str, monkeypatch: pytest.MonkeyPatch,
    serializer: str, binary: bool,
) -> None:
    path, live, server = _record(tmp_path, fake_key, serializer, binary=binary)
    assert path.is_file()
    if serializer == "yaml":
        assert "!!binary" in path.read_text()  # binary and compressed bodies are really there
    count = server.count

    r = casstore("import", "vcr", str(path), "--add", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert f"imported legacy.{path.suffix[1:]} -> tests/cassettes/legacy.json: {len(live)} entries" in r.stdout
    assert "pinned legacy sha256:" in r.stdout
    assert [row["name"] for row in casstore("ls", "--json", cwd=repo).json] == ["legacy"]
    # replay from the pinned object, not the working copy
    (repo / "tests" / "cassettes" / "legacy.json").unlink()

    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with cs.use("legacy") as session:
        replayed = _calls(server.url, fake_key, binary=binary)
    assert replayed == live  # status, content type and body bytes, call by call
    assert session.served == len(live) and session.live == 0
    assert server.count == count  # the (stopped) server saw nothing more


def _sdk_calls(url: str, key: str) -> list[Any]:
    import anthropic
    import openai

    oai = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    ant = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)
    chat = oai.chat.completions.create(model="gpt-test", temperature=0.2,
                                       messages=[{"role": "user", "content": "triage order 7"}])
    stream = oai.chat.completions.create(model="gpt-test", stream=True, messages=[{"role": "user", "content": "s"}])
    msg = ant.messages.create(model="claude-test", max_tokens=32, messages=[{"role": "user", "content": "classify"}])
    return [chat.model_dump(), [c.model_dump() for c in stream], msg.model_dump()]


def test_sdk_calls_recorded_by_vcrpy_replay_under_casstore(
    tmp_path: Path, repo: Path, casstore: Any, fake_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The OpenAI and Anthropic SDKs (httpx inside) recorded by vcrpy: llm entries that replay."""
    path = tmp_path / "sdk.yaml"
    server = LLMServer().start()
    try:
        with vcr.VCR().use_cassette(str(path), record_mode="once"):
            live = _sdk_calls(server.url, fake_key)
    finally:
        server.stop()
    r = casstore("import", "vcr", str(path), "--add", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert "3 entries (3 llm)" in r.stdout
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with cs.use("sdk") as session:
        assert _sdk_calls(server.url, fake_key) == live
    assert session.served == 3


def test_imported_entries_match_what_casstore_records(
    tmp_path: Path, repo: Path, casstore: Any, fake_key: str
) -> None:
    """The same calls, recorded by vcrpy and by casstore against one server: same entries."""
    path = tmp_path / "same.yaml"
    server = LLMServer().start()
    try:
        with vcr.VCR(serializer="yaml").use_cassette(str(path), record_mode="once"):
            _calls(server.url, fake_key, binary=True)
        with cs.use("native", mode="record"):
            _calls(server.url, fake_key, binary=True)
    finally:
        server.stop()
    assert casstore("import", "vcr", str(path), cwd=repo).exit_code == 0
    imported = load_file(repo / "tests" / "cassettes" / "same.json")
    native = load_file(repo / "tests" / "cassettes" / "native.json")
    assert len(imported.entries) == len(native.entries) == 12

    def calls(c: Any) -> list[Any]:
        return [(e["seq"], e["kind"], e["target"], e["identity"], e["request"]) for e in c.entries]

    assert calls(imported) == calls(native)
    assert [e["kind"] for e in imported.entries].count("llm") == 2


def test_secrets_are_redacted_on_the_way_in_with_a_report(
    tmp_path: Path, repo: Path, casstore: Any, fake_key: str
) -> None:
    leaked = "sk-proj-" + hashlib.sha256(b"not a real key").hexdigest()[:40]  # fake, built at run time
    path = tmp_path / "leaky.yaml"
    path.write_text(textwrap.dedent(f"""\
        interactions:
        - request:
            body: '{{"model": "gpt-test", "messages": []}}'
            headers:
              Authorization: ['Bearer {fake_key}']
              Content-Type: [application/json]
            method: POST
            uri: https://api.example.test/v1/chat/completions
          response:
            body: {{string: '{{"note": "your key is {leaked}"}}'}}
            headers:
              Content-Type: [application/json]
              Date: ['Tue, 03 Nov 2026 10:00:00 GMT']
            status: {{code: 200, message: OK}}
        version: 1
        """))
    r = casstore("import", "vcr", str(path), "--json", cwd=repo)
    assert r.exit_code == 0, r.stderr
    report = r.json[0]
    assert report["name"] == "leaky" and report["entries"] == 1
    assert sum(report["redaction_hits"].values()) >= 2, report
    text = (repo / "tests" / "cassettes" / "leaky.json").read_text()
    assert fake_key not in text and leaked not in text
    cas = load_file(repo / "tests" / "cassettes" / "leaky.json")
    assert cas.entries[0]["recorded_at"] == "2026-11-03T10:00:00Z"  # from the Date header
    assert cas.redaction["hits"] == report["redaction_hits"]
    human = casstore("import", "vcr", str(path), "--force", cwd=repo)
    assert human.exit_code == 0 and "redacted: " in human.stdout and "nothing" not in human.stdout


# -- hand-written shapes vcrpy (and Ruby VCR) produce --------------------------------------------


def test_gzip_stored_compressed_base64_and_ruby_vcr_bodies(
    tmp_path: Path, repo: Path, casstore: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import base64
    import gzip

    payload = json.dumps({"ok": True, "items": [1, 2, 3]}).encode()
    packed = base64.b64encode(gzip.compress(payload)).decode()
    blob = bytes(range(255, -1, -1))
    path = tmp_path / "shapes.yml"
    path.write_text(textwrap.dedent(f"""\
        http_interactions:
        - request:
            method: get
            uri: http://127.0.0.1:9/packed
            body: {{encoding: UTF-8, string: ''}}
            headers: {{Accept: ['*/*']}}
          response:
            status: {{code: 200, message: OK}}
            headers: {{Content-Type: [application/json], Content-Encoding: [gzip]}}
            body: {{encoding: ASCII-8BIT, base64_string: "{packed}"}}
          recorded_at: Mon, 02 Nov 2026 09:00:00 GMT
        - request:
            method: get
            uri: http://127.0.0.1:9/blob
            headers: {{Accept: ['*/*']}}
          response:
            status: {{code: 200, message: OK}}
            headers: {{Content-Type: [application/octet-stream]}}
            body: {{string: !!binary "{base64.b64encode(blob).decode()}"}}
        recorded_with: VCR 6.0.0
        """))
    r = casstore("import", "vcr", str(path), cwd=repo)
    assert r.exit_code == 0, r.stderr
    cas = load_file(repo / "tests" / "cassettes" / "shapes.json")
    assert cas.entries[0]["recorded_at"] == "2026-11-02T09:00:00Z"
    assert "content-encoding" not in cas.entries[0]["response"]["headers"]
    monkeypatch.setenv("CASSTORE_OFFLINE", "1")
    with cs.use("shapes"):
        packed_r = requests.get("http://127.0.0.1:9/packed", timeout=5)
        blob_r = httpx.get("http://127.0.0.1:9/blob")
    assert packed_r.content == payload and packed_r.json()["items"] == [1, 2, 3]
    assert blob_r.content == blob


def test_folder_import_names_by_path_and_skips_casstore_files(tmp_path: Path, repo: Path, casstore: Any) -> None:
    src = tmp_path / "cassettes"
    (src / "test_orders").mkdir(parents=True)
    one = _minimal_yaml("http://127.0.0.1:9/a")
    (src / "test_orders" / "test_refund[gpt-4].yaml").write_text(one)
    (src / "test_orders" / "test_ship.yml").write_text(_minimal_yaml("http://127.0.0.1:9/b"))
    (src / "already.json").write_text(json.dumps({"format": "casstore.cassette/v1", "name": "already",
                                                  "entries": [], "meta": {}}))
    r = casstore("import", "vcr", str(src), "--json", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert sorted(x["name"] for x in r.json) == ["test_orders/test_refund-gpt-4", "test_orders/test_ship"]
    assert (repo / "tests" / "cassettes" / "test_orders" / "test_refund-gpt-4.json").is_file()


def _minimal_yaml(uri: str, *, extra: str = "") -> str:
    return textwrap.dedent(f"""\
        interactions:
        - request:
            body: null
            headers: {{Accept: ['*/*']}}
            method: GET
            uri: {uri}
          response:
            body: {{string: 'hello'}}
            headers: {{Content-Type: [text/plain]}}
            status: {{code: 200, message: OK}}
        {extra}version: 1
        """)


# -- malformed input: file and line, nothing half-imported ------------------------------------------


def _state(repo: Path) -> tuple[list[str], str | None]:
    cassettes = sorted(p.relative_to(repo).as_posix() for p in (repo / "tests" / "cassettes").rglob("*") if p.is_file())
    lock = repo / "casstore.lock"
    return cassettes, lock.read_text() if lock.exists() else None


BAD_YAML = {
    # name: (text, expected line, words in the message)
    "syntax": ("interactions:\n- request:\n    method: GET\n    uri: [unclosed\n  response: {}\nversion: 1\n", 5, "not valid YAML"),
    "no_uri": (
        "interactions:\n"
        "- request: {method: GET, uri: 'http://127.0.0.1:9/ok', headers: {}, body: null}\n"
        "  response: {status: {code: 200}, headers: {}, body: {string: ok}}\n"
        "- request: {method: GET, headers: {}, body: null}\n"
        "  response: {status: {code: 200}, headers: {}, body: {string: ok}}\n"
        "version: 1\n",
        4, "interaction 2: request.uri",
    ),
    "bad_status": (
        "version: 1\ninteractions:\n"
        "- request: {method: GET, uri: 'http://127.0.0.1:9/x', headers: {}, body: null}\n"
        "  response: {status: {code: seven}, headers: {}, body: {string: ok}}\n",
        3, "interaction 1: response.status",
    ),
    "python_tag": (
        "interactions:\n- request: !!python/object/apply:os.system ['echo pwned']\n  response: {}\nversion: 1\n",
        2, "unsupported YAML tag (tag:yaml.org,2002:python/object/apply:os.system)",
    ),
    # a custom tag is the file's own text (here a fake key): refused without quoting it
    "custom_tag": (
        "interactions:\n- request: !sk-fakeT3stKEYnotREAL0123456789 {}\n  response: {}\nversion: 1\n",
        2, "unsupported YAML tag (a custom tag)",
    ),
    "header_crlf": (
        "interactions:\n"
        "- request: {method: GET, uri: 'http://127.0.0.1:9/x', headers: {X-A: [\"a\\r\\nX-Evil: 1\"]}, body: null}\n"
        "  response: {status: {code: 200}, headers: {}, body: {string: ok}}\nversion: 1\n",
        2, "line break",
    ),
    "method_newline": (  # "$" in a .match also takes a final newline: "GET\\n" is no HTTP method
        "version: 1\ninteractions:\n"
        "- request: {method: \"GET\\n\", uri: 'http://127.0.0.1:9/x', headers: {}, body: null}\n"
        "  response: {status: {code: 200}, headers: {}, body: {string: ok}}\n",
        3, "interaction 1: request.method",
    ),
    "status_superscript": (  # "\u00b2".isdigit() is true, int("\u00b2") a ValueError
        "version: 1\ninteractions:\n"
        "- request: {method: GET, uri: 'http://127.0.0.1:9/x', headers: {}, body: null}\n"
        "  response: {status: {code: \"2\u00b200\"}, headers: {}, body: {string: ok}}\n",
        3, "interaction 1: response.status",
    ),
    "status_arabic_digits": (  # int() reads Unicode digits: "\u0662\u0660\u0660" would be 200
        "version: 1\ninteractions:\n"
        "- request: {method: GET, uri: 'http://127.0.0.1:9/x', headers: {}, body: null}\n"
        "  response: {status: {code: \"\u0662\u0660\u0660\"}, headers: {}, body: {string: ok}}\n",
        3, "interaction 1: response.status",
    ),
    "status_5000_digits": (  # past int()'s 4300-digit limit: a ValueError
        "version: 1\ninteractions:\n"
        "- request: {method: GET, uri: 'http://127.0.0.1:9/x', headers: {}, body: null}\n"
        "  response: {status: {code: \"" + "2" * 5000 + "\"}, headers: {}, body: {string: ok}}\n",
        3, "interaction 1: response.status",
    ),
    "old_format": ("- request: {method: GET}\n  response: {}\n", 1, "vcr.migration"),
    "not_vcr": ("just: a mapping\n", 1, "not a vcrpy cassette"),
}


@pytest.mark.parametrize("case", sorted(BAD_YAML))
def test_malformed_yaml_names_file_and_line_and_writes_nothing(
    tmp_path: Path, repo: Path, casstore: Any, case: str
) -> None:
    text, line, words = BAD_YAML[case]
    good = tmp_path / "good.yaml"
    good.write_text(_minimal_yaml("http://127.0.0.1:9/fine"))
    bad = tmp_path / f"{case}.yaml"
    bad.write_text(text)
    before = _state(repo)
    r = casstore("import", "vcr", str(good), str(bad), "--add", cwd=repo)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    first = r.stderr.strip().splitlines()
    assert len(first) == 1, r.stderr  # one clear line, no traceback
    assert first[0].startswith(f"error: {case}.yaml:{line}: "), first[0]
    assert words in first[0]
    assert "fakeT3st" not in r.stdout + r.stderr
    assert _state(repo) == before  # the good file was not written, nothing pinned


def test_hostile_yaml_is_refused_quickly_without_a_crash(tmp_path: Path, repo: Path, casstore: Any) -> None:
    bomb = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    prev = "a"
    for i in range(1, 10):  # 9**10 nodes if expanded
        bomb += f"l{i}: &l{i} [" + ",".join([f"*{prev}"] * 9) + "]\n"
        prev = f"l{i}"
    (tmp_path / "bomb.yaml").write_text(bomb + f"interactions: *{prev}\nversion: 1\n")
    depth = 100_000  # deep enough to crash a recursive composer
    (tmp_path / "deep.yaml").write_text("interactions: " + "[" * depth + "]" * depth + "\n")
    before = _state(repo)
    r = casstore("import", "vcr", str(tmp_path / "bomb.yaml"), cwd=repo)
    assert r.exit_code == 2 and r.stderr.startswith("error: bomb.yaml: ") and "aliases" in r.stderr, r.stderr
    r = casstore("import", "vcr", str(tmp_path / "deep.yaml"), cwd=repo)
    # our own depth bound or PyYAML's (6.0.3+ has one, worded its own way): either way one line
    # naming the file and line, and a word about nesting; not the library's whole message
    assert r.exit_code == 2 and r.stderr.startswith("error: deep.yaml:1: "), r.stderr
    assert "nest" in r.stderr.lower() and r.stderr.count("\n") == 1, r.stderr
    assert _state(repo) == before


def test_malformed_json_cassettes_report_lines(tmp_path: Path, repo: Path, casstore: Any) -> None:
    interactions = [
        {"request": {"method": "GET", "uri": "http://127.0.0.1:9/a", "headers": {}, "body": None},
         "response": {"status": {"code": 200, "message": "OK"}, "headers": {}, "body": {"string": "a"}}},
        {"request": {"method": "GET", "uri": "http://127.0.0.1:9/b", "headers": {}, "body": None},
         "response": {"status": {"code": 200, "message": "OK"}, "headers": {}, "body": {"string": 7}}},
    ]
    text = json.dumps({"interactions": interactions, "version": 1}, indent=4)
    path = tmp_path / "bad.json"
    path.write_text(text)
    second = [i for i, ln in enumerate(text.splitlines(), 1) if ln.strip() == "{"][2]  # 2nd interaction's brace
    before = _state(repo)
    r = casstore("import", "vcr", str(path), cwd=repo)
    assert r.exit_code == 2
    assert r.stderr.startswith(f"error: bad.json:{second}: interaction 2: response.body"), r.stderr
    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "version": 1,\n  "interactions": [\n    {"request": }\n  ]\n}\n')
    r = casstore("import", "vcr", str(broken), cwd=repo)
    assert r.exit_code == 2 and r.stderr.startswith("error: broken.json:4: not valid JSON"), r.stderr
    assert _state(repo) == before


def test_usage_errors(tmp_path: Path, repo: Path, casstore: Any) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(_minimal_yaml("http://127.0.0.1:9/a"))
    b.write_text(_minimal_yaml("http://127.0.0.1:9/b"))
    r = casstore("import", "vcr", str(a), str(b), "--name", "both", cwd=repo)
    assert r.exit_code == 2 and "--name needs exactly one" in r.stderr
    r = casstore("import", "vcr", str(a), "--name", "../escape", cwd=repo)
    assert r.exit_code == 2 and "invalid cassette name" in r.stderr
    r = casstore("import", "vcr", str(tmp_path / "missing.yaml"), cwd=repo)
    assert r.exit_code == 2 and "no such file" in r.stderr
    assert casstore("import", "vcr", str(a), cwd=repo).exit_code == 0
    r = casstore("import", "vcr", str(a), cwd=repo)  # never clobber a working copy silently
    assert r.exit_code == 2 and "--force" in r.stderr
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.yml").write_text(_minimal_yaml("http://127.0.0.1:9/c"))
    r = casstore("import", "vcr", str(a), str(tmp_path / "sub" / "a.yml"), "--force", cwd=repo)
    assert r.exit_code == 2 and "would both become cassette 'a'" in r.stderr
    # a vcrpy JSON file inside the cassette dir must not be overwritten by its own import
    inside = repo / "tests" / "cassettes" / "legacy_json.json"
    inside.write_text(json.dumps({"interactions": [], "version": 1}))
    r = casstore("import", "vcr", str(inside), "--force", cwd=repo)
    assert r.exit_code == 2 and "overwrite the file being imported" in r.stderr
    assert json.loads(inside.read_text()) == {"interactions": [], "version": 1}
