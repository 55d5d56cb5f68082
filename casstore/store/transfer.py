"""Parallel transfers (a bounded thread pool) and progress: a tqdm bar on a terminal, a line
per object with ``-v``, nothing in logs and pipes."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

__all__ = ["Reporter", "NullReporter", "LineReporter", "BarReporter", "run_parallel", "make_reporter"]

T = TypeVar("T")
R = TypeVar("R")


class Reporter(Protocol):
    def start(self, total: int, label: str, *, total_bytes: int = 0) -> None: ...
    def advance(self, line: str, *, nbytes: int = 0, objects: int = 1, failed: bool = False) -> None: ...
    def finish(self) -> None: ...


class NullReporter:
    lines = False  # run_parallel builds no line for it (a 1k pull's describe() was ~4 ms for nothing)

    def start(self, total: int, label: str, *, total_bytes: int = 0) -> None:
        pass

    def advance(self, line: str, *, nbytes: int = 0, objects: int = 1, failed: bool = False) -> None:
        pass

    def finish(self) -> None:
        pass


class LineReporter(NullReporter):
    """One line per finished object (``-v``): easy to grep."""

    lines = True
    label = ""

    def start(self, total: int, label: str, *, total_bytes: int = 0) -> None:
        self.label = label

    def advance(self, line: str, *, nbytes: int = 0, objects: int = 1, failed: bool = False) -> None:
        for part in line.splitlines():
            print(f"{self.label}: {part}", file=sys.stderr, flush=True)


class BarReporter:
    """A tqdm bar on stderr: bytes moved (binary units, as the summary line's KiB; with rate and
    ETA) and ``done/total objects``, with how many failed."""

    lines = False  # it shows counts, never the lines

    def __init__(self) -> None:
        self._bar: Any = None
        self._objects = 0
        self._total = 0
        self._failed = 0

    def start(self, total: int, label: str, *, total_bytes: int = 0) -> None:
        from tqdm import tqdm  # only on a terminal: the CLI's start-up does not pay for it

        self.finish()
        self._objects, self._total, self._failed = 0, total, 0
        self._bar = tqdm(total=total_bytes or None, desc=label, unit="B", unit_scale=True, unit_divisor=1024,
                         file=sys.stderr, leave=True, dynamic_ncols=True, mininterval=0.1,
                         bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}iB/{total_fmt}iB "
                                    "[{elapsed}<{remaining}, {rate_fmt}{postfix}]")
        self._bar.set_postfix_str(f"0/{total} objects", refresh=False)

    def advance(self, line: str, *, nbytes: int = 0, objects: int = 1, failed: bool = False) -> None:
        if self._bar is not None:
            self._objects += objects
            if failed:  # its bytes never came: the bar does not reach 100 %, and says why
                self._failed += objects
                nbytes = 0
            tail = f", {self._failed} failed" if self._failed else ""
            self._bar.set_postfix_str(f"{self._objects}/{self._total} objects{tail}", refresh=False)
            self._bar.update(nbytes)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def make_reporter(quiet: bool = False, verbose: bool = False) -> Reporter:
    """``-q``: nothing; ``-v``: a line per object; a terminal (and not CI): a bar; else nothing."""
    if quiet:
        return NullReporter()
    if verbose:
        return LineReporter()
    if sys.stderr.isatty() and not os.environ.get("CI"):
        return BarReporter()
    return NullReporter()


def run_parallel(
    items: Iterable[T],
    fn: Callable[[T], R],
    *,
    jobs: int,
    describe: Callable[[T, R | None, BaseException | None], str],
    reporter: Reporter,
    label: str | None,
    weigh: Callable[[T], tuple[int, int]] | None = None,
) -> list[tuple[T, R | None, BaseException | None]]:
    """Run ``fn`` over ``items`` with ``jobs`` workers; never raise, return per-item outcomes.
    ``weigh(item)``: its (objects, bytes) on the bar (default (1, 0)). ``label=None``: the
    caller started the reporter and finishes it."""
    todo = list(items)
    results: list[tuple[T, R | None, BaseException | None]] = []
    if not todo:
        return results
    weights = weigh or (lambda _it: (1, 0))
    lines = getattr(reporter, "lines", True)  # a reporter that says it shows no lines gets ""

    def advance(it: T, res: R | None, err: BaseException | None) -> None:
        objects, nbytes = weights(it)
        reporter.advance(describe(it, res, err) if lines else "", nbytes=nbytes, objects=objects,
                         failed=err is not None)

    if label is not None:
        sized = [weights(it) for it in todo]
        reporter.start(sum(o for o, _ in sized), label, total_bytes=sum(b for _, b in sized))
    try:
        if jobs <= 1 or len(todo) == 1:
            for it in todo:
                try:
                    res: R | None = fn(it)
                    err: BaseException | None = None
                except Exception as exc:  # reported per item, never lost
                    res, err = None, exc
                results.append((it, res, err))
                advance(it, res, err)
            return results
        # only for many items: its import is not free at start-up
        from concurrent.futures import ThreadPoolExecutor, as_completed

        with ThreadPoolExecutor(max_workers=min(jobs, len(todo)), thread_name_prefix="casstore") as pool:
            futs = {pool.submit(fn, it): it for it in todo}
            for fut in as_completed(futs):
                it = futs[fut]
                failure = fut.exception()
                out = (it, None if failure else fut.result(), failure)
                results.append(out)
                advance(*out)
        return results
    finally:
        if label is not None:
            reporter.finish()
