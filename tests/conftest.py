"""Shared fixtures and hooks: an isolated user environment, a real S3 server on loopback, a CLI
runner, the fake LLM provider, and the reliability figures printed at the end of a run.

Helpers (plain functions and classes) live in ``tests/helpers/``; the names tests used to
import from here (``from tests.conftest import git``) are re-exported below.
Nothing here reaches beyond 127.0.0.1. Credentials are obviously fake and built at run time.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from casstore.cli.main import cli
from tests.helpers.cassettes import make_cassette, write_cassette
from tests.helpers.commands import REPO, Run, git, run_casstore_subprocess
from tests.helpers.figures import FIGURES, record
from tests.helpers.llm_server import LLMServer
from tests.helpers.s3 import S3Server, fake_aws_env

__all__ = [  # re-exported helpers (their home is tests/helpers/)
    "REPO", "Run", "S3Server", "fake_aws_env", "git", "make_cassette", "run_casstore_subprocess",
    "write_cassette",
]

_VOLATILE_ENV = (
    "CASSTORE_CACHE_DIR", "CASSTORE_CONFIG_DIR", "CASSTORE_SIGNING_KEY", "CASSTORE_SIGNER",
    "CASSTORE_REMOTE", "CASSTORE_MODE", "CASSTORE_OFFLINE", "CI", "CASSTORE_ALLOW_RECORD", "CASSTORE_TIMING",
    "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
)


@pytest.fixture(autouse=True)
def isolated_user(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own cache and config dir and a known git identity."""
    home = tmp_path_factory.mktemp("user")
    for var in _VOLATILE_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(home / "cache"))
    monkeypatch.setenv("CASSTORE_CONFIG_DIR", str(home / "config"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "Test User")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "tester@example.com")
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test User\n\temail = tester@example.com\n[init]\n\tdefaultBranch = main\n"
    )
    return home


# -- S3 on loopback ---------------------------------------------------------------
@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    from moto.server import ThreadedMotoServer

    saved = {k: os.environ.get(k) for k in fake_aws_env()}
    os.environ.update(fake_aws_env())
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield S3Server(endpoint=f"http://{host}:{port}")
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def s3_url(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket on the loopback S3 server; AWS_ENDPOINT_URL points at it."""
    for k, v in fake_aws_env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    return f"s3://{s3_server.new_bucket()}/cassettes"


# -- the command line -------------------------------------------------------------
@pytest.fixture
def casstore(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Run the CLI in-process: ``casstore("add", "x.json", cwd=repo)`` -> Run."""

    def run(*args: str, cwd: Path | None = None, input: str | None = None) -> Run:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        res = CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)
        return Run(res.exit_code, res.stdout, res.stderr)

    return run


@pytest.fixture
def repo(tmp_path: Path, casstore) -> Path:  # type: ignore[no-untyped-def]
    """A git repository where `casstore init` has run (local default store)."""
    root = tmp_path / "repo"
    root.mkdir()
    git("init", "-q", cwd=root)
    r = casstore("init", cwd=root)
    assert r.exit_code == 0, r.stderr
    return root


# -- the replay library: the fake LLM provider and a clean mode setup ---------------
@pytest.fixture
def llm_server() -> Iterator[LLMServer]:
    """A running fake OpenAI/Anthropic server on 127.0.0.1 (stopped at teardown)."""
    with LLMServer() as server:
        yield server


@pytest.fixture
def fake_key() -> str:
    """An ``sk-``-shaped key that is obviously fake (built at run time, never a literal).

    Random-looking on purpose: redaction ignores ``sk-testtest…``-style placeholders.
    """
    return "sk-" + "fakeT3st" + hashlib.sha256(b"casstore fake key").hexdigest()[:32]


@pytest.fixture
def replay_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No mode from the environment, pytest options or CI: each test says what it wants."""
    from casstore.replay import api as replay
    from casstore.replay.context import CURRENT

    for var in ("CASSTORE_MODE", "CASSTORE_OFFLINE", "CI"):
        monkeypatch.delenv(var, raising=False)
    saved = replay._forced_mode
    replay._forced_mode = None
    try:
        yield
    finally:
        replay._forced_mode = saved
        assert CURRENT.get() is None, "a use() block leaked out of the test"


@pytest.fixture
def cassette_dir(tmp_path: Path, replay_env: None) -> Path:
    """A private cassette dir (so no test writes into the repository)."""
    d = tmp_path / "cassettes"
    d.mkdir()
    return d


# -- reliability figures (tests.helpers.figures.record) ------------------------------
def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: hand the figures to the controller
        workeroutput["casstore_figures"] = json.dumps({k: dict(v) for k, v in FIGURES.items()})


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # type: ignore[no-untyped-def]
    raw = getattr(node, "workeroutput", {}).get("casstore_figures")
    if raw:
        for section, counts in json.loads(raw).items():
            record(section, **counts)


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if not FIGURES or getattr(terminalreporter.config, "workerinput", None) is not None:
        return
    terminalreporter.section("casstore reliability figures")
    for section in sorted(FIGURES):
        counts = FIGURES[section]
        body = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items())
        terminalreporter.write_line(f"{section}: {body}")
