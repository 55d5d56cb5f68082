"""Parallel transfers and progress reporting.

A bounded thread pool runs the per-object work; object stores are latency-bound, so N
requests in flight cut wall time by about N. Progress goes to a bar on a terminal and to
one greppable line per object otherwise (CI logs), both on stderr.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Protocol, TypeVar

__all__ = ["Reporter", "NullReporter", "LineReporter", "BarReporter", "run_parallel", "make_reporter"]

T = TypeVar("T")
R = TypeVar("R")


class Reporter(Protocol):
    def start(self, total: int, label: str) -> None: ...
    def advance(self, line: str) -> None: ...
    def finish(self) -> None: ...


class NullReporter:
    def start(self, total: int, label: str) -> None:
        pass

    def advance(self, line: str) -> None:
        pass

    def finish(self) -> None:
        pass


class LineReporter:
    """One line per finished object: quiet enough for CI logs, easy to grep."""

    def __init__(self, stream=None) -> None:  # type: ignore[no-untyped-def]
        self.stream = stream or sys.stderr

    def start(self, total: int, label: str) -> None:
        self.label = label

    def advance(self, line: str) -> None:
        print(f"{self.label}: {line}", file=self.stream, flush=True)

    def finish(self) -> None:
        pass


class BarReporter:
    def __init__(self) -> None:
        self._bar = None

    def start(self, total: int, label: str) -> None:
        import click

        self._bar = click.progressbar(length=total, label=label, file=sys.stderr, show_pos=True)
        self._bar.__enter__()

    def advance(self, line: str) -> None:
        if self._bar is not None:
            self._bar.update(1)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


def make_reporter(quiet: bool = False) -> Reporter:
    if quiet:
        return NullReporter()
    if sys.stderr.isatty() and not os.environ.get("CI"):
        return BarReporter()
    return LineReporter()


def run_parallel(
    items: Iterable[T],
    fn: Callable[[T], R],
    *,
    jobs: int,
    describe: Callable[[T, R | None, BaseException | None], str],
    reporter: Reporter,
    label: str,
) -> list[tuple[T, R | None, BaseException | None]]:
    """Run ``fn`` over ``items`` with ``jobs`` workers; never raise, return per-item outcomes."""
    todo = list(items)
    results: list[tuple[T, R | None, BaseException | None]] = []
    if not todo:
        return results
    reporter.start(len(todo), label)
    try:
        if jobs <= 1 or len(todo) == 1:
            for it in todo:
                try:
                    res: R | None = fn(it)
                    err: BaseException | None = None
                except Exception as exc:  # reported per item, never lost
                    res, err = None, exc
                results.append((it, res, err))
                reporter.advance(describe(it, res, err))
            return results
        with ThreadPoolExecutor(max_workers=min(jobs, len(todo)), thread_name_prefix="casstore") as pool:
            futs = {pool.submit(fn, it): it for it in todo}
            for fut in as_completed(futs):
                it = futs[fut]
                exc = fut.exception()
                out = (it, None if exc else fut.result(), exc)
                results.append(out)
                reporter.advance(describe(*out))
        return results
    finally:
        reporter.finish()
