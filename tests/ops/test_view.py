"""`casstore view`: the self-contained page of pinned cassettes, read in a real headless browser
(Debian's chromium over the DevTools protocol, tests/helpers/browser.py) after its script ran."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from casstore.ops.view import ROW_FIELDS, entry_view, stream_answer
from casstore.ops.view_page import render_page
from tests.helpers.browser import Browser, needs_chromium
from tests.helpers.cassettes import make_cassette
from tests.helpers.commands import REPO
from tests.helpers.llm_server import LLMServer

CHAT = "https://api.openai.com/v1/chat/completions"
XSS = [
    "<script>window.__pwned = 'script'</script>",
    "<img src=x onerror=\"window.__pwned = 'img'\">",
    "javascript:window.__pwned='href'",
    "</script><script>window.__pwned = 'breakout'</script><!--",
    "<!-- <script>window.__pwned = 'comment'</script>",
    "\u2028</SCRIPT ><svg onload=\"window.__pwned='svg'\">",
]


def _entry(seq: int, request: dict[str, Any], response: dict[str, Any], *, kind: str = "llm",
           target: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"identity": hashlib.sha256(json.dumps([seq, request], sort_keys=True).encode()).hexdigest(),
            "seq": seq, "kind": kind, "target": target or f"{request.get('method', 'POST')} {request.get('url', CHAT)}",
            "request": request, "response": response, "recorded_at": "2026-11-20T10:00:00Z", "duration_ms": 40 + seq,
            **extra}


def _chat(body: dict[str, Any]) -> dict[str, Any]:
    return {"method": "POST", "url": CHAT, "headers": {"content-type": "application/json",
                                                        "authorization": "Bearer [REDACTED:authorization]"}, "body": body}


def agent_cassette() -> dict[str, Any]:
    """An agent run: a tool call and its result, a streamed answer, a tool entry, a gzip body, a 500."""
    messages = [
        {"role": "system", "content": "You are the refunds agent."},
        {"role": "user", "content": "Refund order 7"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "lookup_order", "arguments": "{\"order\": 7}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"order\": 7, \"paid\": 42.5}"},
    ]
    sse = [f"data: {json.dumps({'choices': [{'delta': {'content': part}}]})}\n\n" for part in ("Refund ", "of 42.50 ", "approved.")]
    sse.append("data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": 31, "completion_tokens": 9}}) + "\n\n")
    sse.append("data: [DONE]\n\n")
    entries = [
        _entry(0, _chat({"model": "gpt-4o-mini", "messages": messages[:2],
                         "tools": [{"type": "function", "function": {"name": "lookup_order"}}]}),
               {"status": 200, "headers": {"content-type": "application/json"},
                "body": {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": messages[2]["tool_calls"]}}],
                         "usage": {"prompt_tokens": 20, "completion_tokens": 5}}}),
        _entry(1, {"args": [7], "kwargs": {}}, {"result": {"order": 7, "paid": 42.5}}, kind="tool", target="lookup_order"),
        _entry(2, _chat({"model": "gpt-4o-mini", "messages": messages, "stream": True}),
               {"status": 200, "headers": {"content-type": "text/event-stream"}, "stream": True, "chunks": sse},
               timing={"headers_ms": 3, "chunks_ms": [5, 210, 415, 600, 601]}),
        _entry(3, {"method": "GET", "url": "https://status.example.com/feed", "headers": {}},
               {"status": 200, "headers": {"content-type": "application/json", "content-encoding": "gzip"},
                "body_base64": base64.b64encode(gzip.compress(b'{"feed": "all systems go"}')).decode()}, kind="http"),
        _entry(4, _chat({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "again"}]}),
               {"status": 500, "headers": {"content-type": "application/json"}, "body": {"error": {"message": "overloaded"}}}),
    ]
    doc = make_cassette("agent", n=0)
    doc["entries"] = entries
    doc["meta"] = {"recorded_at": "2026-11-20T10:00:00Z", "recorder": "tests", "models": ["gpt-4o-mini"],
                   "fingerprint": "sha256:" + "f1" * 32, "git": {"commit": "0a1b2c3d4e5f" * 3, "branch": "main", "dirty": True},
                   "platform": {"implementation": "CPython", "python": "3.12.1", "os": "linux", "arch": "x86_64"},
                   "packages": {"httpx": "0.28.1", "openai": "1.99.0"}, "test_file": "tests/test_refunds.py"}
    return doc


def _pin_doc(casstore, repo: Path, doc: dict[str, Any]) -> None:  # type: ignore[no-untyped-def]
    path = repo / "tests" / "cassettes" / f"{doc['name']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    r = casstore("add", str(path), cwd=repo)
    assert r.exit_code == 0, r.stderr


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    b = Browser()
    yield b
    b.close()


def _fresh(browser: Browser) -> Browser:
    browser.events.clear()
    return browser


def _png_is_not_blank(png: bytes) -> bool:
    """More than one colour among the screenshot's pixels (stdlib PNG read: IHDR, IDAT, zlib)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(png):
        (n,), kind = struct.unpack(">I", png[pos:pos + 4]), png[pos + 4:pos + 8]
        if kind == b"IHDR":
            width = struct.unpack(">I", png[pos + 8:pos + 12])[0]
        elif kind == b"IDAT":
            idat += png[pos + 8:pos + 8 + n]
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = 1 + width * 4  # RGBA rows with a filter byte each
    pixels = {raw[r * stride + 1 + c * 4: r * stride + 5 + c * 4] for r in range(0, len(raw) // stride, 7)
              for c in range(0, width, 5)}
    return len(pixels) > 3


# -- in the browser ---------------------------------------------------------------------------
@needs_chromium
def test_index_lists_every_pin_and_loads_nothing(repo: Path, casstore, browser: Browser) -> None:  # type: ignore[no-untyped-def]
    _pin_doc(casstore, repo, agent_cassette())
    _pin_doc(casstore, repo, make_cassette("triage", n=3))
    r = casstore("view", "-o", "index.html", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert "wrote index.html (2 cassettes)" in r.stdout
    b = _fresh(browser)
    b.open(repo / "index.html")
    rows = b.eval("Array.from(document.querySelectorAll('tr.pin')).map(r => [r.dataset.name, r.children[1].textContent])")
    assert rows == [["agent", "5"], ["triage", "3"]]
    assert b.eval("document.querySelector('tr.pin [data-trusted]').dataset.trusted") == "yes"
    assert b.requests() == [(repo / "index.html").resolve().as_uri()], b.requests()
    b.eval("const f = document.getElementById('filter'); f.value = 'gpt-4o'; f.dispatchEvent(new Event('input'))")
    assert b.eval("Array.from(document.querySelectorAll('tr.pin:not(.hidden)')).map(r => r.dataset.name)") == ["agent"]


USES_AGENT = """
import os

import requests

import casstore


@casstore.use("agent_case")
def test_agent():
    r = requests.post(os.environ["STUB_URL"] + "/v1/chat/completions", timeout=5,
                      json={"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200
"""


@needs_chromium
def test_the_index_says_which_test_file_recorded_each_pin(repo: Path, casstore, browser: Browser,  # type: ignore[no-untyped-def]
                                                            llm_server: LLMServer) -> None:
    (repo / "tests" / "test_agent.py").write_text(USES_AGENT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "CASSTORE_MODE", "CI"))}
    env.update(STUB_URL=llm_server.url, CASSTORE_MODE="record", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                          "casstore.replay.pytest_plugin", "tests/test_agent.py"],
                         cwd=repo, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert run.returncode == 0 and "pinned 1 recorded cassette" in run.stdout, run.stdout + run.stderr
    assert llm_server.count == 1
    _pin_doc(casstore, repo, make_cassette("hand_made", n=1))  # added by hand: no test recorded it
    assert casstore("view", "-o", "index.html", cwd=repo).exit_code == 0
    b = _fresh(browser)
    b.open(repo / "index.html")
    used = b.eval("Object.fromEntries(Array.from(document.querySelectorAll('tr.pin')).map(r => "
                  "[r.dataset.name, [r.querySelector('td.used').textContent, r.querySelector('td.used').className]]))")
    assert used == {"agent_case": ["tests/test_agent.py", "mono used"],
                    "hand_made": ["not recorded by a pytest run", "used mute"]}
    # a pin whose object is not in the local cache: said so, nothing downloaded
    shutil.rmtree(os.environ["CASSTORE_CACHE_DIR"])
    assert casstore("view", "-o", "index.html", cwd=repo).exit_code == 0
    b.open(repo / "index.html")
    assert b.eval("document.querySelector('tr.pin td.used').textContent") == "not in the local cache (casstore pull)"
    assert not Path(os.environ["CASSTORE_CACHE_DIR"]).exists() or not any(Path(os.environ["CASSTORE_CACHE_DIR"]).rglob("*.zst"))


