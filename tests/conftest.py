"""Shared fixtures: an isolated user environment, a real S3 server on loopback, a CLI runner.

Nothing here reaches beyond 127.0.0.1. Credentials are obviously fake and built at run time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from casstore.cli.main import cli

REPO = Path(__file__).resolve().parents[1]

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
@dataclass
class S3Server:
    endpoint: str

    def client(self):  # type: ignore[no-untyped-def]
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")

    def new_bucket(self) -> str:
        name = f"bkt-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name


def fake_aws_env() -> dict[str, str]:
    # obviously fake, built at run time
    return {
        "AWS_ACCESS_KEY_ID": "testing-" + "x" * 8,
        "AWS_SECRET_ACCESS_KEY": "testing-" + "y" * 16,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }


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
@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def json(self):  # type: ignore[no-untyped-def]
        return json.loads(self.stdout)


@pytest.fixture
def casstore(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Run the CLI in-process: ``casstore("add", "x.json", cwd=repo)`` -> Run."""

    def run(*args: str, cwd: Path | None = None, input: str | None = None) -> Run:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        res = CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)
        return Run(res.exit_code, res.stdout, res.stderr)

    return run


def run_casstore_subprocess(*args: str, cwd: Path, env: dict[str, str] | None = None,
                            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The installed ``casstore`` as a user runs it (a real process)."""
    exe = shutil.which("casstore")
    cmd = [exe, *args] if exe else [sys.executable, "-m", "casstore.cli", *args]
    return subprocess.run(cmd, cwd=cwd, env=env or os.environ.copy(), capture_output=True, text=True,
                          timeout=timeout, check=False)


def git(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=check)


def make_cassette(name: str, *, n: int = 2, recorded_at: str = "2026-11-20T10:00:00Z",
                  body: dict | None = None) -> dict:
    """A small valid format-v1 cassette (for store/lock/CLI tests)."""
    import hashlib

    entries = []
    for i in range(n):
        req = {"method": "POST", "url": "http://127.0.0.1/v1/chat/completions",
               "headers": {"content-type": "application/json"},
               "body": {"model": "gpt-test", "messages": [{"role": "user", "content": f"{name} #{i}"}]}}
        entries.append({
            "identity": hashlib.sha256(json.dumps(req, sort_keys=True).encode()).hexdigest(),
            "seq": i, "kind": "llm", "target": "POST http://127.0.0.1/v1/chat/completions",
            "request": req,
            "response": {"status": 200, "headers": {"content-type": "application/json"},
                         "body": body or {"choices": [{"message": {"content": f"answer {i}"}}]}},
            "recorded_at": recorded_at, "duration_ms": 12,
        })
    return {"format": "casstore.cassette/v1", "name": name,
            "meta": {"recorded_at": recorded_at, "recorder": "tests", "models": ["gpt-test"]},
            "entries": entries, "redaction": {"rules": [], "hits": {}}}


def write_cassette(repo: Path, name: str, **kw) -> Path:  # type: ignore[no-untyped-def]
    path = repo / "tests" / "cassettes" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(make_cassette(name, **kw), indent=2))
    return path


@pytest.fixture
def repo(tmp_path: Path, casstore) -> Path:  # type: ignore[no-untyped-def]
    """A git repository where `casstore init` has run (local default store)."""
    root = tmp_path / "repo"
    root.mkdir()
    git("init", "-q", cwd=root)
    r = casstore("init", cwd=root)
    assert r.exit_code == 0, r.stderr
    return root
from tests.conftest_replay import *  # noqa
from tests.conftest_reliability import *  # noqa
