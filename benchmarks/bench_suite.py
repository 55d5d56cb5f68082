"""Test-suite benchmark: what one replayed test costs in a project of many cassettes.

A project of N cassettes (three chat-completion calls each, the replay benchmark's
interactions); each "test" opens its own cassette and replays one call through a plain
``httpx.Client`` (one for the suite). Side by side in one run:

* casstore: ``with casstore.use(name, mode="replay")`` — the cassette pinned in a lock of
  N pins, verified from the warm local cache (bounded decompress + sha256 + parse);
* vcrpy: ``with vcr.use_cassette(path)`` — one JSON cassette file per test, matching on
  method, URI and body, ``record_mode="none"``.

Per-test cost = total time of the tests / number of tests; median of repeats.

Run: ``python benchmarks/run.py suite`` (or this file directly).
"""

from __future__ import annotations

import base64
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def run(n: int = 1000, tests: int = 200, repeat: int = 5) -> dict[str, Any]:
    import logging

    import httpx
    import vcr

    import casstore
    from benchmarks.bench_replay import make_cassette, make_interactions, vcr_document
    from casstore.ops.add import add
    from casstore.project import Project
    from casstore.store import signing

    logging.getLogger("vcr").setLevel(logging.WARNING)
    inter = make_interactions(3 * n)
    saved_env = {k: os.environ.get(k) for k in ("CASSTORE_CACHE_DIR", "CASSTORE_CONFIG_DIR",
                                                "CASSTORE_SIGNING_KEY", "CASSTORE_SIGNER")}
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="casstore-bench-suite-") as tmp:
        base = Path(tmp)
        os.environ["CASSTORE_CACHE_DIR"] = str(base / "cache")
        os.environ["CASSTORE_CONFIG_DIR"] = str(base / "config")
        os.environ["CASSTORE_SIGNING_KEY"] = base64.b64encode(os.urandom(32)).decode()
        os.environ["CASSTORE_SIGNER"] = "bench@example.com"
        try:
            root = base / "proj"
            cdir = root / "tests" / "cassettes"
            cdir.mkdir(parents=True)
            (root / "casstore.toml").write_text('[remote]\nurl = ".casstore/store"\n')
            (root / ".casstore").mkdir()
            (root / ".casstore" / "trusted_keys").write_text(signing.load_signing_key().public_line() + "\n")
            vdir = base / "vcr"
            vdir.mkdir()
            print(f"  suite: writing {n} cassettes for each tool ...", file=sys.stderr, flush=True)
            for c in range(n):
                mine = inter[3 * c: 3 * c + 3]
                make_cassette(f"c{c:04d}", mine).write_file(cdir / f"c{c:04d}.json")
                (vdir / f"c{c:04d}.json").write_text(json.dumps(vcr_document(mine)))
            add(Project.discover(root), [cdir])
            for f in cdir.iterdir():  # replay from the pinned objects, not the working copies
                f.unlink()
            os.chdir(root)
            picks = [(c * 7919) % n for c in range(tests)]  # distinct cassettes, spread over the lock
            my_vcr = vcr.VCR(serializer="json", record_mode="none", match_on=["method", "uri", "body"])

            # one client for the whole suite (creating an httpx.Client loads the CA bundle,
            # ~30 ms, and would hide what the tools themselves cost)
            client = httpx.Client()

            def one_casstore(c: int) -> None:
                url, headers, body, *_ = inter[3 * c + 1]
                with casstore.use(f"c{c:04d}", mode="replay"):
                    client.post(url, content=body, headers=headers).read()

            def one_vcr(c: int) -> None:
                url, headers, body, *_ = inter[3 * c + 1]
                with my_vcr.use_cassette(str(vdir / f"c{c:04d}.json")):
                    client.post(url, content=body, headers=headers).read()

            out: dict[str, Any] = {"cassettes": n, "tests": tests, "repeat": repeat}
            for label, fn in (("casstore", one_casstore), ("vcrpy", one_vcr)):
                fn(picks[0])  # imports and first-use work out of the timing
                per_test = []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    for c in picks:
                        fn(c)
                    per_test.append((time.perf_counter() - t0) / len(picks))
                out[label] = {"median": statistics.median(per_test), "min": min(per_test), "max": max(per_test)}
                print(f"  suite: {label}: {out[label]['median'] * 1000:.2f} ms per test", file=sys.stderr, flush=True)
            return out
        finally:
            os.chdir(cwd)
            for k, v in saved_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def table(res: dict[str, Any]) -> str:
    c, v = res["casstore"], res["vcrpy"]

    def cell(d: dict[str, float]) -> str:
        return f"{d['median'] * 1000:.2f} ({d['min'] * 1000:.2f}–{d['max'] * 1000:.2f})"

    return "\n".join([
        f"{res['cassettes']:,} cassettes of 3 calls; {res['tests']} tests, each opening its own cassette and "
        f"replaying one call with httpx; ms per test, median of {res['repeat']} runs (min–max)",
        "",
        "| tool | ms per test | vs casstore |",
        "|---|---:|---:|",
        f"| casstore (`use()`, lock of {res['cassettes']:,} pins, verified from the cache) | {cell(c)} | 1.00× |",
        f"| vcrpy (`use_cassette()`, one JSON file per test) | {cell(v)} | {v['median'] / c['median']:.2f}× |",
    ])


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--tests", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ns = ap.parse_args()
    print(table(run(ns.n, ns.tests, ns.repeat)))