@needs_chromium
def test_a_cassette_page_shows_the_timeline_and_the_conversation(repo: Path, casstore, browser: Browser) -> None:  # type: ignore[no-untyped-def]
    _pin_doc(casstore, repo, agent_cassette())
    r = casstore("view", "agent", "-o", "agent.html", cwd=repo)
    assert r.exit_code == 0, r.stderr
    b = _fresh(browser)
    b.open(repo / "agent.html")
    timeline = b.eval("Array.from(document.querySelectorAll('tr.row')).map(r => "
                      "[r.dataset.seq, r.dataset.kind, r.querySelector('.status').textContent, r.children[5].textContent])")
    assert timeline == [["0", "llm", "200", ""], ["1", "tool", "ok", ""], ["2", "llm", "200", "5"],
                        ["3", "http", "200", ""], ["4", "llm", "500", ""]]
    head = b.eval("Object.fromEntries(Array.from(document.querySelectorAll('dl.head dt')).map(t => [t.textContent, t.nextSibling.textContent]))")
    assert head["digest"].startswith("sha256:") and head["models"] == "gpt-4o-mini"
    assert head["git"] == "0a1b2c3d4e5f on main (uncommitted changes)"  # provenance, as the recorder writes it
    assert head["platform"] == "CPython 3.12.1 on linux x86_64" and head["packages"] == "httpx 0.28.1, openai 1.99.0"
    assert head["fingerprint"] == "sha256:" + "f1" * 32 and head["test file"] == "tests/test_refunds.py"
    assert b.eval("document.querySelector('h2 [data-trusted]').dataset.trusted") == "yes"
    # the streamed call: turns, the tool call with its arguments and result, the assembled answer
    b.eval("document.querySelector('tr.row[data-seq=\"2\"]').click()")
    turns = b.eval("Array.from(document.querySelectorAll('.turn')).map(t => [t.dataset.role, t.querySelector('pre') ? t.querySelector('pre').textContent : ''])")
    assert turns[:2] == [["system", "You are the refunds agent."], ["user", "Refund order 7"]]
    assert turns[2][0] == "assistant" and b.eval("document.querySelector('.toolcall .tname').textContent") == "lookup_order"
    assert '"order": 7' in b.eval("document.querySelector('.toolcall .args').textContent")
    assert turns[3] == ["tool", '{"order": 7, "paid": 42.5}']
    assert turns[4] == ["assistant", "Refund of 42.50 approved."]
    assert b.eval("document.querySelector('.usage').textContent") == "usage: 31 in + 9 out = 40 tokens"
    chunks = b.eval("Array.from(document.querySelectorAll('table.chunks tr')).slice(1, 4).map(r => r.children[1].textContent)")
    assert chunks == ["5", "210", "415"]
    # redacted values are marked; the gzip body is shown decoded
    b.eval("document.querySelectorAll('td.detail details').forEach(d => d.open = true)")  # built when opened
    assert "Bearer [REDACTED:authorization]" in b.eval("document.querySelector('td.detail').textContent")
    assert "[REDACTED:authorization]" in b.eval("Array.from(document.querySelectorAll('td.detail mark.red')).map(m => m.textContent)")
    # a row opens from the keyboard too
    b.eval("const r3 = document.querySelector('tr.row[data-seq=\"3\"]'); r3.focus(); "
           "r3.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true}))")
    assert b.eval("document.querySelector('tr.row[data-seq=\"3\"]').getAttribute('aria-expanded')") == "true"
    decoded = b.eval("Array.from(document.querySelectorAll('pre.decoded')).map(p => p.textContent)")
    assert any('"feed": "all systems go"' in d for d in decoded), decoded
    # the filter box narrows the timeline
    b.eval("const f = document.getElementById('filter'); f.value = 'overloaded'; f.dispatchEvent(new Event('input'))")
    assert b.eval("Array.from(document.querySelectorAll('tr.row')).map(r => r.dataset.seq)") == ["4"]
    assert _png_is_not_blank(b.screenshot())
    assert b.requests() == [(repo / "agent.html").resolve().as_uri()]


