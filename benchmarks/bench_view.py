"""The viewer page of a 10k-entry cassette: time to build it and time until it is interactive.

    python benchmarks/bench_view.py [--entries 10000] [--runs 5]

The cassette is tests/ops/test_view.py's agent run (tool call, tool result, streamed answer,
gzip body, an error) repeated, each with its own words and identity (big_entries); "build"
times the page's data from those entries and its HTML. The page is opened in headless
chromium over the DevTools protocol (tests/helpers/browser.py); "interactive" is when the
page's script has built the header and the first rows and marked the page ready (the
filter box works from then).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from casstore.ops.view_page import render_page  # noqa: E402
from tests.helpers.browser import CHROMIUM, Browser  # noqa: E402
from tests.ops.test_view import big_entries, big_page  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    if CHROMIUM is None:
        sys.exit("needs chromium (apt-get install chromium)")
    entries = big_entries(args.entries)
    t, c = time.perf_counter(), time.process_time()  # wall and CPU: CPU is steadier on a shared machine
    data = big_page(entries)
    t_rows, c_rows = time.perf_counter() - t, time.process_time() - c
    t, c = time.perf_counter(), time.process_time()
    html = render_page(data)
    t_html, c_html = time.perf_counter() - t, time.process_time() - c
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "big.html"
        page.write_text(html, encoding="utf-8")
        b = Browser()
        try:
            b.open(page)  # warm: the browser's own start is not the page's
            ready, script = [], []
            for _ in range(args.runs):
                ready.append(b.open(page))
                script.append(int(b.eval("document.documentElement.getAttribute('data-render-ms')")))
        finally:
            b.close()
    print(f"entries {args.entries}  page {len(html.encode()) / 1e6:.1f} MB  load average {os.getloadavg()[0]:.1f}")
    print(f"build: rows {t_rows:.2f} s (CPU {c_rows:.2f} s), html {t_html:.2f} s (CPU {c_html:.2f} s)")
    print(f"interactive: median {statistics.median(ready):.2f} s (min {min(ready):.2f}, max {max(ready):.2f}); "
          f"the page's script: median {statistics.median(script)} ms (min {min(script)}, max {max(script)})")


if __name__ == "__main__":
    main()
