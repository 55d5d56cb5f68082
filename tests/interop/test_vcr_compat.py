"""pytest-recording's interface served by casstore: a project migrates without touching a test.

The fallback, casstore's engine serving pytest-recording's interface (pytest-recording absent
or disabled; with it, see tests/interop/test_vcr_persister.py). A sample project whose tests use
``@pytest.mark.vcr`` and ``vcr_config`` (httpx, requests, aiohttp and the OpenAI SDK) is
recorded by the real pytest-recording + vcrpy against the loopback stub, imported with
``casstore import vcr ... --add``, and then run unchanged with ``-p no:recording``: offline (``CASSTORE_OFFLINE=1``) and with ``--record-mode=none
--block-network``, the stub still running and seeing no request.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.llm_server import LLMServer

pytestmark = pytest.mark.usefixtures("replay_env")

CONFTEST = textwrap.dedent(
    """
    import pytest


    @pytest.fixture(scope="session")
    def vcr_config():
        return {
            "filter_headers": ["authorization", "x-tenant"],
            "filter_query_parameters": ["api_key"],
            "filter_post_data_parameters": ["password"],
            "decode_compressed_response": False,
        }
    """
)

CLIENTS = textwrap.dedent(
    """
    import asyncio
    import os

    import httpx
    import pytest
    import requests

    URL = os.environ["STUB_URL"]
    KEY = os.environ["STUB_KEY"]


    @pytest.mark.vcr
    def test_requests_json():
        r = requests.post(URL + "/echo", params={"api_key": KEY, "page": "2"}, json={"q": "hi"},
                          headers={"Authorization": "Bearer " + KEY, "X-Tenant": "t-" + KEY[-6:]}, timeout=5)
        echo = r.json()
        assert echo["method"] == "POST" and echo["body"] == '{"q": "hi"}'
        assert ["page", "2"] in echo["query"]


    @pytest.mark.vcr
    def test_form_with_a_filtered_password():
        r = requests.post(URL + "/echo", data={"user": "ann", "password": "pw-" + KEY[-8:]}, timeout=5)
        assert r.json()["method"] == "POST"


    @pytest.mark.vcr()
    def test_requests_gzip():
        assert requests.get(URL + "/gzip", timeout=5).json()["path"] == "/gzip"


    @pytest.mark.vcr
    def test_httpx_chat_and_gzip():
        with httpx.Client(timeout=5) as c:
            r = c.post(URL + "/v1/chat/completions", headers={"Authorization": "Bearer " + KEY},
                       json={"model": "gpt-test", "messages": [{"role": "user", "content": "héllo"}], "temperature": 0})
            assert r.json()["choices"][0]["message"]["content"].endswith(": héllo")
            assert c.get(URL + "/gzip").json()["path"] == "/gzip"


    @pytest.mark.vcr
    def test_openai_sdk():
        import openai

        client = openai.OpenAI(base_url=URL + "/v1", api_key=KEY, max_retries=0)
        reply = client.chat.completions.create(model="gpt-test", temperature=0.5,
                                               messages=[{"role": "user", "content": "ping"}])
        assert reply.choices[0].message.content.endswith(": ping")
        stream = client.chat.completions.create(model="gpt-test", stream=True,
                                                messages=[{"role": "user", "content": "stream"}])
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices).endswith(": stream")


    @pytest.mark.vcr
    def test_aiohttp_json():
        import aiohttp

        async def call():
            async with aiohttp.ClientSession() as s:
                async with s.post(URL + "/echo", json={"via": "aiohttp"}) as r:
                    return await r.json()

        assert asyncio.run(call())["body"] == '{"via": "aiohttp"}'


    @pytest.mark.vcr
    @pytest.mark.parametrize("word", ["a b", "x/y", "ü", pytest.param("long" * 70, id="long" * 70)])
    def test_param(word):
        assert httpx.get(URL + "/echo", params={"w": word}).json()["query"] == [["w", word]]


    class TestShop:
        @pytest.mark.vcr
        def test_order(self):
            assert requests.put(URL + "/text", data={"order": "7"}, timeout=5).text.startswith("plain #")

        @pytest.fixture(scope="class")
        @classmethod
        def vcr_config(cls):
            return {"match_on": ["method", "path"], "allow_playback_repeats": True,
                    "before_record_request": lambda request: request}

        @pytest.mark.vcr
        def test_varying_body_repeated(self):
            import time

            for _ in range(2):  # recorded once (repeats allowed), the body differs every run
                assert httpx.post(URL + "/echo", json={"t": time.time()}).status_code == 200


    @pytest.mark.vcr
    def test_first():
        assert httpx.get(URL + "/echo?shared=1").status_code == 200


    @pytest.mark.vcr("test_first.yaml")
    def test_reuses_first():
        # its own cassette is never written: vcrpy plays the call from test_first's
        assert httpx.get(URL + "/echo?shared=1").status_code == 200


    @pytest.mark.vcr
    @pytest.mark.default_cassette("renamed")
    def test_renamed():
        assert httpx.get(URL + "/echo?renamed=1").status_code == 200


    def test_unmarked_call_is_blocked():
        if not os.environ.get("EXPECT_BLOCK"):
            pytest.skip("only when the network is blocked")
        with pytest.raises(Exception, match="(?i)casstore|network"):
            requests.get(URL + "/echo?unmarked=1", timeout=5)
    """
)

CUSTOM_DIR = textwrap.dedent(
    """
    import os

    import httpx
    import pytest

    URL = os.environ["STUB_URL"]


    @pytest.fixture(scope="module")
    def vcr_cassette_dir():
        return os.path.join(os.path.dirname(__file__), "recorded", "elsewhere")


    @pytest.fixture(scope="module")
    def vcr_config():
        return {"match_on": ["method", "scheme", "host", "port", "path", "query"]}  # vcrpy's default


    @pytest.mark.vcr
    def test_custom_dir():
        assert httpx.get(URL + "/echo?custom=1").json()["query"] == [["custom", "1"]]
        # match_on without body: a different body replays the same recording
        assert httpx.post(URL + "/echo?custom=2", content=os.urandom(8).hex()).status_code == 200
    """
)


def _pytest(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = os.environ.copy()
    full.update(env)
    full.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    full.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-rs", *args],
        cwd=cwd, env=full, capture_output=True, text=True, timeout=240, check=False,
    )


def _aiohttp_replays() -> bool:
    """aiohttp calls replay from vcrpy's aiohttp recordings once aiohttp is intercepted and
    client default headers (aiohttp adds ``accept`` after vcrpy looked) leave the identity
    (both from the hermetic-replay work)."""
    from casstore.model.identity import is_volatile_header

    return importlib.util.find_spec("casstore.replay.aiohttp") is not None and is_volatile_header("accept")


@pytest.fixture
def sample(repo: Path) -> Path:
    tests = repo / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "conftest.py").write_text(CONFTEST)
    (tests / "test_clients.py").write_text(CLIENTS)
    (tests / "test_custom_dir.py").write_text(CUSTOM_DIR)
    return repo


def test_pytest_recording_project_runs_unchanged_on_casstore(
    sample: Path, llm_server: LLMServer, casstore: Any, fake_key: str
) -> None:
    env = {"STUB_URL": llm_server.url, "STUB_KEY": fake_key}
    # 1. recorded by the real pytest-recording + vcrpy, before the project used casstore
    first = _pytest(sample, "tests", "--record-mode=once", "-p", "no:casstore", env=env)
    out = first.stdout + first.stderr
    assert first.returncode == 0, out
    recorded = llm_server.count
    assert recorded >= 14
    cassettes = sample / "tests" / "cassettes" / "test_clients"
    files = sorted(p.name for p in cassettes.iterdir())
    assert "TestShop.test_order.yaml" in files and "test_param[a b].yaml" in files and "renamed.yaml" in files
    assert any(f.startswith("test_param[longlong") and "..." in f for f in files)  # pytest-recording hashed it
    assert "test_reuses_first.yaml" not in files  # played from test_first's cassette
    assert (sample / "tests" / "recorded" / "elsewhere" / "test_custom_dir.yaml").is_file()
    yaml_text = (cassettes / "test_requests_json.yaml").read_text()
    assert "Bearer " + fake_key not in yaml_text and "api_key=" not in yaml_text  # vcrpy's filters at work
    assert "password" not in (cassettes / "test_form_with_a_filtered_password.yaml").read_text().split("response:")[0]

    # 2. one import
    imported = casstore("import", "vcr", "tests/cassettes", "tests/recorded", "--add", cwd=sample)
    assert imported.exit_code == 0, imported.stderr
    assert "interactions replay" in imported.stdout
    names = sorted(row["name"] for row in casstore("ls", "--json", cwd=sample).json)
    assert "test_clients/TestShop.test_order" in names
    assert "test_clients/test_param-a-b" in names and "test_clients/renamed" in names
    assert "tests/recorded/elsewhere/test_custom_dir" in names

    # 3. the same test files, casstore serving the interface, offline: the stub sees nothing
    deselect = [] if _aiohttp_replays() else ["-k", "not aiohttp"]
    offline = _pytest(sample, "tests", "-p", "no:recording", *deselect, env={**env, "CASSTORE_OFFLINE": "1"})
    out = offline.stdout + offline.stderr
    assert offline.returncode == 0, out
    assert "before_record_request" in out  # one warning naming the option casstore ignores
    assert llm_server.count == recorded

    # 4. pytest-recording's own CI spelling: strict replay, the network blocked (casstore's socket guard)
    blocked = _pytest(sample, "tests", "-p", "no:recording", "--record-mode=none", "--block-network", *deselect,
                      env={**env, "EXPECT_BLOCK": "1"})
    out = blocked.stdout + blocked.stderr
    assert blocked.returncode == 0, out
    counts = pytest.RunResult.parse_summary_nouns(blocked.stdout.splitlines())
    assert "skipped" not in counts and counts.get("passed"), out  # the blocked-call test ran too
    assert llm_server.count == recorded


def test_a_call_nobody_recorded_misses_with_the_test_named(
    sample: Path, llm_server: LLMServer, casstore: Any, fake_key: str
) -> None:
    env = {"STUB_URL": llm_server.url, "STUB_KEY": fake_key}
    (sample / "tests" / "test_new.py").write_text(textwrap.dedent(
        """
        import os

        import httpx
        import pytest


        @pytest.mark.vcr
        def test_never_recorded():
            httpx.get(os.environ["STUB_URL"] + "/echo?new=1")
        """
    ))
    run = _pytest(sample, "tests/test_new.py", "-p", "no:recording", env=env)  # default record mode: none
    assert run.returncode == 1
    assert "CassetteMiss" in run.stdout and "test_new/test_never_recorded" in run.stdout
    assert llm_server.count == 0
    recorded = _pytest(sample, "tests/test_new.py", "-p", "no:recording", "--record-mode=once", env=env)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert (sample / "tests" / "cassettes" / "test_new" / "test_never_recorded.json").is_file()
    assert llm_server.count == 1


# -- vcrpy's matching, recorded and replayed by casstore's engine (the fallback) ----------

MATCHING = textwrap.dedent(
    """
    import os

    import httpx
    import pytest

    import casstore

    URL = os.environ["STUB_URL"]
    CALL = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


    @pytest.mark.vcr
    def test_llm_call_default_match_on():
        # vcrpy's default match_on (method + URI) names the host and port: they count for LLM calls too
        assert httpx.post(URL + "/v1/chat/completions", json=CALL).status_code == 200


    @pytest.mark.vcr(match_on=["method", "path"])
    def test_llm_call_path_only():
        assert httpx.post(URL + "/v1/chat/completions", json=CALL).status_code == 200


    @pytest.mark.vcr(match_on=["method", "path", "body"])
    def test_body_with_a_secret_field():
        # the body counts and holds a password: stored redacted, the live call still finds it
        r = httpx.post(URL + "/echo", json={"user": "ana", "password": os.environ["STUB_KEY"]})
        assert r.json()["path"] == "/echo"


    @casstore.tool("add")
    def add(a, b):
        return a + b


    @casstore.tool("mul")
    def mul(a, b):
        return a * b


    @pytest.mark.vcr(match_on=["path"])
    def test_tools_keep_their_own_identity():
        # vcrpy's matchers are about HTTP requests: two tools with the same arguments stay apart
        if os.environ.get("REVERSED"):
            assert (mul(2, 5), add(2, 5)) == (10, 7)
        else:
            assert (add(2, 5), mul(2, 5)) == (7, 10)
    """
)


def test_vcrpy_matching_on_casstore_engine(repo: Path, llm_server: LLMServer, fake_key: str) -> None:
    (repo / "tests").mkdir(exist_ok=True)
    (repo / "tests" / "test_matching.py").write_text(MATCHING)
    env = {"STUB_URL": llm_server.url, "STUB_KEY": fake_key}
    recorded = _pytest(repo, "tests", "-p", "no:recording", "--record-mode=once", env=env)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert llm_server.count == 3
    text = (repo / "tests/cassettes/test_matching/test_body_with_a_secret_field.json").read_text()
    assert fake_key not in text

    replayed = _pytest(repo, "tests", "-p", "no:recording", env={**env, "CASSTORE_OFFLINE": "1", "REVERSED": "1"})
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "4 passed" in replayed.stdout and llm_server.count == 3

    # the same LLM call to another port (another host): vcrpy's default misses, path-only serves it
    with LLMServer() as other:
        moved = _pytest(repo, "tests", "-p", "no:recording", "-k", "llm_call", "-rf",
                        env={**env, "STUB_URL": other.url, "CASSTORE_OFFLINE": "1"})
        assert other.count == 0
    assert moved.returncode == 1, moved.stdout + moved.stderr
    assert "1 failed, 1 passed" in moved.stdout
    assert "FAILED tests/test_matching.py::test_llm_call_default_match_on" in moved.stdout, moved.stdout
    assert "CassetteMiss" in moved.stdout
