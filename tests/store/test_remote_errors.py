"""A remote that cannot be used is the user's configuration, not a failed transfer.

A bucket that does not exist, a malformed URL (``s3//bucket``), no credentials: every
command that touches the remote says so in one line naming the remote (credentials masked)
and the cause, and exits 2. Before, ``pull`` blamed the cassettes ("missing … was it
pushed?") and ``ls --remote`` printed nothing and exited 0.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.cassettes import write_cassette
from tests.helpers.commands import git, run_casstore_subprocess
from tests.helpers.s3 import fake_aws_env

# every command that touches the remote; pull only does so for what the cache lacks
REMOTE_COMMANDS = [
    ["push"],
    ["pull"],
    ["pull", "--frozen"],
    ["ls", "--remote"],
    ["verify", "--remote"],
    ["status"],
    ["gc", "--remote", "--dry-run"],
]
EMPTY_CACHE = {"pull"}


def _run(casstore, argv: list[str], root: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    with monkeypatch.context() as m:
        if argv[0] in EMPTY_CACHE:
            m.setenv("CASSTORE_CACHE_DIR", str(root.parent / "empty-cache"))
        return casstore(*argv, cwd=root)


def _project(root: Path, casstore, remote: str) -> Path:  # type: ignore[no-untyped-def]
    """A committed project with two pins in its cache, whose casstore.toml names ``remote``."""
    root.mkdir()
    git("init", "-q", cwd=root)
    assert casstore("init", cwd=root).exit_code == 0
    for n in ("alpha", "beta"):
        write_cassette(root, n)
    assert casstore("add", "tests/cassettes", cwd=root).exit_code == 0
    cfg = root / "casstore.toml"
    text = cfg.read_text(encoding="utf-8")
    lines = [f'url = "{remote}"' if line.startswith("url =") else line for line in text.splitlines()]
    assert lines != text.splitlines(), text
    cfg.write_text("\n".join(lines) + "\n", encoding="utf-8")
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "pins", cwd=root)
    return root


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: remote "), stderr
    return lines[0]


@pytest.mark.parametrize("argv", REMOTE_COMMANDS, ids=" ".join)
def test_a_bucket_that_does_not_exist(argv: list[str], tmp_path: Path, casstore, s3_url: str,
                                      monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    remote = "s3://no-such-bucket-h13/cassettes"
    root = _project(tmp_path / "p", casstore, remote)
    r = _run(casstore, argv, root, monkeypatch)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    line = _one_line(r.stderr)
    assert remote in line and "bucket 'no-such-bucket-h13' does not exist" in line
    assert "pinned but not pushed" not in r.stderr


def test_the_pre_push_hook_names_the_missing_bucket(tmp_path: Path, casstore, s3_url: str) -> None:  # type: ignore[no-untyped-def]
    root = _project(tmp_path / "p", casstore, "s3://no-such-bucket-h13/cassettes")
    head = git("rev-parse", "HEAD", cwd=root).stdout.strip()
    r = casstore("hooks", "pre-push", "origin", "unused", cwd=root,
                 input=f"refs/heads/main {head} refs/heads/main {'0' * 40}\n")
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert "bucket 'no-such-bucket-h13' does not exist" in _one_line(r.stderr)


@pytest.mark.parametrize("url,hint", [
    ("s3//my-bucket/cassettes", "did you mean s3://my-bucket/cassettes?"),
    ("s3:/my-bucket/cassettes", "did you mean s3://my-bucket/cassettes?"),
    ("s3://", "no bucket"),
    ("s4://my-bucket/cassettes", "unknown protocol 's4'"),
])
def test_a_malformed_url_is_refused_by_init_and_by_every_remote_command(
        url: str, hint: str, tmp_path: Path, casstore, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git("init", "-q", cwd=fresh)
    r = casstore("init", "--remote", url, cwd=fresh)
    assert r.exit_code == 2 and hint in _one_line(r.stderr), r.stderr
    assert not (fresh / "casstore.toml").exists()

    root = _project(tmp_path / "p", casstore, url)
    for argv in REMOTE_COMMANDS:
        r = _run(casstore, argv, root, monkeypatch)
        assert r.exit_code == 2, (argv, r.stdout, r.stderr)
        assert hint in _one_line(r.stderr), (argv, r.stderr)
    assert not (root / "s3").exists() and not (root / "s3:").exists(), "a typo became a local folder"


def test_credentials_in_the_url_are_masked(tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    secret = "pw-" + "z" * 20
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git("init", "-q", cwd=fresh)
    r = casstore("init", "--remote", f"s4://bob:{secret}@host/cassettes", cwd=fresh)
    assert r.exit_code == 2
    line = _one_line(r.stderr)
    assert secret not in r.stderr and "s4://***@host/cassettes" in line, line


def test_no_credentials(tmp_path: Path, casstore, s3_url: str) -> None:  # type: ignore[no-untyped-def]
    root = _project(tmp_path / "p", casstore, s3_url)
    assert casstore("push", cwd=root).exit_code == 0  # the bucket exists and takes objects
    env = {k: v for k, v in os.environ.items() if k not in fake_aws_env() and not k.startswith("AWS_")}
    env.update({
        "AWS_ENDPOINT_URL": os.environ["AWS_ENDPOINT_URL"],
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",  # never ask an instance-metadata address
    })
    for argv in REMOTE_COMMANDS:
        # pull must find the cache empty to go to the store; push needs the pinned objects
        cache = tmp_path / "empty-cache" if argv[0] in EMPTY_CACHE else Path(os.environ["CASSTORE_CACHE_DIR"])
        res = run_casstore_subprocess(*argv, cwd=root, env={**env, "CASSTORE_CACHE_DIR": str(cache)})
        assert res.returncode == 2, (argv, res.stdout, res.stderr)
        line = _one_line(res.stderr)
        assert s3_url in line and "no credentials found" in line and "AWS_PROFILE" in line, line


def test_objects_missing_from_a_bucket_that_exists_are_still_exit_1(
        tmp_path: Path, casstore, s3_url: str, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    # never pushed: the remote is fine, the store simply lacks the objects
    root = _project(tmp_path / "p", casstore, s3_url)
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(tmp_path / "empty-cache"))
    r = casstore("pull", cwd=root)
    assert r.exit_code == 1, (r.stdout, r.stderr)
    assert "pinned but not pushed" in r.stderr and "error: remote" not in r.stderr


def test_the_protocols_accepted_without_importing_fsspec_are_fsspecs_own() -> None:
    from fsspec.registry import known_implementations

    from casstore.store.remote import FSSPEC_KNOWN

    assert FSSPEC_KNOWN <= set(known_implementations)


def _fresh(tmp_path: Path, name: str = "fresh") -> Path:
    root = tmp_path / name
    root.mkdir()
    git("init", "-q", cwd=root)
    return root


def test_init_refuses_a_remote_that_reads_like_a_bucket_without_a_scheme(tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    root = _fresh(tmp_path)
    r = casstore("init", "--remote", "my-bucket/cassettes", cwd=root)
    assert r.exit_code == 2 and "s3://my-bucket/cassettes" in r.stderr and "./my-bucket/cassettes" in r.stderr
    assert not (root / "casstore.toml").exists() and not (root / "my-bucket").exists()
    # a folder said as one stays a folder (an absolute path and ./relative alike)
    assert casstore("init", "--remote", "./shared/store", cwd=root).exit_code == 0
    assert casstore("init", "--remote", str(tmp_path / "abs"), cwd=_fresh(tmp_path, "other")).exit_code == 0


def test_init_probes_the_bucket_and_the_credentials_before_writing(
        tmp_path: Path, casstore, s3_url: str, s3_server) -> None:  # type: ignore[no-untyped-def]
    missing = f"s3://no-such-bucket-{os.getpid()}/cassettes"
    root = _fresh(tmp_path)
    r = casstore("init", "--remote", missing, cwd=root)
    assert r.exit_code == 2 and "does not exist" in r.stderr and "--no-check" in r.stderr, r.stderr
    assert not (root / "casstore.toml").exists()
    assert casstore("init", "--remote", missing, "--no-check", cwd=root).exit_code == 0  # skips the probe
    # the bucket exists: accepted; and a rerun of the same command changes nothing
    good = _fresh(tmp_path, "good")
    assert casstore("init", "--remote", s3_url, cwd=good).exit_code == 0
    before = (good / "casstore.toml").read_bytes()
    again = casstore("init", "--remote", s3_url, cwd=good)
    assert again.exit_code == 0 and (good / "casstore.toml").read_bytes() == before, again.stderr
    other = casstore("init", "--remote", missing, cwd=good)
    assert other.exit_code == 2 and "[remote] url" in other.stderr and "casstore push" in other.stderr
    assert (good / "casstore.toml").read_bytes() == before
    # no credentials: refused at init, in one line naming the remote
    env = {k: v for k, v in os.environ.items() if k not in fake_aws_env() and not k.startswith("AWS_")}
    env.update({"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_CONFIG_FILE": str(tmp_path / "none")})
    nocreds = _fresh(tmp_path, "nocreds")
    res = run_casstore_subprocess("init", "--remote", s3_url, cwd=nocreds, env=env)
    assert res.returncode == 2 and "no credentials found" in res.stderr, res.stderr
    assert not (nocreds / "casstore.toml").exists()


def test_init_refuses_a_protocol_whose_backend_is_not_installed(tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("fsspec")
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("gcsfs is installed here")
    root = _fresh(tmp_path)
    r = casstore("init", "--remote", "gs://my-bucket/cassettes", cwd=root)
    assert r.exit_code == 2 and "gcsfs" in r.stderr and "no fsspec backend for gs://" in r.stderr, r.stderr
    assert not (root / "casstore.toml").exists()


def test_pull_with_nothing_to_fetch_still_refuses_a_missing_bucket(tmp_path: Path, casstore, s3_url: str) -> None:  # type: ignore[no-untyped-def]
    missing = f"s3://no-such-bucket-{os.getpid()}/cassettes"
    root = _fresh(tmp_path)
    assert casstore("init", "--remote", missing, "--no-check", cwd=root).exit_code == 0
    r = casstore("pull", cwd=root)  # nothing pinned: it said "fetched 0 cassette(s)", exit 0
    assert r.exit_code == 2 and "does not exist" in _one_line(r.stderr), (r.stdout, r.stderr)
    good = _project(tmp_path / "p", casstore, s3_url)
    assert casstore("push", cwd=good).exit_code == 0
    again = casstore("pull", cwd=good)  # everything cached, the bucket is there: fine
    assert again.exit_code == 0 and "fetched 0 cassette(s)" in again.stdout, again.stderr


def test_check_without_credentials_says_so_once_not_once_per_pin(tmp_path: Path, casstore, s3_url: str) -> None:  # type: ignore[no-untyped-def]
    root = _project(tmp_path / "p", casstore, s3_url)
    for n in ("gamma", "delta", "epsilon"):
        write_cassette(root, n)
    assert casstore("add", "tests/cassettes", cwd=root).exit_code == 0
    assert casstore("push", cwd=root).exit_code == 0
    for f in (root / "tests" / "cassettes").iterdir():
        f.unlink()  # only the pins are left to scan, from the store
    env = {k: v for k, v in os.environ.items() if k not in fake_aws_env() and not k.startswith("AWS_")}
    env.update({"AWS_ENDPOINT_URL": os.environ["AWS_ENDPOINT_URL"], "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_CONFIG_FILE": str(tmp_path / "none"),
                "CASSTORE_CACHE_DIR": str(tmp_path / "empty-cache")})
    res = run_casstore_subprocess("check", cwd=root, env=env)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert out.count("no credentials found") == 1 and "not scanned" in out, out  # once, for all 5 pins
