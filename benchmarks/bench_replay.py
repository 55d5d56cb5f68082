"""Replay benchmark: casstore vs httpx's MockTransport vs vcrpy, in one run.

Cassettes of realistic chat-completion calls (distinct ~2 KB requests, ~4 KB responses,
one in ten streamed as Server-Sent Events) at several sizes. Measured, each as the median
of repeated runs (min/max kept):

* per-call cost of replay through casstore's interception (a plain ``httpx.Client()``
  inside ``casstore.use(...)``) vs an ``httpx.MockTransport`` answering the same bytes
  from a dict — the floor for "answer an httpx request from memory";
* per-call cost of the same replay with ``requests`` vs bare ``requests`` answered by a
  trivial mounted adapter (the floor: ``requests``' own cost per call, e.g. reading the
  proxy environment);
* casstore vs vcrpy (matching on method, URI and body) with each client, **paired**: every
  round alternates casstore replaying the whole sample and vcrpy replaying a slice of its
  calls, so both sides see the same stretch of a noisy machine; each side's per-call wall
  and CPU time of a round is its total time over its calls, and the ratio is the median
  of the per-round ratios (min–max kept). vcrpy scans the recorded interactions up to the
  first match, so its cost depends on where a call sits in the cassette: its calls are one
  random pick per equal stretch of the cassette (mean position half the cassette);
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
                       recorded_at="2026-11-20T10:00:00Z")
        e["duration_ms"] = 300
        e["seq"] = seq
        entries.append(e)
    return Cassette(name=name, entries=tuple(entries),
                    meta={"recorded_at": "2026-11-20T10:00:00Z", "recorder": "bench", "models": ["gpt-4o-mini"]})


Clock = tuple[float, float]  # (wall, CPU) seconds: perf_counter, process_time


def _clock() -> Clock:
    return time.perf_counter(), time.process_time()


def _per_call(t0: Clock, calls: int) -> Clock:
    """``(wall, CPU)`` seconds per call since ``t0``."""
    wall, cpu = _clock()
    return (wall - t0[0]) / calls, (cpu - t0[1]) / calls


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


def bench_size(n: int, workdir: Path, *, repeat: int, sample: int, vcr_calls: int = 40,
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

    def clocked(client: Any, post: Callable[[Any, Interaction], Any]) -> Clock:
        t0 = _clock()
        for call in calls:
            _ = post(client, call).content
        return _per_call(t0, len(calls))

    def loop(client: Any, post: Callable[[Any, Interaction], Any]) -> float:
        return clocked(client, post)[0]

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
            return open_clocked(client, post)()[0]
        return run

    def open_clocked(client: Callable[[], Any], post: Callable[[Any, Interaction], Any]) -> Callable[[], Clock]:
        def run() -> Clock:
            with casstore.use(name, mode="replay", cassette_dir=cdir), client() as c:
                return clocked(c, post)
        return run

    aiohttp_floor, aiohttp_casstore, aiohttp_clocked = (_aiohttp_runs(name, cdir, calls, answers)
                                                        if "aiohttp" in clients else (None, None, None))
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

    # -- casstore vs vcrpy, paired round by round ---------------------------------------
    if n <= 1000:
        vcr_path = workdir / f"vcr{n}.json"
        vcr_path.write_text(json.dumps(vcr_document(inter)))
        vcr_picks = _spread(n, min(vcr_calls, n), random.Random(n + 1))
        mine = {"requests": open_clocked(requests.Session, requests_post),
                "httpx": open_clocked(httpx.Client, httpx_post), "aiohttp": aiohttp_clocked}
        for client in ("requests", "httpx", "aiohttp"):
            if client in clients and mine[client] is not None:
                res[f"vcrpy_{client}_paired"] = paired_vcrpy(
                    mine[client], vcrpy_runner(vcr_path, client), [inter[i] for i in vcr_picks], rounds=repeat)

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
                  answers: dict[tuple[str, bytes], tuple[int, list[tuple[str, str]], bytes]]) -> tuple[Any, Any, Any]:
    """``(floor, casstore, casstore clocked)`` per-call timers for aiohttp (the first two: wall
    seconds, the third: ``(wall, CPU)``), or ``(None, None, None)`` without aiohttp."""
    try:
        import asyncio

        import aiohttp
        from aiohttp.helpers import TimerNoop
        from aiohttp.streams import StreamReader
        from multidict import CIMultiDict, CIMultiDictProxy
    except ImportError:
        return None, None, None

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

    async def loop(middlewares: tuple[Any, ...]) -> Clock:
        async with aiohttp.ClientSession(middlewares=middlewares) as session:
            t0 = _clock()
            for u, h, b, *_ in calls:
                async with session.post(u, data=b, headers=h) as resp:
                    await resp.read()
            return _per_call(t0, len(calls))

    def floor() -> float:
        return asyncio.run(loop((answer,)))[0]

    def replayed_clocked() -> Clock:
        with casstore.use(name, mode="replay", cassette_dir=cdir):
            return asyncio.run(loop(()))

    def replayed() -> float:
        return replayed_clocked()[0]

    return floor, replayed, replayed_clocked


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


def _spread(n: int, k: int, rng: random.Random) -> list[int]:
    """``k`` positions of ``n``, one random pick in each of ``k`` equal stretches, shuffled:
    the mean position is half the cassette's, whichever ``k`` (vcrpy's cost per call grows
    with the position of the recorded interaction it matches)."""
    picks = [rng.randrange(i * n // k, max((i + 1) * n // k, i * n // k + 1)) for i in range(k)]
    rng.shuffle(picks)
    return picks


def vcrpy_runner(path: Path, client: str) -> Callable[[list[Interaction]], Clock]:
    """``run(calls) -> (wall, CPU) per call``: vcrpy (JSON serializer, ``record_mode="none"``,
    matching method, URI and body) replaying ``calls`` with ``client`` in a fresh cassette."""
    import asyncio
    import logging

    import requests
    import vcr

    logging.getLogger("vcr").setLevel(logging.WARNING)
    my_vcr = vcr.VCR(serializer="json", record_mode="none", match_on=["method", "uri", "body"])

    async def with_aiohttp(calls: list[Interaction]) -> Clock:
        import aiohttp

        async with aiohttp.ClientSession() as session:
            t0 = _clock()
            for u, h, b, *_ in calls:
                async with session.post(u, data=b, headers=h) as resp:
                    await resp.read()
            return _per_call(t0, len(calls))

    def run(calls: list[Interaction]) -> Clock:
        if client == "aiohttp":
            with my_vcr.use_cassette(str(path)):
                return asyncio.run(with_aiohttp(calls))
        with my_vcr.use_cassette(str(path)), (requests.Session() if client == "requests" else httpx.Client()) as s:
            t0 = _clock()
            for u, h, b, *_ in calls:
                if client == "requests":
                    _ = s.post(u, data=b, headers=h).content
                else:
                    _ = s.post(u, content=b, headers=h).content
            return _per_call(t0, len(calls))

    return run


def paired_vcrpy(mine: Callable[[], Clock], theirs: Callable[[list[Interaction]], Clock],
                 vcr_calls: list[Interaction], *, rounds: int, slices: int = 4) -> dict[str, Any]:
    """casstore vs vcrpy, side by side: in each round, ``slices`` times, casstore replays its
    whole sample (``mine()``, in a fresh ``use()`` block) and vcrpy one slice of
    ``vcr_calls`` (a fresh cassette), which goes first alternating, so that a busy moment
    of the machine falls on both. A side's per-call time in a round is its total time over
    its calls in that round (wall and CPU alike); the ratios are per round."""
    slices = max(1, min(slices, len(vcr_calls)))
    parts = [vcr_calls[i::slices] for i in range(slices)]
    per_round: list[dict[str, float]] = []
    for r in range(rounds):
        ours: list[Clock] = []
        vcr_wall = vcr_cpu = 0.0
        for j, part in enumerate(parts):
            steps = ("ours", "theirs") if (r + j) % 2 == 0 else ("theirs", "ours")
            for step in steps:
                if step == "ours":
                    ours.append(mine())
                else:
                    wall, cpu = theirs(part)
                    vcr_wall += wall * len(part)
                    vcr_cpu += cpu * len(part)
        c_wall = statistics.fmean(w for w, _ in ours)  # each run replays the same number of calls
        c_cpu = statistics.fmean(c for _, c in ours)
        v_wall, v_cpu = vcr_wall / len(vcr_calls), vcr_cpu / len(vcr_calls)
        per_round.append({"casstore_wall": c_wall, "casstore_cpu": c_cpu, "vcrpy_wall": v_wall, "vcrpy_cpu": v_cpu,
                          "ratio_wall": v_wall / c_wall, "ratio_cpu": v_cpu / c_cpu})
    out: dict[str, Any] = {key: _median([x[key] for x in per_round]) for key in per_round[0]}
    out["vcrpy_calls"] = len(vcr_calls)
    out["rounds"] = per_round
    return out


def run(sizes: list[int], *, repeat: int = 5, sample: int = 1000, vcr_calls: int = 40,
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
                                      vcr_calls=vcr_calls, clients=clients))
    return {"sizes": results}


def table(res: dict[str, Any]) -> str:
    rows = ["| entries | casstore httpx µs/call | MockTransport µs/call | ratio | vcrpy httpx µs/call (calls) "
            "| vcrpy / casstore, httpx | casstore requests µs/call | bare requests µs/call | ratio "
            "| vcrpy requests µs/call (calls) "
            "| vcrpy / casstore, requests | casstore aiohttp µs/call | aiohttp middleware floor µs/call | ratio "
            "| vcrpy aiohttp µs/call (calls) | vcrpy / casstore, aiohttp "
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
        vtxt, vr = _vcrpy_cells(r.get("vcrpy_requests_paired"))
        vhtxt, vhr = _vcrpy_cells(r.get("vcrpy_httpx_paired"))
        ca, af = r.get("casstore_aiohttp_per_call"), r.get("aiohttp_floor_per_call")
        ar = r.get("aiohttp_ratio_paired")
        atxt = (f"{ca['median'] * 1e6:,.1f} | {af['median'] * 1e6:,.1f} | {ar['median']:.2f}×"
                if ca and af and ar else "— | — | —")
        atxt += " | {} | {}".format(*_vcrpy_cells(r.get("vcrpy_aiohttp_paired")))
        oc, orw = r["open_casstore"]["median"], r["open_raw"]["median"]
        hxtxt = f"{c * 1e6:,.1f} ({hx['min'] * 1e6:,.1f}–{hx['max'] * 1e6:,.1f}) | {m * 1e6:,.1f}" if hx else "— | —"
        rows.append(f"| {r['entries']:,} | {hxtxt} | {hrtxt} | {vhtxt} | {vhr} | "
                    f"{'—' if cr != cr else f'{cr * 1e6:,.1f}'} | {fltxt} | {flrtxt} | {vtxt} | {vr} | {atxt} | {oc * 1e3:,.1f} | {orw * 1e3:,.1f} | "
                    f"{oc / orw:.2f}× |")
    return "\n".join(rows) + paired_table(res)


def _vcrpy_cells(p: dict[str, Any] | None) -> tuple[str, str]:
    """The main table's vcrpy cells: its wall µs per call (calls) and the paired wall ratio."""
    if not p:
        return "—", "—"
    return f"{p['vcrpy_wall']['median'] * 1e6:,.0f} ({p['vcrpy_calls']})", f"{p['ratio_wall']['median']:,.0f}×"


