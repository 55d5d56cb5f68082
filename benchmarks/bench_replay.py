"""Replay benchmark: casstore vs httpx's MockTransport vs vcrpy, in one run.

Cassettes of realistic chat-completion calls (distinct ~2 KB requests, ~4 KB responses,
one in ten streamed as Server-Sent Events) at several sizes. Measured, each as the median
of repeated runs (min/max kept):

* per-call cost of replay through casstore's interception (a plain ``httpx.Client()``
  inside ``casstore.use(...)``) vs an ``httpx.MockTransport`` answering the same bytes
  from a dict — the floor for "answer an httpx request from memory";
* per-call cost of the same replay with ``requests`` vs vcrpy replaying the same
  interactions with ``requests`` (matching on method, URI and body), capped in time, and
  vs bare ``requests`` answered by a trivial mounted adapter (the floor: ``requests``'
  own cost per call, e.g. reading the proxy environment);
* per-call cost of the same replay with ``aiohttp`` (one ``ClientSession``, ``await
  response.read()``) vs aiohttp's own fastest in-process answer: a client middleware that
  answers from the dict without connecting (aiohttp has no mock transport; a middleware
  returning a ``ClientResponse`` fed from memory is the least an aiohttp call can cost);
* opening a pinned cassette (verified: bounded decompress + sha256, parse, validate, index)
  vs raw ``zstd decompress + json.loads`` of the same bytes.

Run: ``python benchmarks/run.py replay`` (or this file directly).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import zstandard

import casstore
from casstore.interop.build import http_entry
from casstore.model.blob import compress, digest_and_size
from casstore.model.cassette import Cassette
from casstore.model.recording import encode_response

CLIENTS = ("httpx", "requests", "aiohttp")
BASE = "http://127.0.0.1:9/v1/chat/completions"  # never contacted: replay only
SYSTEM = ("You are a careful support agent for an online shop. Answer briefly, cite the order id, "
          "never invent tracking numbers, escalate refunds above 200 EUR. ") * 8
WORDS = ("order refund parcel courier delay invoice address warehouse tracking customer "
         "label return policy voucher discount weekend express standard").split()


def _text(rng: random.Random, n_chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < n_chars:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


Interaction = tuple[str, dict[str, str], bytes, int, list[tuple[str, str]], bytes]


def make_interactions(n: int, seed: int = 7) -> list[Interaction]:
    rng = random.Random(seed)
    out: list[Interaction] = []
    for i in range(n):
        stream = i % 10 == 9
        req = {"model": "gpt-4o-mini", "temperature": 0.2, "stream": stream,
               "messages": [{"role": "system", "content": SYSTEM},
                            {"role": "user", "content": f"Ticket {i}: " + _text(rng, 800)}]}
        body = json.dumps(req).encode()
        headers = {"content-type": "application/json", "authorization": "Bearer sk-bench-not-a-key"}
        content = _text(rng, 3600)
        if stream:
            chunks = []
            step = len(content) // 20 + 1
            for j in range(0, len(content), step):
                delta = {"id": f"chatcmpl-{i}", "object": "chat.completion.chunk",
                         "choices": [{"index": 0, "delta": {"content": content[j:j + step]}}]}
                chunks.append(f"data: {json.dumps(delta)}\n\n")
            chunks.append("data: [DONE]\n\n")
            resp = "".join(chunks).encode()
            rh = [("content-type", "text/event-stream")]
        else:
            resp = json.dumps({"id": f"chatcmpl-{i}", "object": "chat.completion", "model": "gpt-4o-mini",
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": content}}],
                               "usage": {"prompt_tokens": 420, "completion_tokens": 800, "total_tokens": 1220}}
                              ).encode()
            rh = [("content-type", "application/json")]
        out.append((BASE, headers, body, 200, rh, resp))
    return out


def make_cassette(name: str, inter: list[Interaction]) -> Cassette:
    entries = []
    for seq, (url, headers, body, status, rh, resp) in enumerate(inter):
        e = http_entry("POST", url, headers.items(), body, encode_response(status, rh, resp),
                       recorded_at="2026-11-20T10:00:00Z", duration_ms=300)
        e["seq"] = seq
        entries.append(e)
    return Cassette(name=name, entries=tuple(entries),
                    meta={"recorded_at": "2026-11-20T10:00:00Z", "recorder": "bench", "models": ["gpt-4o-mini"]})


def _median(xs: list[float]) -> dict[str, float]:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "runs": len(xs)}


def _timed(fn: Callable[[], int], repeat: int) -> list[float]:
    """Per-call seconds of ``fn`` (which returns how many calls it made), ``repeat`` times."""
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        calls = fn()
        out.append((time.perf_counter() - t0) / calls)
    return out


def bench_size(n: int, workdir: Path, *, repeat: int, sample: int, vcr_cap_s: float,
               clients: tuple[str, ...] = CLIENTS) -> dict[str, Any]:
    inter = make_interactions(n)
    name = f"replay{n}"
    cas = make_cassette(name, inter)
    cdir = workdir / "cassettes"
    cas.write_file(cdir / f"{name}.json")
    rng = random.Random(n)
    picks = rng.sample(range(n), min(sample, n))
    calls = [inter[i] for i in picks]
    answers = {(u, b): (s, rh, r) for (u, _h, b, s, rh, r) in inter}
    res: dict[str, Any] = {"entries": n, "calls_per_run": len(calls)}

    # -- httpx: MockTransport floor vs casstore interception ------------------------
    def mock_handler(request: httpx.Request) -> httpx.Response:
        s, rh, r = answers[(str(request.url), request.content)]
        return httpx.Response(s, headers=rh, content=r)

    def run_casstore_httpx() -> int:
        with casstore.use(name, mode="replay", cassette_dir=cdir), httpx.Client() as c:
            for u, h, b, *_ in calls:
                _ = c.post(u, content=b, headers=h).content
        return len(calls)

    import requests

    class FloorAdapter(requests.adapters.BaseAdapter):
        """The least a ``requests`` call can cost: an adapter answering from the dict."""

        def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
            s, rh, r = answers[(request.url, request.body)]
            resp = requests.Response()
            resp.status_code, resp._content, resp.url, resp.request = s, r, request.url, request
            resp.headers.update(rh)
            return resp

        def close(self) -> None:
            pass

    def loop(client: Any, post: Callable[[Any, Interaction], Any]) -> float:
        t0 = time.perf_counter()
        for call in calls:
            _ = post(client, call).content
        return (time.perf_counter() - t0) / len(calls)

    def httpx_post(c: Any, i: Interaction) -> Any:
        return c.post(i[0], content=i[2], headers=i[1])

    def requests_post(c: Any, i: Interaction) -> Any:
        return c.post(i[0], data=i[2], headers=i[1])

    def mock() -> float:
        with httpx.Client(transport=httpx.MockTransport(mock_handler)) as c:
            return loop(c, httpx_post)

    def requests_floor() -> float:
        with requests.Session() as c:
            c.mount("http://", FloorAdapter())
            return loop(c, requests_post)

    # per-call cost with the cassette already open (opening is measured below); the
    # opening cost amortised over the sample is casstore_httpx_per_call_incl_open
    def open_then(client: Callable[[], Any], post: Callable[[Any, Interaction], Any]) -> Callable[[], float]:
        def run() -> float:
            with casstore.use(name, mode="replay", cassette_dir=cdir), client() as c:
                return loop(c, post)
        return run

    aiohttp_floor, aiohttp_casstore = (_aiohttp_runs(name, cdir, calls, answers) if "aiohttp" in clients
                                       else (None, None))
    # each client and its reference run one after the other in every round, so a slow
    # moment of a noisy machine hits both; the ratios are the medians of per-round ratios
    runs: dict[str, Callable[[], float]] = {}
    if "httpx" in clients:
        runs["mock_per_call"] = mock
        runs["casstore_httpx_per_call"] = open_then(httpx.Client, httpx_post)
    if "requests" in clients:
        runs["requests_floor_per_call"] = requests_floor
        runs["casstore_requests_per_call"] = open_then(requests.Session, requests_post)
    if aiohttp_floor is not None:
        runs["aiohttp_floor_per_call"] = aiohttp_floor
        runs["casstore_aiohttp_per_call"] = aiohttp_casstore
    times: dict[str, list[float]] = {key: [] for key in runs}
    for _ in range(repeat):
        for key, fn in runs.items():
            times[key].append(fn())
    for key, xs in times.items():
        res[key] = _median(xs)
    if "httpx" in clients:
        res["httpx_ratio_paired"] = _median([c / m for c, m in zip(times["casstore_httpx_per_call"],
                                                                   times["mock_per_call"], strict=True)])
    if "requests" in clients:
        res["requests_floor_ratio_paired"] = _median(
            [c / f for c, f in zip(times["casstore_requests_per_call"], times["requests_floor_per_call"], strict=True)])
    if aiohttp_floor is not None:
        res["aiohttp_ratio_paired"] = _median(
            [c / f for c, f in zip(times["casstore_aiohttp_per_call"], times["aiohttp_floor_per_call"], strict=True)])
    if "httpx" in clients:
        res["casstore_httpx_per_call_incl_open"] = _median(_timed(run_casstore_httpx, repeat))

    # -- requests: casstore vs vcrpy -------------------------------------------------
    if n <= 1000:
        for client in ("requests", "httpx", "aiohttp"):
            if client in clients:
                res[f"vcrpy_{client}_per_call"] = bench_vcrpy(inter, calls, workdir / f"vcr{n}.json",
                                                              cap_s=vcr_cap_s, repeat=repeat, client=client)

    # -- opening: verified load vs raw decompress + json.loads -------------------------
    data = cas.canonical_bytes()
    digest, size = digest_and_size(data)
    frame = compress(data)
    res["cassette_bytes"] = size
    res["frame_bytes"] = len(frame)
    res["open_raw"] = _median(_open_raw(frame, repeat))
    res["open_casstore"] = _median(_open_casstore(name, frame, digest, size, workdir, repeat))
    return res


def _aiohttp_runs(name: str, cdir: Path, calls: list[Interaction],
                  answers: dict[tuple[str, bytes], tuple[int, list[tuple[str, str]], bytes]]) -> tuple[Any, Any]:
    """``(floor, casstore)`` per-call timers for aiohttp, or ``(None, None)`` without aiohttp."""
    try:
        import asyncio

        import aiohttp
        from aiohttp.helpers import TimerNoop
        from aiohttp.streams import StreamReader
        from multidict import CIMultiDict, CIMultiDictProxy
    except ImportError:
        return None, None

    class Proto:
        connected, _reading_paused = True, False

        def pause_reading(self) -> None:
            pass

        def resume_reading(self, resume_parser: bool = True) -> None:
            pass

    class Writer:
        output_size = 0

    async def answer(req: Any, handler: Any) -> Any:
        """aiohttp's least cost per call: a middleware answering from memory."""
        s, rh, r = answers[(str(req.url), await req.body.as_bytes())]
        resp = req.response_class(req.method, req.original_url, writer=None, continue100=None, timer=TimerNoop(),
                                  request_info=req.request_info, traces=[], loop=req.loop, session=req._session,
                                  stream_writer=Writer())
        resp.status, resp.reason = s, "OK"
        resp._headers = CIMultiDictProxy(CIMultiDict(rh))
        resp._raw_headers = tuple((k.encode(), v.encode()) for k, v in rh)
        content = StreamReader(Proto(), 2**16, loop=req.loop)  # type: ignore[arg-type]
        content.feed_data(r)
        content.feed_eof()
        resp.content = content
        return resp

    async def loop(middlewares: tuple[Any, ...]) -> float:
        async with aiohttp.ClientSession(middlewares=middlewares) as session:
            t0 = time.perf_counter()
            for u, h, b, *_ in calls:
                async with session.post(u, data=b, headers=h) as resp:
                    await resp.read()
            return (time.perf_counter() - t0) / len(calls)

    def floor() -> float:
        return asyncio.run(loop((answer,)))

    def replayed() -> float:
        with casstore.use(name, mode="replay", cassette_dir=cdir):
            return asyncio.run(loop(()))

    return floor, replayed