@needs_chromium
def test_redacted_values_are_marked(repo: Path, casstore, browser: Browser) -> None:  # type: ignore[no-untyped-def]
    doc = make_cassette("leak", n=1, body={"choices": [{"message": {"content": "key [REDACTED:openai-key] gone"}}]})
    _pin_doc(casstore, repo, doc)
    assert casstore("view", "leak", "-o", "leak.html", cwd=repo).exit_code == 0
    b = _fresh(browser)
    b.open(repo / "leak.html")
    b.eval("document.querySelector('tr.row').click()")
    assert b.eval("Array.from(document.querySelectorAll('.turn mark.red')).map(m => [m.textContent, m.title])") == \
        [["[REDACTED:openai-key]", "redacted"]]


@needs_chromium
def test_recorded_markup_stays_inert_text(repo: Path, casstore, browser: Browser) -> None:  # type: ignore[no-untyped-def]
    doc = make_cassette("hostile", n=len(XSS))
    for e, payload in zip(doc["entries"], XSS, strict=True):
        e["request"]["body"]["messages"][0]["content"] = payload
        e["request"]["url"] = payload  # the timeline's call column
        e["response"]["body"] = {"choices": [{"message": {"content": payload}}], "note": {payload: [payload]}}
    doc["meta"]["models"] = XSS
    doc["meta"]["packages"] = {p: p for p in XSS}
    doc["meta"]["git"] = {"branch": XSS[0], "commit": XSS[1]}
    _pin_doc(casstore, repo, doc)
    for args in (["view", "hostile", "-o", "hostile.html"], ["view", "-o", "hostile-index.html"]):
        assert casstore(*args, cwd=repo).exit_code == 0
    b = _fresh(browser)
    b.open(repo / "hostile.html")
    for i in range(len(XSS)):
        b.eval(f"document.querySelectorAll('tr.row')[{i}].click()")
    b.eval("document.querySelectorAll('details').forEach(d => d.open = true)")  # every lazy JSON node built
    b.eval("document.querySelectorAll('details').forEach(d => d.open = true)")
    assert b.eval("window.__pwned === undefined") is True
    assert b.dialogs() == []
    assert b.eval("document.querySelectorAll('main script, main img, main svg, main a, main iframe').length") == 0
    texts = b.eval("Array.from(document.querySelectorAll('.turn pre')).map(p => p.textContent)")
    for payload in XSS:
        assert texts.count(payload) == 2, (payload, texts)  # the user turn and the answer, as text
    assert b.eval("document.querySelectorAll('tr.row').length") == len(XSS)
    b.open(repo / "hostile-index.html")
    assert b.eval("window.__pwned === undefined") is True
    models = b.eval("document.querySelector('tr.pin').children[2].textContent")
    assert all(payload in models for payload in XSS), models
    assert all(u.startswith("file://") for u in b.requests()), b.requests()


