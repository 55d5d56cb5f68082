"""What a command loads when it starts (issue #19): `status`, `ls` and the pre-commit hook
do not pay for signing, transfers, asyncio or a cloud backend they never use.

Counted as the modules in ``sys.modules`` of a real ``python -m casstore.cli`` process after
the command ran, never timed (docs/benchmarks.md has the times).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cassettes import write_cassette
from tests.helpers.commands import git

_PROBE = """
import runpy, sys
sys.argv = ["casstore", *sys.argv[1:]]
code = 0
try:
    runpy.run_module("casstore.cli", run_name="__main__")
except SystemExit as exc:
    code = exc.code
print("\\nEXIT", code)
print("MODULES", " ".join(sorted(sys.modules)))
"""

# loaded by no command that neither signs, checks a signature, transfers nor uses a cloud remote
_HEAVY = ("cryptography", "nacl", "asyncio", "fsspec", "s3fs", "botocore", "boto3", "aiobotocore", "ssl")


def _run(cwd: Path, *args: str) -> tuple[str, set[str]]:
    r = subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=cwd, capture_output=True, text=True,
                       timeout=120, check=False)
    out, _, mods = r.stdout.rpartition("\nMODULES ")
    assert out.rstrip().endswith("EXIT 0"), r.stdout[-2000:] + r.stderr[-2000:]
    return out, set(mods.split())


def _loaded(mods: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(m for m in mods if m.split(".")[0] in roots or m in roots)


@pytest.fixture
def pinned(repo: Path, casstore) -> Path:  # type: ignore[no-untyped-def]
    """A repository with two pinned cassettes, a local store, and a commit."""
    for name in ("suite/a", "suite/b"):
        write_cassette(repo, name)
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "pins", cwd=repo)
    return repo


@pytest.mark.parametrize("args", [("status",), ("status", "--offline"), ("ls",), ("status", "--json")])
def test_status_and_ls_load_no_signing_transfer_or_cloud_code(pinned: Path, args: tuple[str, ...]) -> None:
    out, mods = _run(pinned, *args)
    assert "suite/a" in out and "suite/b" in out
    assert _loaded(mods, _HEAVY) == []
    assert not {"casstore.ops.sync", "casstore.store.transfer", "casstore.model.redaction", "dulwich"} & mods
    # a local remote opens no fsspec backend module (its retry policy, the S3 client)
    assert not {"casstore.store.fsspec_store", "casstore.store.retry", "casstore.store.s3"} & mods


def test_the_pre_commit_check_loads_no_transfer_or_cloud_code(pinned: Path) -> None:
    write_cassette(pinned, "suite/a", n=3)
    git("add", "-A", cwd=pinned)
    out, mods = _run(pinned, "check", "--staged")
    assert "checked 1 staged file(s)" in out
    assert _loaded(mods, _HEAVY) == []
    assert not {"casstore.ops.sync", "casstore.store.transfer", "casstore.ops.add"} & mods
    # the index and the staged objects come from git's own commands; no history is read
    assert _loaded(mods, ("dulwich",)) == []
    assert not {"casstore.git.history", "casstore.git.base", "casstore.git.trust"} & mods


def test_a_commit_without_cassettes_parses_nothing(pinned: Path) -> None:
    # the hook runs on every commit; most stage no cassette: no file parsed, so no orjson
    (pinned / "README.md").write_text("notes\n")
    git("add", "README.md", cwd=pinned)
    out, mods = _run(pinned, "check", "--staged")
    assert "checked 0 staged file(s)" in out
    assert "orjson" not in mods


def test_verify_loads_the_signature_code_it_needs(pinned: Path) -> None:
    # the counterpart of the tests above: the probe sees what a command really imports
    out, mods = _run(pinned, "verify")
    assert "verified 2/2" in out
    assert "nacl.bindings" in mods  # signatures are checked with libsodium (PyNaCl)
    assert _loaded(mods, ("cryptography", "fsspec", "s3fs", "botocore", "asyncio")) == []
    # what only `verify --remote` needs
    assert not {"casstore.store.fsck", "casstore.store.transfer", "casstore.ops.repair"} & mods


def test_import_casstore_loads_neither_the_cli_nor_a_backend() -> None:
    r = subprocess.run([sys.executable, "-c", "import sys, casstore; print(' '.join(sorted(sys.modules)))"],
                       capture_output=True, text=True, timeout=60, check=True)
    mods = set(r.stdout.split())
    assert "casstore" in mods
    assert _loaded(mods, (*_HEAVY, "click", "zstandard", "dulwich", "httpx")) == []


def test_a_pull_with_nothing_to_fetch_does_not_load_the_s3_backend(
        pinned: Path, casstore, s3_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CASSTORE_REMOTE", s3_url)
    assert casstore("push", cwd=pinned).exit_code == 0
    out, mods = _run(pinned, "pull")  # the cache holds both objects
    assert "0 cassette(s)" in out and "2 already there" in out
    assert _loaded(mods, ("fsspec", "s3fs", "botocore", "aiobotocore", "aiohttp")) == []
    # the counterpart: with an empty cache the same command reads S3 through obstore and
    # fetches both; s3fs and its async botocore stack are not what casstore uses
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(tmp_path / "empty-cache"))
    out, mods = _run(pinned, "pull")
    assert "fetched 2 cassette(s)" in out
    assert "obstore" in mods
    assert _loaded(mods, ("s3fs", "aiobotocore", "aiohttp")) == []


def test_python_dash_m_casstore_is_the_casstore_command(tmp_path: Path) -> None:
    """`python -m casstore` (no scripts folder on PATH) runs the same command line."""
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "casstore", *args], cwd=tmp_path, capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})

    from casstore import __version__

    assert run("--version").stdout.strip() == f"casstore, version {__version__}"
    helped = run("--help")
    assert helped.returncode == 0 and "verify" in helped.stdout and "pull" in helped.stdout, helped
    outside = run("status")  # no project here: the CLI's own one-line refusal, exit 2
    assert outside.returncode == 2 and outside.stderr.startswith("error: no casstore project"), outside.stderr
    assert "Traceback" not in outside.stderr
