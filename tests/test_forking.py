"""casstore.forking: a list mapped over forked processes gives what mapping it here gives,
whatever a child does; and `casstore verify` over many pins, split so, reports the same
problems as one process does (a bad signature and a corrupt cached object in a child's slice).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

from casstore import forking
from casstore.forking import MIN_PER_PROCESS, map_forked
from casstore.store.cache import Cache
from tests.helpers.cassettes import damage_cached, write_cassette
from tests.helpers.commands import run_casstore_subprocess

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork is used on Linux only")
parent = os.getpid()


def square_and_pid(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


@pytest.fixture
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two cores and no other thread, whatever the test run has started (moto, xdist)."""
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(forking, "processes_for", lambda n, limit=None: max(1, min(2, limit or 2, n // MIN_PER_PROCESS)))


@linux_only
def test_results_in_order_and_a_child_did_half(one_thread: None) -> None:
    items = list(range(2 * MIN_PER_PROCESS + 7))
    got = map_forked(square_and_pid, items)
    assert [v for v, _ in got] == [x * x for x in items]
    pids = [p for _, p in got]
    assert pids[0] == parent and pids[-1] != parent  # the second slice came back from a child
    assert len(set(pids)) == 2


def test_few_items_or_one_process_stay_here(one_thread: None) -> None:
    assert {p for _, p in map_forked(square_and_pid, list(range(10)))} == {parent}
    assert {p for _, p in map_forked(square_and_pid, list(range(1000)), processes=1)} == {parent}


@linux_only
def test_a_child_that_dies_or_sends_what_does_not_pickle_is_redone_here(one_thread: None) -> None:
    items = list(range(2 * MIN_PER_PROCESS))

    def dies_in_a_child(x: int) -> int:
        if os.getpid() != parent:
            os._exit(3)
        return x + 1

    assert map_forked(dies_in_a_child, items) == [x + 1 for x in items]

    def unpicklable(x: int):  # type: ignore[no-untyped-def]
        return (lambda: x) if os.getpid() != parent else x

    out = map_forked(unpicklable, items)
    assert out == items  # the child's lambdas could not come back: its slice was mapped here


def test_a_result_sent_whole_by_a_child_that_then_fails_is_not_used(one_thread: None,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A child's result is loaded while it exits, but used only if it exited 0: one that sent
    all of it and then failed (its exit status says so) has its part redone here."""
    items = list(range(2 * MIN_PER_PROCESS))
    real_exit = os._exit
    monkeypatch.setattr(os, "_exit", lambda code: real_exit(7 if os.getpid() != parent else code))

    def where(x: int) -> tuple[str, int]:
        return ("child" if os.getpid() != parent else "here", x)

    assert map_forked(where, items) == [("here", x) for x in items]


class Name(str):
    pass


@linux_only
def test_what_a_child_sends_back_keeps_its_types(one_thread: None) -> None:
    # plain data comes back through marshal, anything else through pickle: either way as it was
    def values(x: int) -> list[object]:
        return [x, x * 0.5, str(x), b"b", True, None, (x, [x]), {"k": [1, (2,)]}, bytearray(b"ba"), Name("n"),
                {1, 2}, ValueError(f"bad {x}"), 2**80]

    items = list(range(2 * MIN_PER_PROCESS))
    for got, x in zip(map_forked(values, items), items, strict=True):
        want = values(x)
        assert [type(v) for v in got] == [type(v) for v in want]
        assert got[:-2] + got[-1:] == want[:-2] + want[-1:] and str(got[-2]) == str(want[-2])
    plain = forking.run_forked(lambda part: (sum(part), [(str(p), "", None) for p in part]), [[1, 2], [3, 4]])
    assert plain == [(3, [("1", "", None), ("2", "", None)]), (7, [("3", "", None), ("4", "", None)])]


def test_processes_by_count_or_by_bytes() -> None:
    cores = forking.processes_for(10**9)
    assert forking.processes_for(MIN_PER_PROCESS - 1) == 1
    assert forking.processes_for(3) == 1  # a few small items: not worth a fork
    # a few large items (say, 40 cassettes of 14 MB each): one process per core
    assert forking.processes_for(40, nbytes=40 * 14 << 20) == cores
    assert forking.processes_for(1, nbytes=1 << 40) == 1  # never more processes than items
    assert forking.processes_for(40, 1, nbytes=40 * 14 << 20) == 1  # the limit holds


def test_split_weighted_balances_the_bytes() -> None:
    items = [f"c{i}" for i in range(9)]
    weights = [100, 1, 1, 1, 1, 1, 1, 1, 95]
    parts = forking.split_weighted(items, weights, 2)
    assert sorted(x for part in parts for x in part) == sorted(items)  # each item once
    loads = sorted(sum(weights[items.index(x)] for x in part) for part in parts)
    assert loads == [101, 101]  # 100 + 1, 95 + six 1s
    (one,) = forking.split_weighted(items, weights, 1)
    assert sorted(one) == sorted(items)


@linux_only
def test_run_forked_redoes_a_part_whose_result_is_refused(one_thread: None) -> None:
    parts = [[1, 2], [3, 4], [5]]
    got = forking.run_forked(lambda p: (sum(p), os.getpid()), parts)
    assert [v for v, _ in got] == [3, 7, 5] and got[0][1] == parent and got[1][1] != parent
    got = forking.run_forked(lambda p: (sum(p), os.getpid()), parts, accept=lambda part, r: part != [3, 4])
    assert [v for v, _ in got] == [3, 7, 5] and got[1][1] == parent and got[2][1] != parent


def test_run_forked_without_fork_maps_the_parts_here_or_on_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forking, "_fork_safe", lambda: False)
    parts = [[1, 2], [3, 4], [5]]
    here = forking.run_forked(lambda p: (sum(p), os.getpid(), threading.get_ident()), parts)
    assert [v for v, _, _ in here] == [3, 7, 5] and {t for _, _, t in here} == {threading.get_ident()}
    on_threads = forking.run_forked(lambda p: (sum(p), os.getpid(), threading.get_ident()), parts, threads=True)
    assert [v for v, _, _ in on_threads] == [3, 7, 5]  # in order
    assert {p for _, p, _ in on_threads} == {parent} and threading.get_ident() not in {t for _, _, t in on_threads}


def test_other_threads_running_means_no_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    monkeypatch.setattr(forking, "processes_for", lambda n, limit=None: 2)
    assert {p for _, p in map_forked(square_and_pid, list(range(1000)))} == {parent}


def test_verify_of_many_pins_in_processes_reports_what_one_process_does(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    n = 2 * MIN_PER_PROCESS + 20  # two slices on two cores
    for i in range(n):
        write_cassette(repo, f"many/c{i:04d}")
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    assert casstore("push", cwd=repo).exit_code == 0
    lock = (repo / "casstore.lock").read_text()
    names = sorted(f"many/c{i:04d}" for i in range(n))
    # the last slice: a corrupt cached object (dropped, fetched again) and a forged signature
    cache = Path(os.environ["CASSTORE_CACHE_DIR"])
    from casstore.model.lock import parse_lock

    pins = parse_lock(lock.encode()).pins
    corrupt, forged, gone = pins[names[-3]], pins[names[-1]], pins[names[-5]]
    assert damage_cached(cache, corrupt.digest) == "packed"  # `add` of 220 cassettes writes packs
    Cache(cache).drop(gone.digest)  # gone from the cache (its pack rewritten without it)
    sig = forged.signatures[0].sig
    bad = ("A" if sig[0] != "A" else "B") + sig[1:]
    (repo / "casstore.lock").write_text(lock.replace(sig, bad))
    r = run_casstore_subprocess("verify", "--json", cwd=repo)
    assert r.returncode == 1, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    assert rep["checked"] == n and [p["name"] for p in rep["problems"]] == [gone.name, forged.name]
    assert "not in the local cache" in rep["problems"][0]["message"]
    assert "bad signature" in rep["problems"][1]["message"]
    assert len(rep["ok"]) == n - 2 and gone.name not in rep["ok"] and corrupt.name in rep["ok"]
    assert rep["refetched"] == [corrupt.name]  # dropped, fetched again from the store
    assert Cache(cache).verified(corrupt.digest, corrupt.size) == "ok"  # the refetched copy


@linux_only
def test_meanwhile_runs_here_while_children_map_every_slice(one_thread: None) -> None:
    items = list(range(2 * MIN_PER_PROCESS + 7))
    ran: list[int] = []
    got = map_forked(square_and_pid, items, meanwhile=lambda: ran.append(os.getpid()))
    assert [v for v, _ in got] == [x * x for x in items]
    assert ran == [parent]  # once, in this process
    assert parent not in {p for _, p in got}  # every slice came back from a child
    # one process's worth of items still goes to a child, so that the two overlap
    got = map_forked(square_and_pid, items[:MIN_PER_PROCESS], meanwhile=lambda: ran.append(os.getpid()))
    assert ran == [parent, parent] and parent not in {p for _, p in got}


def test_meanwhile_runs_first_where_nothing_forks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    order: list[str] = []

    def fn(x: int) -> int:
        order.append("map")
        return x

    assert map_forked(fn, list(range(3 * MIN_PER_PROCESS)), meanwhile=lambda: order.append("meanwhile"))[:2] == [0, 1]
    assert order[0] == "meanwhile" and order.count("meanwhile") == 1


@pytest.fixture
def forked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pids os.fork made in this test."""
    pids: list[int] = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: (pid := real_fork()) and pids.append(pid) or pid)
    return pids


@linux_only
@pytest.mark.parametrize("share", [False, True])
def test_meanwhile_that_raises_leaves_no_child_behind(one_thread: None, forked: list[int], share: bool) -> None:
    def boom() -> None:
        raise RuntimeError("meanwhile failed")

    with pytest.raises(RuntimeError, match="meanwhile failed"):
        map_forked(square_and_pid, list(range(2 * MIN_PER_PROCESS)), meanwhile=boom, share=share)
    assert len(forked) == 1  # two cores: one child, this process keeps the other
    for pid in forked:
        with pytest.raises(ChildProcessError):  # already waited for
            os.waitpid(pid, os.WNOHANG)


def test_verify_of_named_pins_checks_each_once(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    for name in ("named/a", "named/b", "named/c"):
        write_cassette(repo, name)
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    rep = casstore("verify", "named/b", "named/a", "named/b", "--json", cwd=repo).json
    assert rep["checked"] == 2 and rep["ok"] == ["named/a", "named/b"] and rep["problems"] == []
    assert casstore("verify", "named/zzz", cwd=repo).exit_code == 2  # not pinned: a usage error


@linux_only
def test_shared_items_are_mapped_by_the_children_and_here_after_meanwhile(one_thread: None, tmp_path: Path) -> None:
    # share: a child takes chunks from one queue and this process joins once meanwhile() returns;
    # each process's items wait until the other has begun one (a child that began holds one
    # chunk: the rest stay for this process), so both surely take a chunk, however the two
    # are scheduled
    items = list(range(2 * MIN_PER_PROCESS + 7))
    began = {True: tmp_path / "here", False: tmp_path / "child"}
    ran: list[str] = []

    def fn(x: int) -> tuple[int, int]:
        here = os.getpid() == parent
        began[here].touch()
        for _ in range(2000):  # at most ~20 s: then this process goes on alone
            if began[not here].exists():
                break
            threading.Event().wait(0.01)
        return x * x, os.getpid()

    got = map_forked(fn, items, meanwhile=lambda: ran.append("meanwhile"), share=True)
    assert [v for v, _ in got] == [x * x for x in items] and ran == ["meanwhile"]
    pids = {p for _, p in got}
    assert parent in pids and len(pids) == 2  # a child's chunks and this process's


@linux_only
def test_shared_chunks_a_child_took_but_did_not_send_are_mapped_here(one_thread: None) -> None:
    items = list(range(2 * MIN_PER_PROCESS))

    def dies_in_a_child(x: int) -> int:
        if os.getpid() != parent:
            os._exit(3)  # killed after taking a chunk
        return x + 1

    assert map_forked(dies_in_a_child, items, meanwhile=lambda: None, share=True) == [x + 1 for x in items]


def _sums(taken):  # type: ignore[no-untyped-def]
    """run_pulled's fn: each chunk taken -> (its index, (its sum, this pid, how many chunks
    this call had taken before it))."""
    return [(i, (sum(chunk), os.getpid(), k)) for k, (i, chunk) in enumerate(taken)]


@linux_only
def test_run_pulled_gives_each_chunk_once_in_order_and_a_busy_process_takes_none(one_thread: None,
                                                                                  tmp_path: Path) -> None:
    chunks = [list(range(i, i + 3)) for i in range(0, 300, 3)]
    done = tmp_path / "child-done"

    def child_takes_all(taken):  # type: ignore[no-untyped-def]
        out = _sums(taken)
        if os.getpid() != parent:
            done.write_text("queue empty")  # its iterator ended: no chunk was left
        return out

    def busy() -> None:  # this process is busy until the child has emptied the queue
        while not done.exists():
            os.sched_yield()

    got = forking.run_pulled(child_takes_all, chunks, 2, meanwhile=busy)
    assert [s for s, _, _ in got] == [sum(c) for c in chunks]
    assert {p for _, p, _ in got} == {got[0][1]} != {parent}  # all from the child: it took every chunk
    assert [k for _, _, k in got] == list(range(len(chunks)))  # one call of fn, in the queue's order
    mixed = forking.run_pulled(_sums, chunks, 2)
    assert [s for s, _, _ in mixed] == [sum(c) for c in chunks]
    assert forking.run_pulled(_sums, chunks, 1) == [(sum(c), parent, k) for k, c in enumerate(chunks)]


@linux_only
def test_run_pulled_redoes_here_the_chunks_of_a_child_that_dies_or_sends_a_refused_result(one_thread: None,
                                                                                         tmp_path: Path) -> None:
    chunks = [[i] for i in range(40)]
    took = tmp_path / "child-took-two"

    def dies_after_two(taken):  # type: ignore[no-untyped-def]
        if os.getpid() == parent:
            return _sums(taken)
        next(taken), next(taken)
        took.write_text("two chunks taken")
        os._exit(3)

    def wait() -> None:
        while not took.exists():
            os.sched_yield()

    got = forking.run_pulled(dies_after_two, chunks, 2, meanwhile=wait)
    assert [s for s, _, _ in got] == list(range(40)) and {p for _, p, _ in got} == {parent}
    assert [k for _, _, k in got[:2]] == [0, 1]  # the child's two, mapped here by a second call
    refused = forking.run_pulled(_sums, chunks, 2, accept=lambda chunk, r: r[1] == parent)
    assert [s for s, _, _ in refused] == list(range(40)) and {p for _, p, _ in refused} == {parent}

    def duplicates(taken):  # type: ignore[no-untyped-def]
        out = _sums(taken)
        return out + out[:1] if os.getpid() != parent else out

    again = forking.run_pulled(duplicates, chunks, 2)
    assert [s for s, _, _ in again] == list(range(40)) and {p for _, p, _ in again} == {parent}


def test_run_pulled_without_fork_maps_here_or_on_threads_that_share_the_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forking, "_fork_safe", lambda: False)
    chunks = [[i, i] for i in range(50)]
    calls: list[int] = []

    def on_thread(taken):  # type: ignore[no-untyped-def]
        calls.append(threading.get_ident())
        return [(i, (sum(c), threading.get_ident())) for i, c in taken]

    here = forking.run_pulled(on_thread, chunks, 2, meanwhile=lambda: calls.append(0))
    assert [s for s, _ in here] == [2 * i for i in range(50)] and calls == [0, threading.get_ident()]
    calls.clear()
    threaded = forking.run_pulled(on_thread, chunks, 3, threads=True)
    assert [s for s, _ in threaded] == [2 * i for i in range(50)]  # each chunk once, in order
    assert len(calls) == 3 and threading.get_ident() not in calls  # a call per thread, each taking from one queue
    with pytest.raises(ValueError, match="chunks"):
        forking.run_pulled(on_thread, [[0]] * (forking.MAX_CHUNKS + 1), 2)


@linux_only
def test_run_pulled_interrupted_here_leaves_no_child_behind(one_thread: None, forked: list[int]) -> None:
    def boom() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        forking.run_pulled(_sums, [[i] for i in range(1000)], 3, meanwhile=boom)
    assert len(forked) == 2
    for pid in forked:
        with pytest.raises(ChildProcessError):  # already waited for
            os.waitpid(pid, os.WNOHANG)


@linux_only
@pytest.mark.parametrize("share", [False, True])
def test_interrupted_while_it_waits_for_a_child_raises_that_and_leaves_no_child(
        one_thread: None, forked: list[int], share: bool) -> None:
    # ^C while this process waits for a child's result (the child mapped every item while
    # meanwhile() ran): the KeyboardInterrupt propagates as it is and the child is waited for
    import signal

    items = list(range(2 * MIN_PER_PROCESS))
    done_r, done_w = os.pipe()  # the child: a byte an item
    go_r, go_w = os.pipe()  # this process: meanwhile() returned
    count = [0]

    def fn(x: int) -> int:
        if os.getpid() != parent:
            count[0] += 1
            os.write(done_w, b".")
            if count[0] == len(items):  # the last: interrupt this process once it sleeps (in its read)
                os.read(go_r, 1)
                while open(f"/proc/{parent}/stat").read().rpartition(")")[2].split()[0] != "S":
                    pass
                os.kill(parent, signal.SIGINT)
        return x + 1

    def meanwhile() -> None:
        got = 0
        while got < len(items):
            got += len(os.read(done_r, len(items)))
        os.write(go_w, b"g")

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            map_forked(fn, items, meanwhile=meanwhile, share=share)
    finally:
        signal.signal(signal.SIGINT, before)
        for fd in (done_r, done_w, go_r, go_w):
            os.close(fd)
    assert len(forked) == 1
    with pytest.raises(ChildProcessError):  # already waited for
        os.waitpid(forked[0], os.WNOHANG)


def _many_pushed(repo: Path, casstore) -> tuple[dict, list[str], Path]:  # type: ignore[no-untyped-def]
    """Two slices' worth of cassettes added and pushed: (pins, names, cache); the last 20 added
    on their own, so loose in the cache (the others packed)."""
    from casstore.model.lock import parse_lock

    n = 2 * MIN_PER_PROCESS + 20
    for i in range(n):
        if i == n - 20:
            assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
        write_cassette(repo, f"many/c{i:04d}")
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    assert casstore("push", cwd=repo).exit_code == 0
    pins = parse_lock((repo / "casstore.lock").read_bytes()).pins
    return pins, sorted(f"many/c{i:04d}" for i in range(n)), Path(os.environ["CASSTORE_CACHE_DIR"])


@pytest.fixture
def killed_once_it_dropped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A forked child that has just dropped a corrupt cached copy is killed (SIGKILL), before
    it can send its result; the file returned then names the digest it dropped."""
    import signal

    record = tmp_path / "killed"
    real = Cache._keep_good_copy

    def dies_once_it_dropped(self: Cache, digest: str, size: int) -> bytes | None:
        good = real(self, digest, size)
        if os.getpid() != parent:
            record.write_text(digest)
            os.kill(os.getpid(), signal.SIGKILL)
        return good

    monkeypatch.setattr(Cache, "_keep_good_copy", dies_once_it_dropped)
    return record


@linux_only
@pytest.mark.parametrize("where", ["loose", "packed"])
def test_a_pull_whose_child_was_killed_after_it_dropped_a_corrupt_copy_says_refetched(
        one_thread: None, repo: Path, casstore, killed_once_it_dropped: Path, where: str) -> None:  # type: ignore[no-untyped-def]
    pins, names, cache = _many_pushed(repo, casstore)
    corrupt = [pins[n] for n in (names[-5:] if where == "loose" else names[-30:-25])]  # in the child's slice
    for pin in corrupt:
        assert damage_cached(cache, pin.digest) == where
    r = casstore("pull", "--json", cwd=repo)
    assert killed_once_it_dropped.read_text() in {p.digest for p in corrupt}  # a child dropped one, and died
    assert r.exit_code == 0, r.stdout + r.stderr
    want = sorted(p.name for p in corrupt)
    assert r.json["refetched"] == want and r.json["done"] == want, r.stdout
    for pin in corrupt:
        assert f"note: {pin.name}: the cached object was corrupt" in r.stderr
        assert Cache(cache).verified(pin.digest, pin.size) == "ok"  # fetched again


@linux_only
def test_a_verify_whose_child_was_killed_after_it_dropped_a_corrupt_copy_says_refetched(
        one_thread: None, repo: Path, casstore, killed_once_it_dropped: Path,  # type: ignore[no-untyped-def]
        monkeypatch: pytest.MonkeyPatch) -> None:
    from casstore.ops import verify

    monkeypatch.setattr(verify, "processes_for", lambda n, limit=None, nbytes=0: min(2, n))  # two, on any machine
    pins, names, cache = _many_pushed(repo, casstore)
    corrupt = [pins[n] for n in names[-20:]]  # every loose one: some in the child's share, however it is split
    for pin in corrupt:
        assert damage_cached(cache, pin.digest) == "loose"
    r = casstore("verify", "--json", cwd=repo)
    assert killed_once_it_dropped.read_text() in {p.digest for p in corrupt}  # a child dropped one, and died
    assert r.exit_code == 0 and r.json["problems"] == [], r.stdout  # not "not in the local cache (run pull)"
    assert sorted(r.json["refetched"]) == sorted(p.name for p in corrupt) and len(r.json["ok"]) == len(names)