@needs_chromium
def test_awkward_recordings_stay_readable(repo: Path, casstore, browser: Browser) -> None:  # type: ignore[no-untyped-def]
    """A long URL, a binary body, a text body, a huge string and an empty cassette."""
    long_url = "https://api.example.com/v1/search?" + "&".join(f"p{i}=" + "x" * 40 for i in range(30))
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    huge = "word " * 5000
    doc = make_cassette("awkward", n=0)
    doc["entries"] = [
        _entry(0, {"method": "GET", "url": long_url, "headers": {}},
               {"status": 200, "headers": {"content-type": "image/png"}, "body_base64": base64.b64encode(png).decode()},
               kind="http"),
        _entry(1, {"method": "GET", "url": "https://x.example.com/missing", "headers": {}},
               {"status": 404, "headers": {"content-type": "text/html"}, "body_text": "<h1>Not found</h1>\nsorry, \"order 7\" is gone"}, kind="http"),
        _entry(2, {"method": "GET", "url": "https://x.example.com/big", "headers": {}},
               {"status": 200, "headers": {"content-type": "application/json"}, "body": {"text": huge}}, kind="http"),
    ]
    _pin_doc(casstore, repo, doc)
    _pin_doc(casstore, repo, make_cassette("empty", n=0))
    assert casstore("view", "awkward", "empty", "-o", "awkward.html", cwd=repo).exit_code == 0
    b = _fresh(browser)
    b.open(repo / "awkward.html")
    # the long URL: two lines in the timeline, all of it on hover and in the detail; the page never scrolls sideways
    call = "document.querySelector('tr.row[data-seq=\"0\"] td.what')"
    assert b.eval(f"{call}.title") == f"GET {long_url}"
    assert b.eval(f"{call}.getBoundingClientRect().height") < 60
    b.eval("document.querySelectorAll('tr.row').forEach(r => r.click())")
    assert b.eval("document.documentElement.scrollWidth <= window.innerWidth") is True
    # the binary body: a hex dump of its start, said to be binary
    notes = b.eval("Array.from(document.querySelectorAll('td.detail .role')).map(r => r.textContent)")
    assert any("binary (not UTF-8)" in n for n in notes), notes
    assert b.eval("document.querySelector('pre.decoded').textContent").startswith("00000000  89 50 4e 47 0d 0a 1a 0a")
    # the text body as recorded text (its markup inert)
    assert b.eval("document.querySelector('pre.plain').textContent") == '<h1>Not found</h1>\nsorry, "order 7" is gone'
    assert b.eval("document.querySelectorAll('main h1').length") == 0
    # the huge string: its start, and all of it on demand
    b.eval("document.querySelectorAll('td.detail details').forEach(d => d.open = true)")
    button = "Array.from(document.querySelectorAll('button.rest')).find(x => x.textContent.includes('25000'))"
    assert b.eval(f"{button}.textContent") == "show all 25000 characters"
    b.eval(f"{button}.click()")
    assert b.eval(f"Array.from(document.querySelectorAll('span.str')).some(x => x.textContent === {json.dumps(json.dumps(huge))})") is True
    # the filter finds text as shown, markup and quotes included (not as escaped in the page's JSON)
    for q, seqs in (("<h1>not found", ["1"]), ('"order 7" is gone', ["1"]), ("p29=xx", ["0"])):
        b.eval(f"{{ const f = document.getElementById('filter'); f.value = {json.dumps(q)}; f.dispatchEvent(new Event('input')) }}")
        assert b.eval("Array.from(document.querySelectorAll('tr.row')).map(r => r.dataset.seq)") == seqs, q
    # the empty cassette says so
    assert b.eval("document.querySelector('section[data-name=empty] .empty').textContent") == "no entries: this cassette is empty"
    assert b.eval("document.querySelectorAll('section[data-name=empty] table').length") == 0
    assert _png_is_not_blank(b.screenshot())


