"""The pytest plugin, exercised the way users run it: real pytest processes (and xdist)."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.llm_server import LLMServer

DEMO = textwrap.dedent(
    """
    import os

    import pytest
    import requests

    URL = os.environ["CASSTORE_TEST_URL"]
    EXPECT = os.environ.get("EXPECT_MODE")


    @pytest.mark.casstore
    def test_default_name(cassette):
        assert cassette.name == "test_demo/test_default_name"
        assert requests.get(URL + "/echo?t=default", timeout=5).json()["n"] >= 1


    @pytest.mark.casstore(name="shared/named", mode="record-new")
    def test_named(cassette):
        assert cassette.name == "shared/named"
        if EXPECT:
            assert cassette.mode == EXPECT
        requests.get(URL + "/echo?t=named", timeout=5)


    def test_fixture_only(cassette):
        assert cassette.name == "test_demo/test_fixture_only"
        requests.get(URL + "/echo?t=fixture", timeout=5)


    @pytest.mark.parametrize("x", [1, 2])
    @pytest.mark.casstore
    def test_param(x):
        assert requests.get(URL + f"/echo?x={x}", timeout=5).status_code == 200


    def test_without_marker_is_untouched():
        import casstore.replay

        assert casstore.replay.current_session() is None


    @pytest.mark.casstore
    def test_fails():
        requests.get(URL + "/echo?t=fail", timeout=5)
        assert False, "a failing test writes no cassette"
    """
)

XDIST = textwrap.dedent(
    """
    import os

    import pytest
    import requests

    URL = os.environ["CASSTORE_TEST_URL"]


    @pytest.mark.parametrize("i", range(8))
    @pytest.mark.casstore(name="shared/xdist", mode="record-new")
    def test_many_writers(i):
        requests.get(URL + f"/echo?i={i}", timeout=5)
    """
)


ASYNC = textwrap.dedent(
    """
    import os

    import httpx
    import pytest

    import casstore.replay

    URL = os.environ["CASSTORE_TEST_URL"]


    @pytest.fixture
    def anyio_backend():
        return "asyncio"


    @pytest.mark.anyio
    @pytest.mark.casstore(name="async/marked")
    async def test_async_marked():
        assert casstore.replay.current_session() is not None
        async with httpx.AsyncClient() as c:
            assert (await c.get(URL + "/echo?async=1")).status_code == 200


    @pytest.mark.anyio
    async def test_async_fixture(cassette):
        assert casstore.replay.current_session() is cassette
    """
)


def _counts(run: subprocess.CompletedProcess[str]) -> dict[str, int]:
    """The outcome counts of pytest's summary line (pytest's own parser), without warnings:
    a library's new deprecation warning must not change what a test asserts."""
    counts = pytest.RunResult.parse_summary_nouns(run.stdout.splitlines())
    counts.pop("warnings", None)
    return counts


