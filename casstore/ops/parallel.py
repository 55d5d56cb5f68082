"""Checks of many pins on threads of this process: reading, zstd, hashlib and libsodium
release the GIL for their work."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["map_threads"]

T = TypeVar("T")
R = TypeVar("R")


def map_threads(fn: Callable[[T], R], items: Sequence[T], jobs: int, *,
                meanwhile: Callable[[], object] | None = None) -> list[R]:
    """``[fn(x) for x in items]`` on up to ``jobs`` threads (one a core at most), in chunks;
    ``meanwhile`` on a thread of its own. What either raises propagates once they stopped."""
    size = max(1, min(64, len(items) // (4 * max(1, jobs))))
    parts = [items[i:i + size] for i in range(0, len(items), size)]
    workers = max(1, min(jobs, len(parts), os.cpu_count() or 1))
    if meanwhile is None and workers == 1:
        return [fn(x) for x in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers + (meanwhile is not None), thread_name_prefix="casstore-check") as pool:
        try:
            side = pool.submit(meanwhile) if meanwhile is not None else None
            done = list(pool.map(lambda part: [fn(x) for x in part], parts))
            if side is not None:
                side.result()
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    return [r for part in done for r in part]