def _open_raw(frame: bytes, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        json.loads(zstandard.ZstdDecompressor().decompress(frame))
        out.append(time.perf_counter() - t0)
    return out


def _open_casstore(name: str, frame: bytes, digest: str, size: int, workdir: Path, repeat: int) -> list[float]:
    """Enter ``use(name, mode="replay")`` in a project whose lock pins the cassette (cache warm)."""
    from casstore.model.lock import Lock, Pin, format_lock
    from casstore.store.cache import Cache

    proj = workdir / f"proj-{name}"
    proj.mkdir(exist_ok=True)
    (proj / "casstore.toml").write_text('[trust]\nrequire_signatures = false\n')
    (proj / "casstore.lock").write_text(format_lock(Lock().with_pin(Pin(name=name, digest=digest, size=size))))
    Cache().put_frame(digest, size, frame)
    old = os.getcwd()
    os.chdir(proj)
    try:
        out = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            with casstore.use(name, mode="replay"):
                pass
            out.append(time.perf_counter() - t0)
        return out
    finally:
        os.chdir(old)


def vcr_document(inter: list[Interaction]) -> dict[str, Any]:
    """The interactions as a vcrpy cassette (its JSON serializer's document)."""
    return {"version": 1, "interactions": [
        {"request": {"method": "POST", "uri": u, "body": b.decode(),
                     "headers": {k: [v] for k, v in h.items()}},
         "response": {"status": {"code": s, "message": "OK"}, "headers": {k: [v] for k, v in rh},
                      "body": {"string": r.decode()}}}
        for (u, h, b, s, rh, r) in inter]}


async def _vcrpy_aiohttp(calls: list[Interaction], cap_s: float) -> tuple[float, int]:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        t0 = time.perf_counter()
        done = 0
        for u, h, b, *_ in calls:
            async with session.post(u, data=b, headers=h) as resp:
                await resp.read()
            done += 1
            if time.perf_counter() - t0 > cap_s:
                break
        return time.perf_counter() - t0, done


def bench_vcrpy(inter: list[Interaction], calls: list[Interaction], path: Path, *, cap_s: float,
                repeat: int, client: str = "requests") -> dict[str, Any]:
    """vcrpy replaying ``calls`` with ``client`` ("requests", "httpx" or "aiohttp"), capped at ``cap_s``."""
    import asyncio
    import logging

    import requests
    import vcr

    logging.getLogger("vcr").setLevel(logging.WARNING)
    path.write_text(json.dumps(vcr_document(inter)))
    my_vcr = vcr.VCR(serializer="json", record_mode="none", match_on=["method", "uri", "body"])
    per_call = []
    reached = 0
    for _ in range(max(1, repeat // 2)):
        if client == "aiohttp":
            with my_vcr.use_cassette(str(path)):
                took, done = asyncio.run(_vcrpy_aiohttp(calls, cap_s))
            per_call.append(took / done)
            reached = max(reached, done)
            continue
        with my_vcr.use_cassette(str(path)), (requests.Session() if client == "requests" else httpx.Client()) as s:
            t0 = time.perf_counter()
            done = 0
            for u, h, b, *_ in calls:
                if client == "requests":
                    _ = s.post(u, data=b, headers=h).content
                else:
                    _ = s.post(u, content=b, headers=h).content
                done += 1
                if time.perf_counter() - t0 > cap_s:
                    break
            per_call.append((time.perf_counter() - t0) / done)
            reached = max(reached, done)
    out = _median(per_call)
    out["calls_reached"] = reached
    out["capped_at_s"] = cap_s
    return out


def run(sizes: list[int], *, repeat: int = 5, sample: int = 1000, vcr_cap_s: float = 20.0,
        clients: tuple[str, ...] = CLIENTS) -> dict[str, Any]:
    results = []
    with tempfile.TemporaryDirectory(prefix="casstore-bench-replay-") as tmp:
        os.environ["CASSTORE_CACHE_DIR"] = str(Path(tmp) / "cache")
        os.environ.pop("CASSTORE_OFFLINE", None)
        os.environ.pop("CASSTORE_MODE", None)
        for n in sizes:
            print(f"  replay: {n} entries ...", file=sys.stderr, flush=True)
            # the 100k cassette is ~700 MB of JSON: three runs of it are plenty
            results.append(bench_size(n, Path(tmp), repeat=repeat if n < 100_000 else 3, sample=sample,
                                      vcr_cap_s=vcr_cap_s, clients=clients))
    return {"sizes": results}


def table(res: dict[str, Any]) -> str:
    rows = ["| entries | casstore httpx µs/call | MockTransport µs/call | ratio | vcrpy httpx µs/call (calls reached) "
            "| vcrpy / casstore, httpx | casstore requests µs/call | bare requests µs/call | ratio "
            "| vcrpy requests µs/call (calls reached) "
            "| vcrpy / casstore, requests | casstore aiohttp µs/call | aiohttp middleware floor µs/call | ratio "
            "| vcrpy aiohttp µs/call (calls reached) | vcrpy / casstore, aiohttp "
            "| open casstore ms | open raw ms | ratio |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["sizes"]:
        hx = r.get("casstore_httpx_per_call")
        c, m = (hx["median"], r["mock_per_call"]["median"]) if hx else (float("nan"), float("nan"))
        cr = r["casstore_requests_per_call"]["median"] if "casstore_requests_per_call" in r else float("nan")
        fl = r.get("requests_floor_per_call")
        fltxt = f"{fl['median'] * 1e6:,.1f}" if fl else "—"
        flr = r.get("requests_floor_ratio_paired")
        flrtxt = f"{flr['median']:.2f}×" if flr else "—"
        hr = r.get("httpx_ratio_paired")
        hrtxt = f"{hr['median']:.2f}×" if hr else "—"
        v = r.get("vcrpy_requests_per_call")
        vtxt = f"{v['median'] * 1e6:,.0f} ({v['calls_reached']})" if v else "—"
        vr = f"{v['median'] / cr:,.0f}×" if v else "—"
        vh = r.get("vcrpy_httpx_per_call")
        vhtxt = f"{vh['median'] * 1e6:,.0f} ({vh['calls_reached']})" if vh else "—"
        vhr = f"{vh['median'] / c:,.0f}×" if vh else "—"
        ca, af = r.get("casstore_aiohttp_per_call"), r.get("aiohttp_floor_per_call")
        ar = r.get("aiohttp_ratio_paired")
        atxt = (f"{ca['median'] * 1e6:,.1f} | {af['median'] * 1e6:,.1f} | {ar['median']:.2f}×"
                if ca and af and ar else "— | — | —")
        va = r.get("vcrpy_aiohttp_per_call")
        atxt += (f" | {va['median'] * 1e6:,.0f} ({va['calls_reached']}) | {va['median'] / ca['median']:,.0f}×"
                 if va and ca else " | — | —")
        oc, orw = r["open_casstore"]["median"], r["open_raw"]["median"]
        hxtxt = f"{c * 1e6:,.1f} ({hx['min'] * 1e6:,.1f}–{hx['max'] * 1e6:,.1f}) | {m * 1e6:,.1f}" if hx else "— | —"
        rows.append(f"| {r['entries']:,} | {hxtxt} | {hrtxt} | {vhtxt} | {vhr} | "
                    f"{'—' if cr != cr else f'{cr * 1e6:,.1f}'} | {fltxt} | {flrtxt} | {vtxt} | {vr} | {atxt} | {oc * 1e3:,.1f} | {orw * 1e3:,.1f} | "
                    f"{oc / orw:.2f}× |")
    return "\n".join(rows)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sample", type=int, default=1000)
    ap.add_argument("--clients", default=",".join(CLIENTS),
                    help="which clients to measure, e.g. --clients requests (with its floor and vcrpy)")
    ns = ap.parse_args()
    chosen = tuple(c.strip() for c in ns.clients.split(",") if c.strip())
    unknown = sorted(set(chosen) - set(CLIENTS))
    if unknown:
        ap.error(f"unknown client(s) {', '.join(unknown)}; choose from {', '.join(CLIENTS)}")
    out = run([int(s) for s in ns.sizes.split(",")], repeat=ns.repeat, sample=ns.sample, clients=chosen)
    print(table(out))