def paired_table(res: dict[str, Any]) -> str:
    """casstore vs vcrpy, paired round by round: per-call µs of each side and the ratio,
    wall and CPU, medians of the rounds (ratios: min–max of the rounds)."""
    rows = ["", "", "casstore vs vcrpy, paired (medians of the rounds; ratios min–max):", "",
            "| entries | client | rounds | casstore µs/call wall | vcrpy µs/call wall (calls) | vcrpy / casstore, wall "
            "| casstore µs/call CPU | vcrpy µs/call CPU | vcrpy / casstore, CPU |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    found = False
    for r in res["sizes"]:
        for client in CLIENTS:
            p = r.get(f"vcrpy_{client}_paired")
            if not p:
                continue
            found = True
            rw, rc = p["ratio_wall"], p["ratio_cpu"]
            rows.append(f"| {r['entries']:,} | {client} | {rw['runs']} | {p['casstore_wall']['median'] * 1e6:,.1f} "
                        f"| {p['vcrpy_wall']['median'] * 1e6:,.0f} ({p['vcrpy_calls']}) "
                        f"| {rw['median']:,.0f}× ({rw['min']:,.0f}–{rw['max']:,.0f}) "
                        f"| {p['casstore_cpu']['median'] * 1e6:,.1f} | {p['vcrpy_cpu']['median'] * 1e6:,.0f} "
                        f"| {rc['median']:,.0f}× ({rc['min']:,.0f}–{rc['max']:,.0f}) |")
    return "\n".join(rows) if found else ""


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sample", type=int, default=1000)
    ap.add_argument("--vcr-calls", type=int, default=40,
                    help="calls vcrpy replays per round (one per equal stretch of the cassette), in 4 slices")
    ap.add_argument("--clients", default=",".join(CLIENTS),
                    help="which clients to measure, e.g. --clients requests (with its floor and vcrpy)")
    ns = ap.parse_args()
    chosen = tuple(c.strip() for c in ns.clients.split(",") if c.strip())
    unknown = sorted(set(chosen) - set(CLIENTS))
    if unknown:
        ap.error(f"unknown client(s) {', '.join(unknown)}; choose from {', '.join(CLIENTS)}")
    out = run([int(s) for s in ns.sizes.split(",")], repeat=ns.repeat, sample=ns.sample, vcr_calls=ns.vcr_calls,
              clients=chosen)
    print(table(out))
