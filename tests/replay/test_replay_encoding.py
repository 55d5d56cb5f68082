"""Content-encoding on replay: the rule of docs/replay.md ("Compressed responses").

The stub answers ``/gzip`` gzip-encoded (``content-encoding: gzip``). Recorded through each
client and replayed offline, the decoded body is the one the client decoded live, and every
raw read (urllib3 ``decode_content=False`` / ``preload_content=False``, requests'
``r.raw``, httpx's ``iter_raw()``, aiohttp's ``auto_decompress=False``, ``urllib.request``
which never decodes) gets bytes that agree with the headers served with them: decoded
under their ``content-encoding`` (none on replay) they are that body, and
``content-length`` is their length. Live calls while recording see the network's bytes.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
import requests
import urllib3

from casstore.model.recording import decode_content
from tests.helpers.llm_server import LLMServer
from tests.helpers.replay import record_then_replay

# (what was read, its headers lower-cased, raw bytes or None, the body the client decoded or None)
Seen = tuple[str, dict[str, str], "bytes | None", "bytes | None"]


def _h(headers: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in headers.items()}


def _httpx(url: str) -> list[Seen]:
    with httpx.Client() as c:
        r = c.get(url + "?via=httpx")
        out: list[Seen] = [("httpx", _h(r.headers), None, r.content)]
        with c.stream("GET", url + "?via=httpx-raw") as s:
            out.append(("httpx iter_raw", _h(s.headers), b"".join(s.iter_raw()), None))
    return out


def _requests(url: str) -> list[Seen]:
    r = requests.get(url + "?via=requests", timeout=5)
    out: list[Seen] = [("requests", _h(r.headers), None, r.content)]
    s = requests.get(url + "?via=requests-raw", stream=True, timeout=5)
    out.append(("requests raw", _h(s.headers), s.raw.read(decode_content=False), None))
    return out


def _urllib3(url: str) -> list[Seen]:
    pm = urllib3.PoolManager()
    r = pm.request("GET", url + "?via=u3")
    out: list[Seen] = [("urllib3", _h(r.headers), None, r.data)]
    r = pm.request("GET", url + "?via=u3-nodecode", decode_content=False)
    out.append(("urllib3 decode_content=False", _h(r.headers), r.data, None))
    r = pm.request("GET", url + "?via=u3-read", preload_content=False)
    out.append(("urllib3 read(decode_content=False)", _h(r.headers), r.read(decode_content=False), None))
    r.release_conn()
    r = pm.request("GET", url + "?via=u3-stream", preload_content=False, decode_content=False)
    out.append(("urllib3 stream, decode_content=False", _h(r.headers), b"".join(r.stream(16)), None))
    r.release_conn()
    r = pm.request("GET", url + "?via=u3-stream-decoded", preload_content=False)
    out.append(("urllib3 stream", _h(r.headers), None, b"".join(r.stream(16))))
    r.release_conn()
    return out


def _aiohttp(url: str) -> list[Seen]:
    async def main() -> list[Seen]:
        async with aiohttp.ClientSession() as s, s.get(url + "?via=aiohttp") as r:
            first: Seen = ("aiohttp", _h(r.headers), None, await r.read())
        async with aiohttp.ClientSession(auto_decompress=False) as s, s.get(url + "?via=aiohttp-raw") as r:
            return [first, ("aiohttp auto_decompress=False", _h(r.headers), await r.read(), None)]

    return asyncio.run(main())


def _urllib_request(url: str) -> list[Seen]:
    with urllib.request.urlopen(url + "?via=urllib.request", timeout=5) as r:
        return [("urllib.request", _h(r.headers), r.read(), None)]


CLIENTS: dict[str, Callable[[str], list[Seen]]] = {
    "httpx": _httpx, "requests": _requests, "urllib3": _urllib3, "aiohttp": _aiohttp, "urllib.request": _urllib_request,
}


def _body(seen: Seen) -> bytes:
    """The body a reader gets out of what it saw: decoded by the client, or its raw bytes
    decoded under the headers they came with (which must agree with them)."""
    what, headers, raw, decoded = seen
    if raw is None:
        assert decoded is not None
        return decoded
    if "content-length" in headers:
        assert int(headers["content-length"]) == len(raw), f"{what}: content-length disagrees with the bytes"
    encoding = headers.get("content-encoding")
    if not encoding:
        return raw
    plain = decode_content(raw, encoding)
    assert plain is not None, f"{what}: bytes that do not decode under content-encoding: {encoding}"
    return plain


@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_gzipped_response_replays_the_body_seen_live_and_headers_that_match_the_bytes(
    client: str, llm_server: LLMServer, cassette_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    live, replayed = record_then_replay(f"gzip_{client}", cassette_dir, monkeypatch, llm_server,
                                        lambda: CLIENTS[client](llm_server.url + "/gzip"))
    assert [s[0] for s in replayed] == [s[0] for s in live]
    for seen_live, seen_replayed in zip(live, replayed, strict=True):
        assert seen_live[1].get("content-encoding") == "gzip"  # the stub did compress, and live shows it
        if seen_live[2] is not None:  # a raw read live gets the compressed bytes
            assert seen_live[2][:2] == b"\x1f\x8b", seen_live[0]
        body = _body(seen_live)
        assert json.loads(body)["path"] == "/gzip"
        assert _body(seen_replayed) == body, seen_live[0]
        # the rule: stored decoded, served decoded, without content-encoding
        assert "content-encoding" not in seen_replayed[1], seen_replayed[0]
    entries = json.loads((cassette_dir / f"gzip_{client}.json").read_text())["entries"]
    assert all("content-encoding" not in e["response"]["headers"] and "body" in e["response"] for e in entries)
