"""casstore and pytest-recording side by side: the guard never crashes next to vcrpy's patches.

While a vcrpy cassette is active, vcrpy has put its own stand-ins in place of
``http.client.HTTPConnection`` and ``HTTPSConnection``. casstore's interception patches the
standard library's classes themselves, whenever it goes in (offline for the whole run, a
``use()`` block, a client imported late), so the real pytest-recording + vcrpy record and
replay as before: with ``CASSTORE_OFFLINE=1`` (vcrpy replays, nothing goes out; what vcrpy
would record is refused where its connection opens) and without.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.llm_server import LLMServer

pytestmark = pytest.mark.usefixtures("replay_env")

TESTS = textwrap.dedent(
    """
    import asyncio
    import os
    import urllib.request

    import pytest

    import casstore

    URL = os.environ["STUB_URL"]


    @pytest.mark.vcr
    def test_a_client_imported_inside_the_cassette():
        # asyncio's default executor imports concurrent.futures.thread now, inside the cassette:
        # casstore's import watch patches what was imported while vcrpy's stand-ins are in place
        async def work():
            return await asyncio.get_running_loop().run_in_executor(None, sum, [1, 2])

        assert asyncio.run(work()) == 3
        with urllib.request.urlopen(URL + "/echo?t=late", timeout=5) as response:
            assert response.status == 200


    @pytest.mark.vcr
    def test_requests():
        import requests

        assert requests.get(URL + "/echo?t=requests", timeout=5).status_code == 200


    @pytest.mark.vcr
    def test_urllib_request():
        with urllib.request.urlopen(URL + "/echo?t=urllib", timeout=5) as response:
            assert response.status == 200


    @pytest.mark.vcr
    def test_a_casstore_block_inside_a_vcr_cassette(tmp_path):
        with casstore.use("inner", mode="live", cassette_dir=tmp_path):
            pass
        with urllib.request.urlopen(URL + "/echo?t=inner", timeout=5) as response:
            assert response.status == 200
    """
)


def _pytest(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env}
    full.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    full.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", *args],
        cwd=cwd, env=full, capture_output=True, text=True, timeout=240, check=False,
    )


def test_pytest_recording_and_casstore_offline_side_by_side(repo: Path, llm_server: LLMServer) -> None:
    pytest.importorskip("pytest_recording")
    tests = repo / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "test_side_by_side.py").write_text(TESTS)
    env = {"STUB_URL": llm_server.url}

    recorded = _pytest(repo, "tests", "--record-mode=once", env=env)  # vcrpy records, casstore's plugin loaded
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    calls = llm_server.count
    assert calls == 4

    for extra in ({"CASSTORE_OFFLINE": "1"}, {}):
        replayed = _pytest(repo, "tests", env={**env, **extra})  # vcrpy replays (record mode none)
        out = replayed.stdout + replayed.stderr
        assert replayed.returncode == 0, (extra, out)
        assert "4 passed" in out and "INTERNALERROR" not in out
    assert llm_server.count == calls

    # offline still refuses what vcrpy would send live: the connection it opens
    rerecord = _pytest(repo, "tests", "--record-mode=all", "-k", "urllib_request", env={**env, "CASSTORE_OFFLINE": "1"})
    out = rerecord.stdout + rerecord.stderr
    assert rerecord.returncode == 1, out
    assert "LiveCallBlocked" in out and "CASSTORE_OFFLINE=1" in out and "KeyError" not in out
    assert llm_server.count == calls