WORDS = ("order refund parcel customer invoice shipping account payment address delivery status policy "
         "return receipt warehouse tracking carrier credit balance subscription renewal discount coupon "
         "the a of to and for with is was will please thanks today tomorrow week late early missing "
         "damaged replaced approved denied pending review escalate agent support ticket note").split()


def big_entries(n: int = 10_000) -> list[dict[str, Any]]:
    """``n`` entries: the agent run repeated, each with its own words in the prompts and the
    streamed answer, and its own identity (a page of one run copied is not what users have)."""
    import random

    doc = agent_cassette()
    out = []
    for i in range(n):
        words = random.Random(i).choices(WORDS, k=40)
        text = json.dumps(doc["entries"][i % 5]).replace("Refund order 7", f"Refund order {i}: " + " ".join(words[:30]))
        e = json.loads(text.replace("approved.", "approved: " + " ".join(words[30:]) + "."))
        out.append({**e, "seq": i, "identity": hashlib.sha256(text.encode() + str(i).encode()).hexdigest()})
    return out


def big_page(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The data of a page holding one cassette of ``entries`` (:func:`big_entries`)."""
    views = [entry_view(e, i) for i, e in enumerate(entries)]
    return {"page": "cassettes", "project": "bench", "rev": "working tree", "generated": "now", "row_fields": ROW_FIELDS,
            "limits": {"max_age_days": 90, "warn_age_days": 60, "max_cassette_bytes": 1},
            "cassettes": [{"name": "big", "digest": "sha256:0", "size": 1, "models": [], "signers": [], "trusted": [],
                           "recorded_from": None, "recorded_to": None, "age_days": None, "meta": {},
                           "redaction": {"rules": [], "hits": {}}, "rehits": {},
                           "rows": [r for r, _d in views], "details": [d for _r, d in views]}]}


@needs_chromium
def test_a_large_cassette_is_rendered_lazily(tmp_path: Path, browser: Browser) -> None:
    """Only the first rows are built at load; the rest on demand (the 10k figure is in
    docs/benchmarks.md, measured by benchmarks/bench_view.py)."""
    page = tmp_path / "big.html"
    page.write_text(render_page(big_page(big_entries(2_000))), encoding="utf-8")
    b = _fresh(browser)
    b.open(page)
    assert b.eval("document.querySelectorAll('tr.row').length") == 200
    assert b.eval("document.querySelector('section .role').textContent") == "2000 of 2000 entries"
    b.eval("document.querySelector('button.more').click()")
    assert b.eval("document.querySelectorAll('tr.row').length") == 1200
    b.eval("const f = document.getElementById('filter'); f.value = 'all systems go'; f.dispatchEvent(new Event('input'))")
    assert b.eval("document.querySelector('section .role').textContent") == "400 of 2000 entries"
    b.eval("document.querySelector('tr.row').click()")
    assert b.eval("document.querySelector('tr.row').dataset.seq") == "3"
    assert "all systems go" in b.eval("document.querySelector('pre.decoded').textContent")


# -- without a browser ------------------------------------------------------------------------
def test_an_anthropic_call_reads_as_a_conversation() -> None:
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 12, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Checking "}},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "tu_1", "name": "weather"}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"city\": "}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "\"Oslo\"}"}},
        {"type": "message_delta", "usage": {"output_tokens": 20}},
    ]
    body = {"model": "claude-x", "system": "Be brief.", "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "tu_0", "name": "weather", "input": {"city": "Bergen"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_0", "content": "rain"}]}]}
    entry = _entry(0, {"method": "POST", "url": "https://api.anthropic.com/v1/messages", "body": body},
                   {"status": 200, "stream": True, "chunks": [f"event: x\ndata: {json.dumps(e)}\n\n" for e in events]},
                   timing={"headers_ms": 2, "chunks_ms": [3, 4, 90, 91, 92, 93, 94]})
    row, detail = entry_view(entry, 0)
    convo = detail["convo"]
    # a turn whose text is a message's string content names that message ("m")
    assert [(t["role"], t["text"] if "text" in t else body["messages"][t["m"]]["content"]) for t in convo["turns"]] == [
        ("system", "Be brief."), ("user", "Weather in Oslo?"), ("assistant", ""), ("tool", "rain")]
    assert convo["turns"][1] == {"role": "user", "m": 0}
    assert convo["turns"][2]["tool_calls"] == [{"id": "tu_0", "name": "weather", "arguments": {"city": "Bergen"}}]
    assert convo["turns"][3]["tool_call_id"] == "tu_0"
    assert stream_answer(convo) == "Checking "
    assert convo["answer_tool_calls"] == [{"id": "tu_1", "name": "weather", "arguments": '{"city": "Oslo"}'}]
    assert convo["usage"] == [12, 20]
    assert convo["chunks"][:3] == [[3, None], [4, None], [90, "Checking "]]
    assert dict(zip(ROW_FIELDS, row, strict=True))["ttfb"] == 3


def test_view_at_a_revision_shows_that_revision_s_pins(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    from tests.helpers.gitrepo import commit

    _pin_doc(casstore, repo, make_cassette("triage", n=1))
    commit(repo, "one")
    _pin_doc(casstore, repo, make_cassette("triage", n=3))
    r = casstore("view", "--rev", "HEAD", "-o", "-", cwd=repo)
    assert r.exit_code == 0, r.stderr
    pins = json.loads(r.stdout.split('id="casstore-data">', 1)[1].split("</script>", 1)[0])["pins"]
    assert [(p["name"], p["entries"]) for p in pins] == [("triage", 1)]


def test_recorded_text_cannot_end_the_data_block() -> None:
    row, detail = entry_view(make_cassette("x", n=1, body={"t": "</script><!--<script>\u2028&"})["entries"][0], 0)
    page = render_page({"page": "cassettes", "row_fields": ROW_FIELDS,
                        "cassettes": [{"name": "x</title><script>", "rows": [row], "details": [detail]}]})
    for block in ("casstore-data", "casstore-details"):
        data = page.split(f'id="{block}">', 1)[1].split("</script>", 1)[0]
        assert "<" not in data and ">" not in data and "\u2028" not in data, block
    detail = json.loads(data.splitlines()[0])
    assert detail["entry"]["response"]["body"]["t"] == "</script><!--<script>\u2028&"
    assert page.count("<script") == 3 and "x&lt;/title&gt;" in page
    assert "http://" not in page.replace("http://127.0.0.1", "") and "https://" not in page


def test_an_unknown_name_or_revision_exits_2(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    _pin_doc(casstore, repo, make_cassette("triage", n=1))
    r = casstore("view", "triag", cwd=repo)
    assert r.exit_code == 2 and "triage" in r.stderr
    r = casstore("view", "--rev", "no-such-rev", cwd=repo)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert not (repo / "casstore-view.html").exists()


def test_a_pin_that_does_not_verify_is_not_shown(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    from casstore.project import Project
    from tests.helpers.cassettes import damage_cached

    _pin_doc(casstore, repo, make_cassette("triage", n=1))
    digest = Project.discover(repo).load_lock().pins["triage"].digest
    damage_cached(Path(Project.discover(repo).cache.root), digest)  # not pushed: no other copy
    r = casstore("view", "triage", "-o", "t.html", cwd=repo)
    assert r.exit_code == 1, (r.stdout, r.stderr)
    assert not (repo / "t.html").exists()


# -- --open, as a user runs it (python's webbrowser honours $BROWSER) -------------------------
def _open_env(tmp: Path, **extra: str) -> dict[str, str]:
    """The test's environment without a display or $BROWSER, and a PATH that holds only git:
    no browser can be found on this machine's PATH either."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    git_exe = shutil.which("git")
    assert git_exe is not None
    if not (bin_dir / "git").exists():
        (bin_dir / "git").symlink_to(git_exe)
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER")}
    env["PATH"] = str(bin_dir)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return {**env, **extra}


def _view(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "casstore.cli", "view", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_open_hands_the_page_s_file_url_to_the_browser(repo: Path, casstore, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _pin_doc(casstore, repo, make_cassette("triage", n=1))
    got = tmp_path / "browser-got.txt"
    browser = tmp_path / "fake-browser"
    browser.write_text(f"#!{sys.executable}\nimport pathlib, sys\npathlib.Path({str(got)!r}).write_text(sys.argv[1])\n")
    browser.chmod(0o755)
    (repo / "review").mkdir()
    r = _view("triage", "-o", "review/page.html", "--open", cwd=repo, env=_open_env(tmp_path, BROWSER=str(browser)))
    assert r.returncode == 0 and r.stderr == "", r
    assert "wrote review/page.html (1 cassette)" in r.stdout
    page = repo / "review" / "page.html"
    assert got.read_text() == page.resolve().as_uri()  # an absolute file:// URL, not a relative path
    assert page.is_file() and "casstore-data" in page.read_text()


def test_open_without_a_browser_still_writes_the_page(repo: Path, casstore, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _pin_doc(casstore, repo, make_cassette("triage", n=1))
    r = _view("triage", "-o", "page.html", "--open", cwd=repo, env=_open_env(tmp_path))
    assert r.returncode == 0, r.stderr
    page = (repo / "page.html").resolve()
    assert page.is_file() and "wrote page.html (1 cassette)" in r.stdout
    assert r.stderr == f"casstore: no browser to open the page (set BROWSER, or open {page.as_uri()})\n"
    # a browser that fails is the same: the page is written, one line says so
    r = _view("triage", "-o", "page.html", "--open", cwd=repo, env=_open_env(tmp_path, BROWSER="false"))
    assert r.returncode == 0 and r.stderr.count("\n") == 1 and "no browser to open the page" in r.stderr, r


def test_open_with_standard_output_exits_2(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    _pin_doc(casstore, repo, make_cassette("triage", n=1))
    r = casstore("view", "triage", "-o", "-", "--open", cwd=repo)
    assert r.exit_code == 2 and "--open opens a file" in r.stderr, (r.stdout, r.stderr)
    assert r.stdout == ""
