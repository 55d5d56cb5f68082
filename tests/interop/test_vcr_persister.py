"""vcrpy's own semantics on casstore's store: the migration that changes no test.

Each sample project records its cassettes with the real vcrpy (through pytest-recording,
pytest-vcr or vcrpy's own API) against the loopback stub, before casstore is set up in it;
then the documented migration runs (``casstore init``, ``casstore import vcr DIRS --add``,
``git rm`` of the YAML) and the same test files pass offline, served from the pinned store
through casstore's vcrpy persister, the stub seeing no request.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.commands import REPO, git
from tests.helpers.llm_server import LLMServer

pytestmark = pytest.mark.usefixtures("replay_env")

# pytest-vcr cannot share an environment with pytest-recording (pytest-recording refuses to
# start next to it): CI installs it on its own (`pip install --target .venv-pytest-vcr`)
PYTEST_VCR_DIR = Path(os.environ.get("CASSTORE_TEST_PYTEST_VCR", REPO / ".venv-pytest-vcr"))

RECORDING_CONFTEST = textwrap.dedent(
    """
    import gzip
    import os

    import pytest
    import yaml
    from vcr.persisters.filesystem import CassetteNotFoundError, FilesystemPersister
    from vcr.request import Request


    class GzSerializer:
        # langchain's: vcrpy's cassette_dict as is (requests: / responses:), YAML, gzipped
        @staticmethod
        def serialize(cassette_dict):
            cassette_dict["requests"] = [r._to_dict() for r in cassette_dict["requests"]]
            return gzip.compress(yaml.safe_dump(cassette_dict).encode("utf-8"))

        @staticmethod
        def deserialize(data):
            cassette = yaml.safe_load(gzip.decompress(data).decode("utf-8"))
            cassette["requests"] = [Request._from_dict(r) for r in cassette["requests"]]
            return cassette


    class GzPersister:
        @classmethod
        def load_cassette(cls, cassette_path, serializer):
            if not isinstance(serializer, GzSerializer):
                return FilesystemPersister.load_cassette(cassette_path, serializer)
            try:
                with open(cassette_path, "rb") as f:
                    data = serializer.deserialize(f.read())
            except FileNotFoundError:
                raise CassetteNotFoundError(cassette_path) from None
            return data["requests"], data["responses"]

        @staticmethod
        def save_cassette(cassette_path, cassette_dict, serializer):
            if not isinstance(serializer, GzSerializer):
                return FilesystemPersister.save_cassette(cassette_path, cassette_dict, serializer)
            os.makedirs(os.path.dirname(cassette_path), exist_ok=True)
            with open(cassette_path, "wb") as f:
                f.write(serializer.serialize(cassette_dict))


    def pytest_recording_configure(config, vcr):
        vcr.register_serializer("yaml.gz", GzSerializer())
        vcr.register_persister(GzPersister)


    @pytest.fixture(scope="module")
    def vcr_config():
        return {"filter_headers": ["authorization"], "persister": GzPersister, "serializer": "yaml"}
    """
)

RECORDING_TESTS = textwrap.dedent(
    """
    import os
    import uuid

    import httpx
    import pytest
    import requests

    URL = os.environ["STUB_URL"]


    @pytest.mark.vcr
    def test_body_changes_every_run():
        # vcrpy's default match_on (method + URI): the body is not compared
        r = httpx.post(URL + "/v1/chat/completions", headers={"Authorization": "Bearer " + os.environ["STUB_KEY"]},
                       json={"model": "m", "max_tokens": 8192 if os.environ.get("OLD") else 64000,
                             "messages": [{"role": "user", "content": "id " + uuid.uuid4().hex}]})
        assert r.json()["choices"][0]["message"]["content"].startswith("chat#")


    @pytest.mark.vcr
    def test_cassette_api(vcr):
        r = requests.post(URL + "/echo?page=2", data=b"payload-1", timeout=5)
        assert r.json()["body"] == "payload-1"
        assert len(vcr) == 1 and vcr.requests[0].body == b"payload-1"
        assert vcr.requests[0].uri.endswith("/echo?page=2")
        assert vcr.record_mode == os.environ["EXPECT_MODE"]
        assert vcr.play_count == int(os.environ["EXPECT_PLAYED"]) and sum(vcr.play_counts.values()) == vcr.play_count


    @pytest.mark.vcr
    def test_calls_from_worker_threads():
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(2) as pool:
            assert pool.submit(requests.get, URL + "/echo?thread=1", timeout=5).result().status_code == 200


    @pytest.mark.vcr
    def test_two_calls_in_order():
        assert httpx.get(URL + "/echo?n=1").json()["query"] == [["n", "1"]]
        assert httpx.get(URL + "/echo?n=2").json()["query"] == [["n", "2"]]
    """
)

GZ_TESTS = textwrap.dedent(
    """
    import os

    import httpx
    import pytest

    URL = os.environ["STUB_URL"]


    @pytest.fixture(scope="module")
    def vcr_config():
        return {"serializer": "yaml.gz", "match_on": ["method", "path"]}


    @pytest.mark.vcr
    def test_gzipped_cassette():
        assert httpx.get(URL + "/gzip?v=" + os.urandom(4).hex()).json()["path"] == "/gzip"
    """
)

PYPROJECT = textwrap.dedent(
    """
    [tool.pytest.ini_options]
    filterwarnings = ["error"]
    """
)


def _pytest(cwd: Path, *args: str, env: dict[str, str], pythonpath: str = "") -> subprocess.CompletedProcess[str]:
    full = os.environ.copy()
    full.update(env)
    for var in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_ADDOPTS", "CASSTORE_OFFLINE", "CI"):
        full.pop(var, None)
    full.update(env)
    full["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, str(REPO), full.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "-rfEs", *args],
        cwd=cwd, env=full, capture_output=True, text=True, timeout=240, check=False,
    )


def _project(root: Path, files: dict[str, str]) -> Path:
    root.mkdir()
    git("init", "-q", cwd=root)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _migrate(root: Path, casstore: Any, *dirs: str) -> None:
    """The documented migration: init, import with --add, the YAML removed from git."""
    git("add", "-A", cwd=root)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "recorded", cwd=root)
    assert casstore("init", cwd=root).exit_code == 0
    imported = casstore("import", "vcr", *dirs, "--add", cwd=root)
    assert imported.exit_code == 0, imported.stdout + imported.stderr
    for d in dirs:
        git("rm", "-r", "-q", "--", *(str(p.relative_to(root)) for p in (root / d).rglob("*.yaml*")), cwd=root)
    assert not [p for d in dirs for p in (root / d).rglob("*.yaml*")]


def _out(run: subprocess.CompletedProcess[str]) -> str:
    return run.stdout + run.stderr


@pytest.fixture
def recording_project(tmp_path: Path) -> Path:
    return _project(tmp_path / "proj", {
        "pyproject.toml": PYPROJECT,
        "tests/conftest.py": RECORDING_CONFTEST,
        "tests/test_api.py": RECORDING_TESTS,
        "tests/test_gz.py": GZ_TESTS,
    })


def test_pytest_recording_project_replays_from_the_store_with_vcrpy_semantics(
    recording_project: Path, llm_server: LLMServer, casstore: Any, fake_key: str
) -> None:
    root = recording_project
    env = {"STUB_URL": llm_server.url, "STUB_KEY": fake_key}
    first = _pytest(root, "tests", "--record-mode=once", env={**env, "OLD": "1", "EXPECT_MODE": "once",
                                                               "EXPECT_PLAYED": "0"})
    assert first.returncode == 0, _out(first)
    recorded = llm_server.count
    assert recorded == 6
    assert (root / "tests/cassettes/test_gz/test_gzipped_cassette.yaml.gz").is_file()  # the project's serializer

    _migrate(root, casstore, "tests/cassettes")

    # pytest-recording still installed, offline, and its CI spelling: vcrpy replays, casstore's store serves
    offline = _pytest(root, "tests", "--record-mode=none", "--block-network", env={**env, "CASSTORE_OFFLINE": "1", "EXPECT_MODE": "none",
                                          "EXPECT_PLAYED": "1"})
    assert offline.returncode == 0, _out(offline)
    assert "5 passed" in offline.stdout
    assert llm_server.count == recorded
    assert not list((root / "tests/cassettes").rglob("*.yaml*"))  # nothing written back

    # pytest-recording gone: casstore's engine serves the same interface (the fallback); the
    # conftest's hook and the persister/serializer options load, no warning under "error"
    fallback = _pytest(root, "tests", "-p", "no:recording", env={**env, "CASSTORE_OFFLINE": "1",
                                                                 "EXPECT_MODE": "none", "EXPECT_PLAYED": "1"})
    assert fallback.returncode == 0, _out(fallback)
    assert "5 passed" in fallback.stdout and "persister" not in fallback.stdout
    assert llm_server.count == recorded


def test_a_miss_is_vcrpys_refusal_and_rerecording_writes_a_working_copy_that_add_pins(
    recording_project: Path, llm_server: LLMServer, casstore: Any, fake_key: str
) -> None:
    root = recording_project
    env = {"STUB_URL": llm_server.url, "STUB_KEY": fake_key, "EXPECT_MODE": "once", "EXPECT_PLAYED": "0"}
    assert _pytest(root, "tests/test_api.py", "--record-mode=once", "-k", "in_order", env=env).returncode == 0
    _migrate(root, casstore, "tests/cassettes")
    working = root / "tests/cassettes/test_api/test_two_calls_in_order.json"
    before = working.read_bytes()
    (root / "tests/test_api.py").write_text(RECORDING_TESTS.replace("n=2", "n=3").replace('"n", "2"', '"n", "3"'))
    # a call the pinned cassette lacks: vcrpy's own refusal, after it served the first call from the store
    # (the test asserts n=1's answer before it asks n=3; which requests vcrpy's message lists
    # beside the refused one is vcrpy's to choose: 8.x lists the played n=1 too)
    refused = _pytest(root, "tests/test_api.py", "-k", "in_order", env=env)
    assert refused.returncode == 1
    assert "CannotOverwriteExistingCassetteException" in refused.stdout and "/echo?n=3" in refused.stdout
    assert llm_server.count == 2
    rerun = _pytest(root, "tests/test_api.py", "-k", "in_order or body", "--record-mode=rewrite", env=env)
    assert rerun.returncode == 0, _out(rerun)
    assert llm_server.count == 5
    assert working.read_bytes() != before and b"n=3" in working.read_bytes()
    new = root / "tests/cassettes/test_api/test_body_changes_every_run.json"
    assert fake_key.encode() not in new.read_bytes()  # redacted as every recording is
    assert not list((root / "tests/cassettes").rglob("*.yaml"))  # no vcrpy file written back
    status = casstore("status", "--json", cwd=root)
    assert status.exit_code in (0, 1)
    added = casstore("add", str(working), str(new), cwd=root)
    assert added.exit_code == 0, added.stderr
    assert _pytest(root, "tests/test_api.py", "-k", "in_order or body",
                   env={**env, "CASSTORE_OFFLINE": "1"}).returncode == 0
    assert llm_server.count == 5


VCRPY_API_TESTS = textwrap.dedent(
    """
    import os
    import uuid

    import httpx
    import pytest
    import requests
    import vcr

    URL = os.environ["STUB_URL"]
    my_vcr = vcr.VCR(match_on=["method", "path"], cassette_library_dir="tests/fixtures/vcr_cassettes")


    def test_use_cassette_context():
        with vcr.use_cassette("tests/fixtures/direct.yaml") as cass:
            r = requests.post(URL + "/echo", json={"id": uuid.uuid4().hex}, timeout=5)
        assert r.json()["method"] == "POST" and len(cass) == 1


    @my_vcr.use_cassette("custom.yaml")
    def test_custom_vcr_matches_on_path_only():
        assert httpx.get(URL + "/echo?nonce=" + uuid.uuid4().hex).json()["path"] == "/echo"


    @pytest.mark.vcr
    def test_pytest_vcr_marker(vcr_cassette):
        assert httpx.get(URL + "/echo?via=pytest-vcr").json()["query"] == [["via", "pytest-vcr"]]
        assert len(vcr_cassette) == 1
    """
)


def test_pytest_vcr_and_vcrpy_api_project_replays_from_the_store(
    tmp_path: Path, llm_server: LLMServer, casstore: Any
) -> None:
    if not (PYTEST_VCR_DIR / "pytest_vcr.py").is_file():
        pytest.skip(f"pytest-vcr is not installed in {PYTEST_VCR_DIR} (pip install --target; see .ci/run)")
    root = _project(tmp_path / "proj", {"pyproject.toml": PYPROJECT, "tests/test_api.py": VCRPY_API_TESTS})
    env = {"STUB_URL": llm_server.url}
    # pytest-vcr and pytest-recording refuse to share a run: this project has pytest-vcr only
    args = ("tests", "-p", "no:recording")
    first = _pytest(root, *args, env=env, pythonpath=str(PYTEST_VCR_DIR))
    assert first.returncode == 0, _out(first)
    assert llm_server.count == 3
    assert {p.name for p in (root / "tests").rglob("*.yaml")} == {
        "direct.yaml", "custom.yaml", "test_pytest_vcr_marker.yaml"}

    _migrate(root, casstore, "tests/fixtures", "tests/cassettes")

    offline = _pytest(root, *args, env={**env, "CASSTORE_OFFLINE": "1"}, pythonpath=str(PYTEST_VCR_DIR))
    assert offline.returncode == 0, _out(offline)
    assert "3 passed" in offline.stdout and "ScopeMismatch" not in offline.stdout
    assert llm_server.count == 3


# -- the import of what custom serializers wrote ----------------------------------------


def _gz_cassette(path: Path, data: dict[str, Any]) -> Path:
    import gzip

    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(yaml.safe_dump(data).encode("utf-8")))
    return path


def test_import_reads_gzipped_requests_responses_layout(repo: Path, casstore: Any) -> None:
    request = {"method": "GET", "uri": "http://127.0.0.1:9/v1/models?x=1", "body": None,
               "headers": {"Accept": ["application/json"]}}
    response = {"status": {"code": 200, "message": "OK"}, "headers": {"Content-Type": ["application/json"]},
                "body": {"string": b'{"data": []}'}}
    _gz_cassette(repo / "tests/cassettes/test_lc/test_models.yaml.gz", {"requests": [request], "responses": [response]})
    imported = casstore("import", "vcr", "tests/cassettes", "--add", cwd=repo)
    assert imported.exit_code == 0, imported.stderr
    assert "1 of 1 interactions replay" in imported.stdout
    rows = casstore("ls", "--json", cwd=repo).json
    assert [(r["name"], r["entries"]) for r in rows] == [("test_lc/test_models", 1)]


@pytest.mark.parametrize("content, message", [
    (b"not gzip at all", "not a readable gzip file"),
    (None, "a 'requests' list needs a 'responses' list of the same length"),
])
def test_import_refuses_a_broken_gz_cassette_in_one_line(
    repo: Path, casstore: Any, content: bytes | None, message: str
) -> None:
    path = repo / "bad.yaml.gz"
    if content is None:
        _gz_cassette(path, {"requests": [{"method": "GET", "uri": "http://x/", "body": None, "headers": {}}],
                            "responses": []})
    else:
        path.write_bytes(content)
    run = casstore("import", "vcr", str(path), "--add", cwd=repo)
    assert run.exit_code == 2 and message in run.stderr
    assert not (repo / "casstore.lock").exists() or "bad" not in (repo / "casstore.lock").read_text()


# -- cookies: the names and attributes kept, each value redacted ---------------------------

COOKIE_TESTS = textwrap.dedent(
    """
    import os

    import requests
    import vcr

    URL = os.environ["STUB_URL"]
    tape = vcr.VCR(cassette_library_dir="tests/fixtures/vcr_cassettes", record_mode="new_episodes")


    def test_login_sets_its_cookies():
        # gql's fixture: the CSRF token is read from the login page's cookie by its name
        with tape.use_cassette("login.yaml"):
            r = requests.get(URL + "/cookies", timeout=5)
        jar = {c.name: c for c in r.cookies}
        assert sorted(jar) == ["csrftoken", "sessionid"]
        assert jar["csrftoken"].path == "/" and jar["csrftoken"].expires
        raw = os.environ.get("RAW_VALUES", "").split()
        assert not [c.value for c in jar.values() if c.value in raw]
    """
)


def test_imported_set_cookie_keeps_the_names_and_loses_the_values(
    tmp_path: Path, llm_server: LLMServer, casstore: Any
) -> None:
    import re

    root = _project(tmp_path / "proj", {"pyproject.toml": PYPROJECT, "tests/test_login.py": COOKIE_TESTS})
    env = {"STUB_URL": llm_server.url}
    first = _pytest(root, "tests", "-p", "no:recording", env=env)
    assert first.returncode == 0, _out(first)
    recorded = (root / "tests/fixtures/vcr_cassettes/login.yaml").read_text()
    raw = re.findall(r"(?:csrftoken|sessionid)=([^;\s]+)", recorded)
    assert len(raw) == 2 and llm_server.count == 1

    _migrate(root, casstore, "tests/fixtures")

    # served from the store: vcrpy sets both cookies by name, neither value is the recorded one
    offline = _pytest(root, "tests", "-p", "no:recording", env={**env, "CASSTORE_OFFLINE": "1",
                                                                "RAW_VALUES": " ".join(raw)})
    assert offline.returncode == 0, _out(offline)
    assert llm_server.count == 1
    (name,) = [row["name"] for row in casstore("ls", "--json", cwd=root).json]
    exported = casstore("export", name, cwd=root)
    assert exported.exit_code == 0, exported.stderr
    assert "csrftoken=[REDACTED:cookie]; expires=Sat, 27 Nov 2027 02:00:00 GMT; Max-Age=31449600; Path=/" \
        in exported.stdout
    assert "sessionid=[REDACTED:cookie]; HttpOnly; Path=/" in exported.stdout
    assert not [v for v in raw if v in exported.stdout]

    # the pinned, redacted copy checks clean; the recorded file with its values is refused,
    # naming the file, the header and the cookie, and the rule, never a value
    clean = casstore("check", cwd=root)
    assert clean.exit_code == 0, _out(clean)  # type: ignore[arg-type]
    (root / "tests/fixtures/vcr_cassettes").mkdir(parents=True)
    (root / "tests/fixtures/vcr_cassettes/login.yaml").write_text(recorded)
    refused = casstore("check", "tests/fixtures/vcr_cassettes/login.yaml", cwd=root)
    said = refused.stdout + refused.stderr
    assert refused.exit_code == 1
    assert "login.yaml" in said and "(cookie)" in said and "<cookie>.csrftoken" in said
    assert "set-cookie" in said.lower()
    assert not [v for v in raw if v in said]


def test_a_recording_keeps_the_cookie_names(tmp_path: Path, llm_server: LLMServer, replay_env: None) -> None:
    """What casstore's recorder writes (the same redaction as the import): names and
    attributes kept, each value redacted; replayed, the response sets the cookies by name."""
    import httpx

    import casstore as lib

    cassettes = tmp_path / "cassettes"
    with lib.use("login", mode="record", cassette_dir=cassettes):
        live = httpx.get(llm_server.url + "/cookies")
    raw = list(live.cookies.values())
    text = (cassettes / "login.json").read_text()
    assert len(raw) == 2 and not [v for v in raw if v in text]
    assert "sessionid=[REDACTED:cookie]; HttpOnly; Path=/" in text
    with lib.use("login", mode="replay", cassette_dir=cassettes):
        replayed = httpx.get(llm_server.url + "/cookies")
    assert sorted(replayed.cookies.keys()) == ["csrftoken", "sessionid"]
    assert not [v for v in replayed.cookies.values() if v in raw]
    assert llm_server.count == 1