def _pytest(
    cwd: Path, *args: str, env: dict[str, str] | None = None, autoload: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run pytest in ``cwd``. Without ``autoload`` only casstore's plugin (and xdist) load:
    much faster; the first run of the main test goes through the real pytest11 entry point."""
    full = os.environ.copy()
    full.update(env or {})
    plugins = []
    if not autoload:
        full["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        plugins = ["-p", "casstore.replay.pytest_plugin", "-p", "xdist.plugin"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugins, *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=240,  # -n 3 on a 2-core CI box starts four interpreters
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path, llm_server: LLMServer, replay_env: None) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "casstore.toml").write_text("# casstore project for plugin tests\n")
    (root / "test_demo.py").write_text(DEMO)
    (root / "test_xdist.py").write_text(XDIST)
    (root / "test_async.py").write_text(ASYNC)
    return root


def test_marker_fixture_and_default_names(project: Path, llm_server: LLMServer) -> None:
    env = {"CASSTORE_TEST_URL": llm_server.url}
    first = _pytest(project, "test_demo.py", env=env, autoload=True)  # via the entry point
    assert "1 failed, 6 passed" in first.stdout, first.stdout + first.stderr
    cassettes = project / "tests" / "cassettes"
    written = sorted(str(p.relative_to(cassettes)) for p in cassettes.rglob("*.json"))
    assert written == [
        "shared/named.json",
        "test_demo/test_default_name.json",
        "test_demo/test_fixture_only.json",
        "test_demo/test_param-1.json",
        "test_demo/test_param-2.json",
    ]
    seen = llm_server.count
    # replay offline, forced by the option even where the marker says record-new
    second = _pytest(
        project,
        "test_demo.py",
        "-k",
        "not fails",
        "--casstore-mode=replay",
        env={**env, "CASSTORE_OFFLINE": "1", "CASSTORE_MODE": "record", "EXPECT_MODE": "replay"},
    )
    assert "6 passed" in second.stdout, second.stdout + second.stderr
    assert llm_server.count == seen
    # the environment beats the marker's mode
    third = _pytest(project, "test_demo.py", "-k", "named", env={**env, "CASSTORE_MODE": "refresh", "EXPECT_MODE": "refresh"})
    assert "1 passed" in third.stdout, third.stdout + third.stderr
    assert llm_server.count == seen + 1


def test_a_miss_in_ci_names_the_test_to_rerecord(project: Path, llm_server: LLMServer) -> None:
    env = {"CASSTORE_TEST_URL": llm_server.url, "CI": "true"}
    run = _pytest(project, "test_demo.py", "-k", "default_name", env=env)
    assert "1 failed" in run.stdout
    assert "CassetteMiss" in run.stdout and "does not exist yet" in run.stdout
    # CI replays only: the advice is to pin where it was recorded, never a record mode
    assert "recorded locally but never pinned: run `casstore add " in run.stdout, run.stdout
    assert "test_default_name.json` and commit `casstore.lock`" in run.stdout, run.stdout
    assert "CASSTORE_MODE=record" not in run.stdout
    assert llm_server.count == 0


def test_unknown_mode_option_is_a_usage_error(project: Path) -> None:
    run = _pytest(project, "test_demo.py", "--casstore-mode=sometimes")
    # pytest's usage error naming the option and the value (argparse words the rest)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert "--casstore-mode" in run.stderr and "sometimes" in run.stderr, run.stderr
    # the control: the option exists, and a mode it knows is accepted
    control = _pytest(project, "test_demo.py", "--casstore-mode=replay", "--collect-only",
                      env={"CASSTORE_TEST_URL": "http://127.0.0.1:9"})
    assert control.returncode == 0, control.stdout + control.stderr


@pytest.mark.timeout(600)
def test_xdist_workers_share_one_cassette_safely(project: Path, llm_server: LLMServer) -> None:
    env = {"CASSTORE_TEST_URL": llm_server.url}
    run = _pytest(project, "test_xdist.py", "-n", "3", env=env)
    assert "8 passed" in run.stdout, run.stdout + run.stderr
    data = json.loads((project / "tests" / "cassettes" / "shared" / "xdist.json").read_text())
    targets = sorted(e["target"].rsplit("=", 1)[1] for e in data["entries"])
    assert targets == [str(i) for i in range(8)]
    assert [e["seq"] for e in data["entries"]] == list(range(8))
    leftovers = [p.name for p in (project / "tests" / "cassettes" / "shared").iterdir() if p.name != "xdist.json"]
    assert leftovers == []  # no temp or lock files next to the cassette
    seen = llm_server.count
    again = _pytest(project, "test_xdist.py", "-n", "3", "--casstore-mode=replay", env={**env, "CASSTORE_OFFLINE": "1"})
    assert "8 passed" in again.stdout, again.stdout + again.stderr
    assert llm_server.count == seen


def test_async_tests_run_inside_the_block(project: Path, llm_server: LLMServer) -> None:
    env = {"CASSTORE_TEST_URL": llm_server.url}
    run = _pytest(project, "test_async.py", "-p", "anyio.pytest_plugin", env=env)
    assert "2 passed" in run.stdout, run.stdout + run.stderr
    assert (project / "tests" / "cassettes" / "async" / "marked.json").is_file()
    assert llm_server.count == 1


ALL_PLAYED = '''
import os
import httpx
import pytest

URL = os.environ["CASSTORE_TEST_URL"]
SKIP = os.environ.get("SKIP_SECOND") == "1"


@pytest.mark.casstore(name="played/two")
def test_two_calls():
    httpx.get(URL + "/echo?n=1")
    if not SKIP:
        httpx.get(URL + "/echo?n=2")


@pytest.mark.casstore(name="played/two", mode="replay", all_played=True)
def test_marker_checks():
    httpx.get(URL + "/echo?n=1")
    if not SKIP:
        httpx.get(URL + "/echo?n=2")
'''


def test_all_played_by_marker_and_by_option(project: Path, llm_server: LLMServer) -> None:
    (project / "test_played.py").write_text(ALL_PLAYED)
    env = {"CASSTORE_TEST_URL": llm_server.url}
    first = _pytest(project, "test_played.py", "-k", "two_calls", env=env)
    assert "1 passed" in first.stdout, first.stdout + first.stderr
    ok = _pytest(project, "test_played.py", "--casstore-all-played", env={**env, "CASSTORE_OFFLINE": "1"})
    assert "2 passed" in ok.stdout, ok.stdout + ok.stderr
    skipping = {**env, "CASSTORE_OFFLINE": "1", "SKIP_SECOND": "1"}
    marker = _pytest(project, "test_played.py", env=skipping)  # only the marker's test checks
    assert _counts(marker) == {"passed": 2, "errors": 1}, marker.stdout  # at teardown
    assert "NotAllPlayed" in marker.stdout, marker.stdout
    option = _pytest(project, "test_played.py", "--casstore-all-played", env=skipping)  # every block checks
    assert _counts(option) == {"passed": 2, "errors": 2}, option.stdout
    assert "seq 1: http GET" in option.stdout, option.stdout


CONFTEST_CALLS = """
import atexit, os, sys
import httpx

def _try(where):
    try:
        httpx.get(os.environ["CASSTORE_TEST_URL"] + "/echo?at=" + where)
        print(f"[{where}] went out", file=sys.stderr)
    except Exception as exc:
        print(f"[{where}] {type(exc).__name__}", file=sys.stderr)

_try("conftest-import")
atexit.register(_try, "atexit")

def pytest_sessionfinish(session):
    _try("sessionfinish")

def pytest_unconfigure(config):
    _try("unconfigure")
"""


def test_offline_refuses_calls_at_conftest_import_in_session_hooks_and_at_exit(
        tmp_path: Path, llm_server: LLMServer, replay_env: None) -> None:
    """The guard is in place before the root conftest.py is imported and stays until the
    process exits: none of these calls reaches the server."""
    root = tmp_path / "collect"
    root.mkdir()
    (root / "conftest.py").write_text(CONFTEST_CALLS)
    (root / "test_c.py").write_text("from conftest import _try\n_try('test-import')\n\ndef test_x():\n    _try('in-test')\n")
    run = _pytest(root, "-s", "test_c.py", env={"CASSTORE_TEST_URL": llm_server.url, "CASSTORE_OFFLINE": "1"})
    assert "1 passed" in run.stdout, run.stdout + run.stderr
    for where in ("conftest-import", "test-import", "in-test", "sessionfinish", "unconfigure", "atexit"):
        assert f"[{where}] LiveCallBlocked" in run.stderr, run.stderr
    assert llm_server.count == 0
    # without offline the same calls go out: the count above is not for want of trying
    assert "1 passed" in _pytest(root, "-s", "test_c.py", env={"CASSTORE_TEST_URL": llm_server.url}).stdout
    assert llm_server.count == 6


CHILDREN = """
import concurrent.futures as cf, multiprocessing as mp, os, subprocess, sys
import pytest
import casstore

URL = os.environ["CASSTORE_TEST_URL"]


def call(url):
    import httpx
    try:
        httpx.get(url + "/echo?child=1", timeout=5)
        return "went out"
    except Exception as exc:
        return type(exc).__name__


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_pool(method):
    with casstore.use("kids", mode="replay"):
        with cf.ProcessPoolExecutor(1, mp_context=mp.get_context(method)) as pool:
            # a fork worker is a copy of the block (a replay miss); spawn/forkserver: offline
            assert pool.submit(call, URL).result() in ("LiveCallBlocked", "CassetteMiss")


def test_subprocess_without_casstore():
    code = f"import httpx\\ntry: httpx.get({URL!r} + '/echo?sub=1'); print('went out')\\nexcept Exception as e: print(type(e).__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "LiveCallBlocked"
"""


def _pth_installed() -> bool:
    return any((Path(p) / "casstore-offline.pth").exists() for p in site.getsitepackages())


def _kids(tmp_path: Path) -> Path:
    root = tmp_path / "kids"
    root.mkdir()
    (root / "casstore.toml").write_text("")
    (root / "test_kids.py").write_text(CHILDREN)
    return root


def test_pool_workers_of_an_offline_run_are_refused(tmp_path: Path, llm_server: LLMServer, replay_env: None) -> None:
    """spawn/forkserver/fork pool workers started inside a block under the plugin offline:
    refused (spawn and forkserver workers arm the guard themselves); the server sees nothing."""
    root = _kids(tmp_path)
    env = {"CASSTORE_TEST_URL": llm_server.url}
    run = _pytest(root, "test_kids.py", "-k", "pool", env={**env, "CASSTORE_OFFLINE": "1"})
    assert "3 passed" in run.stdout, run.stdout + run.stderr
    assert llm_server.count == 0
    # without offline a spawn worker's call goes out (the count above is not for want of trying)
    again = _pytest(root, "test_kids.py", "-k", "spawn", env=env)
    assert "1 failed" in again.stdout and "went out" in again.stdout, again.stdout + again.stderr
    assert llm_server.count == 1


@pytest.mark.skipif(not _pth_installed(), reason="casstore-offline.pth is not in this environment's site-packages "
                    "(`pip install -e .` or a wheel install puts it there)")
def test_a_child_python_that_never_imports_casstore_is_refused(
        tmp_path: Path, llm_server: LLMServer, replay_env: None) -> None:
    """`python -c "import httpx; httpx.get(...)"` from a test of an offline run: the .pth file
    arms the guard at the child's start-up; the server sees nothing."""
    run = _pytest(_kids(tmp_path), "test_kids.py", "-k", "subprocess",
                  env={"CASSTORE_TEST_URL": llm_server.url, "CASSTORE_OFFLINE": "1"})
    assert "1 passed" in run.stdout, run.stdout + run.stderr
    assert llm_server.count == 0
