"""Many small CPU-bound checks on every core: a list split between this process and
forked children.

Parsing, the secret scan and the per-pin reading, inflating and hashing of ``verify`` are
Python that holds the GIL, and so was Ed25519 verification in ``cryptography`` (50.0.2: a
Python thread beside a verify loop starves; signatures are now checked with libsodium,
which releases it), so threads add little core to them. :func:`map_forked` splits the items into one
contiguous slice per process; each forked child maps its slice and sends the results back
through a pipe (marshalled when they are plain data, else pickled) while this process maps
the first slice; :func:`run_forked` is the same with the caller's own parts (one result a
part: less to send); :func:`run_pulled` hands out chunks from one queue instead, so that a
process that gets more of a core (another program runs on the other) does more of them.
Fork shares the loaded modules, the lock and the keys, so a child costs a few milliseconds.

Only where that is safe: on Linux, with no other thread running (a lock held by another
thread at the fork would stay held in the child). Anywhere else, with few items, or when
a child fails (killed, a result that does not pickle), its slice is mapped here: the
result is the same list ``[fn(x) for x in items]`` in every case. ``fn`` must not raise;
return the error instead.
"""

from __future__ import annotations

import marshal
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO, TypeVar

__all__ = ["map_forked", "run_forked", "run_pulled", "processes_for", "split", "split_weighted", "Notes",
           "MIN_PER_PROCESS", "MIN_BYTES_PER_PROCESS", "SHARED_CHUNKS", "MAX_CHUNKS"]

T = TypeVar("T")
R = TypeVar("R")

MIN_PER_PROCESS = 100  # a fork costs a few ms: about what 20 signature checks cost
MIN_BYTES_PER_PROCESS = 8 << 20  # ... or inflating and hashing a few MB


def _fork_safe() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork") and threading.active_count() == 1


def processes_for(n: int, limit: int | None = None, *, nbytes: int = 0) -> int:
    """How many processes ``n`` items are worth: one per core, each with MIN_PER_PROCESS items
    or (``nbytes``: the bytes the items weigh) MIN_BYTES_PER_PROCESS bytes."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, limit or cores, n, max(n // MIN_PER_PROCESS, nbytes // MIN_BYTES_PER_PROCESS)))


def split_weighted(items: Sequence[T], weights: Sequence[int], n: int) -> list[list[T]]:
    """``items`` in ``n`` parts of (nearly) equal total weight: the heaviest first, each to the
    lightest part so far (the order within a part is not kept)."""
    parts: list[list[T]] = [[] for _ in range(n)]
    loads = [0] * n
    for w, i in sorted(((w, i) for i, w in enumerate(weights)), reverse=True):
        k = loads.index(min(loads))
        parts[k].append(items[i])
        loads[k] += w
    return parts


_SCALARS = frozenset({int, float, str, bytes, bool, type(None)})


def _plain(x: object) -> bool:
    """Whether marshal gives ``x`` back as it is: these builtin types (no subclass), in
    tuples, lists and dicts (marshal would turn a bytearray into bytes, and refuses the rest)."""
    t = type(x)
    if t in _SCALARS:
        return True
    if t is tuple or t is list:
        return all(map(_plain, x))  # type: ignore[call-overload]
    if t is dict:
        return all(map(_plain, x.keys())) and all(map(_plain, x.values()))  # type: ignore[attr-defined]
    return False


def _dumps(result: Any) -> bytes:
    """A child's result for the pipe: marshal (a builtin module) where it is plain data, as a
    check that passed returns; pickle (~2 ms of imports) only for the rest, errors say."""
    if _plain(result):
        return b"m" + marshal.dumps(result)
    import pickle

    return b"p" + pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)


def _loads(data: bytes) -> Any:
    if data[:1] == b"m":
        return marshal.loads(memoryview(data)[1:])
    import pickle

    return pickle.loads(memoryview(data)[1:])


def _fork(fn: Callable[[T], R], part: T) -> tuple[int, int]:
    """(pid, the read end of its pipe) of a child that sends ``fn(part)`` back; (-1, -1)
    where no process could be made."""
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return -1, -1
    if pid == 0:
        os.close(r)
        _child(fn, part, w)
    os.close(w)
    return pid, r


def _child(fn: Callable[[T], R], part: T, fd: int) -> None:
    code = 1
    try:
        data = _dumps(fn(part))
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        code = 0
    finally:
        os._exit(code)  # no atexit handlers, no flush of the parent's buffers


_FAILED = object()


def _result(pending: dict[int, BinaryIO], pid: int) -> Any:
    """What child ``pid`` sent back (``_FAILED``: killed, failed, or not loadable), once it is
    waited for; it leaves ``pending`` only then (interrupted before, :func:`_reap` waits).
    Loaded while the child exits (the end of its pipe comes before the end of the process:
    its memory is unmapped meanwhile, ~1.5 ms at 1k cassettes), used only if it exited 0."""
    with pending[pid] as f:
        data = f.read()
    try:
        got = _loads(data)
    except Exception:  # noqa: BLE001 - a result that does not load (a failed child's, a torn one): redone here
        got = _FAILED
    _, status = os.waitpid(pid, 0)
    del pending[pid]
    return got if status == 0 else _FAILED


def _reap(pending: dict[int, BinaryIO]) -> None:
    """Interrupted: no child is left behind (a pipe read already is closed again, harmlessly)."""
    for pid, f in pending.items():
        f.close()
        os.waitpid(pid, 0)


def run_forked(fn: Callable[[T], R], parts: Sequence[T], *, accept: Callable[[T, R], bool] = lambda p, r: True,
               meanwhile: Callable[[], object] | None = None, threads: bool = False) -> list[R]:
    """``[fn(p) for p in parts]``: ``parts[0]`` mapped here, each other part in a forked child
    (one process a part: the caller sizes the parts, e.g. with :func:`processes_for`).

    With ``meanwhile``, every part goes to a child and this process runs ``meanwhile()``
    while they map (if it raises, the children are waited for and the exception propagates).
    A child that fails (killed, a result that does not unpickle or that ``accept`` refuses)
    has its part mapped here. Without fork (see the module doc), every part is mapped here,
    on a thread a part with ``threads`` (for work that releases the GIL in parts)."""
    if (meanwhile is None and len(parts) <= 1) or not _fork_safe():
        if meanwhile is not None:
            meanwhile()
        if threads and len(parts) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=len(parts), thread_name_prefix="casstore-map") as pool:
                return list(pool.map(fn, parts))
        return [fn(p) for p in parts]
    mine = 0 if meanwhile is not None else 1  # with other work to do here, no part of its own
    children = [_fork(fn, part) for part in parts[mine:]]  # (-1, -1): no process to spare, mapped here
    # files, not fds: one read and then interrupted before its wait is closed twice, harmlessly,
    # and a child leaves ``pending`` once waited for
    pending: dict[int, BinaryIO] = {pid: os.fdopen(r, "rb") for pid, r in children if pid > 0}
    try:
        if meanwhile is not None:
            meanwhile()
        out = [fn(p) for p in parts[:mine]]
        for part, (pid, _r) in zip(parts[mine:], children, strict=True):
            got: Any = _result(pending, pid) if pid > 0 else _FAILED
            out.append(got if got is not _FAILED and accept(part, got) else fn(part))
    finally:
        _reap(pending)
    return out


def map_forked(fn: Callable[[T], R], items: Sequence[T], *, processes: int | None = None,
               threads: int = 1, meanwhile: Callable[[], object] | None = None, share: bool = False) -> list[R]:
    """``[fn(x) for x in items]``, on up to ``processes`` processes (default: one per core).

    Where it cannot fork, on ``threads`` threads (for work that releases the GIL in parts).

    ``meanwhile``: other work for this process (say, importing what the next step needs).
    With it, the items go to one child fewer than there are processes to use (at least one)
    and this process runs ``meanwhile()`` on its own core while they map; where it cannot
    fork, ``meanwhile()`` runs here first. If it raises, the children
    are waited for and the exception propagates. With ``share`` too, the items are not
    sliced in advance: the children take small chunks of them from one queue, and this
    process takes its share of what is left once ``meanwhile()`` returns (a short
    ``meanwhile`` does not leave a core idle while a child maps everything)."""
    n = processes_for(len(items), processes)
    if meanwhile is not None and len(items) >= MIN_PER_PROCESS:
        n = max(1, n - 1)  # children only, and this process keeps its core for meanwhile()
        forked = True
    else:
        forked = n > 1
    if forked and share and meanwhile is not None and _fork_safe():
        return _map_shared(fn, items, n, meanwhile)
    if not forked or not _fork_safe():
        if meanwhile is not None:
            meanwhile()
        if threads > 1 and len(items) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="casstore-map") as pool:
                return list(pool.map(fn, items))
        return [fn(x) for x in items]
    chunks = split(items, n)
    done = run_forked(lambda chunk: [fn(x) for x in chunk], chunks,
                      accept=lambda chunk, got: isinstance(got, list) and len(got) == len(chunk),
                      meanwhile=meanwhile)
    return [r for part in done for r in part]


SHARED_CHUNKS = 32  # the queue of map_forked(share=True): ~30 signature checks a chunk at 1k pins


def _map_shared(fn: Callable[[T], R], items: Sequence[T], children: int, meanwhile: Callable[[], object]) -> list[R]:
    """map_forked's ``share``: the items in chunks on :func:`run_pulled`'s queue, taken by
    ``children`` forked children and then this process (after ``meanwhile()``)."""
    chunks = split(items, max(1, min(SHARED_CHUNKS, len(items) // 8)))
    done = run_pulled(lambda taken: [(i, [fn(x) for x in chunk]) for i, chunk in taken], chunks, children + 1,
                      accept=lambda chunk, got: isinstance(got, list) and len(got) == len(chunk), meanwhile=meanwhile)
    return [r for part in done for r in part]


MAX_CHUNKS = 2048  # run_pulled's queue: 2 bytes a chunk, written at once (<= PIPE_BUF, 4096 on Linux)


def _pulled(fd: int, chunks: Sequence[T]) -> Iterator[tuple[int, T]]:
    """The chunks this process takes from the queue ``fd``, until it is empty."""
    while True:
        got = os.read(fd, 2)  # the pipe hands each 2-byte index to one reader
        if len(got) < 2:
            return
        i = int.from_bytes(got, "little")
        yield i, chunks[i]


def _shared(it: Iterator[tuple[int, T]], lock: threading.Lock) -> Iterator[tuple[int, T]]:
    """What one thread takes from ``it``, an iterator that threads share (each item to one)."""
    while True:
        with lock:
            item = next(it, None)
        if item is None:
            return
        yield item


def run_pulled(fn: Callable[[Iterator[tuple[int, T]]], list[tuple[int, R]]], chunks: Sequence[T], processes: int, *,
               accept: Callable[[T, R], bool] = lambda c, r: True, meanwhile: Callable[[], object] | None = None,
               threads: bool = False) -> list[R]:
    """One result per chunk, in the chunks' order: ``fn`` runs in this process and in
    ``processes - 1`` forked children, each call taking ``(index, chunk)`` pairs from one
    queue until none is left and returning ``(index, result)`` for each it took. So the work
    follows the cores each process gets (on a machine busy with other work too), and a call
    can keep state across its chunks (one cache writer a process, say).

    ``meanwhile`` runs here after the fork, before this process takes chunks (work that only
    this process needs: the children take the chunks it would have). A child that fails
    (killed, a result that does not load or that ``accept`` refuses for one of its chunks)
    leaves its chunks to this process: a second call of ``fn`` maps every chunk without a
    result. Interrupted here (``meanwhile`` or ``fn`` raises, ^C), the queue is emptied, so
    the children take no further chunk, and they are waited for. Without fork (see the
    module doc) or with one process, every chunk is mapped here, by ``processes`` threads
    with ``threads``."""
    if len(chunks) > MAX_CHUNKS:
        raise ValueError(f"{len(chunks)} chunks: at most {MAX_CHUNKS}")
    done: dict[int, R] = {}
    if processes <= 1 or len(chunks) <= 1 or not _fork_safe():
        if meanwhile is not None:
            meanwhile()
        if threads and processes > 1 and len(chunks) > 1:
            from concurrent.futures import ThreadPoolExecutor

            queue, lock = iter(enumerate(chunks)), threading.Lock()
            with ThreadPoolExecutor(max_workers=processes, thread_name_prefix="casstore-map") as pool:
                for got in pool.map(lambda _: fn(_shared(queue, lock)), range(processes)):
                    done.update(got)
        else:
            done.update(fn(iter(enumerate(chunks))))
        return [done[i] for i in range(len(chunks))]
    r, w = os.pipe()
    try:
        os.write(w, b"".join(i.to_bytes(2, "little") for i in range(len(chunks))))
    finally:
        os.close(w)  # an empty queue: a read returns b""
    children: dict[int, BinaryIO] = {}  # pid -> its result pipe (files, as in run_forked)
    try:
        for _ in range(processes - 1):
            pid, rr = _fork(lambda q: fn(_pulled(q, chunks)), r)
            if pid < 0:  # no process to spare: the others take its chunks
                break
            children[pid] = os.fdopen(rr, "rb")
        if meanwhile is not None:
            meanwhile()
        done.update(fn(_pulled(r, chunks)))
        for pid in list(children):
            sent = _result(children, pid)  # _FAILED (not a list): its chunks are mapped here
            if (isinstance(sent, list) and all(isinstance(x, tuple) and len(x) == 2 and type(x[0]) is int
                                               and 0 <= x[0] < len(chunks) and x[0] not in done
                                               and accept(chunks[x[0]], x[1]) for x in sent)
                    and len({x[0] for x in sent}) == len(sent)):
                done.update(sent)
    finally:
        while os.read(r, 4096):  # interrupted: the children take no further chunk ...
            pass
        os.close(r)
        _reap(children)  # ... and none is left behind
    missing = [i for i in range(len(chunks)) if i not in done]
    if missing:
        done.update(fn(iter([(i, chunks[i]) for i in missing])))
    return [done[i] for i in range(len(chunks))]


class Notes:
    """Lines that forked children write and this process reads afterwards, those of a child
    that died before it sent its result too: a memory file (memfd) made before the fork,
    whose open file the children share (each line one append: lines do not interleave).

    A child's result says what it did, unless the child dies first (killed, out of memory);
    its work is then redone here, and a step it cannot take back (a corrupt cached copy
    dropped) would go unsaid. A note made before such a step says it. Without memfd (not
    Linux, where nothing is forked; a Linux before 3.17), the notes are this process's own."""

    def __init__(self) -> None:
        self._fd = -1
        self._here: list[str] = []
        if hasattr(os, "memfd_create"):
            try:
                self._fd = os.memfd_create("casstore-notes", os.MFD_CLOEXEC)
            except OSError:  # (no memfd in this kernel) notes of this process only
                pass

    def add(self, line: str) -> None:
        if self._fd < 0:
            self._here.append(line)
        else:
            os.write(self._fd, f"{line}\n".encode())

    def read(self) -> set[str]:
        """Every line noted so far, by this process and its children."""
        if self._fd < 0:
            return set(self._here)
        return set(os.pread(self._fd, os.fstat(self._fd).st_size, 0).decode().splitlines())

    def __enter__(self) -> Notes:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def split(items: Sequence[T], n: int) -> list[Sequence[T]]:
    """``items`` in ``n`` contiguous slices of (nearly) equal length."""
    bounds = [len(items) * i // n for i in range(n + 1)]
    return [items[bounds[i]:bounds[i + 1]] for i in range(n)]
