"""The S3 store through obstore, on moto's S3 server on 127.0.0.1: what it reads and lists,
where its credentials come from (options, boto3's chain, object_store's own without boto3),
the options it takes, and that ``casstore[s3]`` leaves botocore's version to boto3."""

from __future__ import annotations

import importlib.metadata
import os
import re
import sys
from pathlib import Path

import pytest

from casstore.errors import IntegrityError, NotFoundError, RemoteError
from casstore.store.fsspec_store import FsspecStore
from tests.helpers.cassettes import write_cassette
from tests.helpers.commands import git, run_casstore_subprocess
from tests.helpers.s3 import S3Server, fake_aws_env

REPO = Path(__file__).resolve().parents[2]
KEYS = {"objects/sha256/ab/" + "c" * 62: b"frame-one", "objects/sha256/cd/" + "e" * 62: b"x" * 3000,
        "packs/" + "1" * 64 + ".idx": b"{}", "signatures/sha256/ab/" + "c" * 62 + "/0123456789abcdef.sig": b"env",
        "odd/a b+c~d=é%2F.sig": b"a key to quote"}


@pytest.fixture
def filled(s3_url: str) -> str:
    store = FsspecStore(s3_url)
    for key, data in KEYS.items():
        store.write_once(key, data)
    store.write_once("objects/empty", b"")
    return s3_url


def test_listings_reads_and_ranges(filled: str, s3_server: S3Server) -> None:
    store = FsspecStore(filled)
    assert {i.key: i.size for i in store.list("")} == {**{k: len(v) for k, v in KEYS.items()}, "objects/empty": 0}
    assert {i.key for i in store.list("objects/sha256/ab/")} == {"objects/sha256/ab/" + "c" * 62}
    assert list(store.list("nothing/")) == []
    listed = {i.key: i for i in store.list("packs/")}
    assert listed["packs/" + "1" * 64 + ".idx"].etag and listed["packs/" + "1" * 64 + ".idx"].mtime
    for key, data in KEYS.items():
        assert store.read(key) == data
        assert store.read_range(key, 1, 4) == data[1:4]
        assert store.read_range(key, 1, 10_000) == data[1:]  # what there is
        assert store.read_bounded(key, len(data)) == data
    with pytest.raises(IntegrityError, match="larger than"):
        store.read_bounded("objects/sha256/cd/" + "e" * 62, 100)  # one ranged GET of limit + 1 bytes
    assert store.read_bounded("objects/empty", 100) == b""  # S3 refuses any range of an empty object


def test_a_listing_is_one_request_whatever_the_folders(filled: str, s3_server: S3Server) -> None:
    from tests.helpers.faultproxy import FaultPlan, FaultProxy

    proxy = FaultProxy(s3_server.endpoint, FaultPlan())
    proxy.start()
    try:
        store = FsspecStore(filled, {"endpoint_url": proxy.url})
        for prefix, n in (("", len(KEYS) + 1), ("objects/", 3), ("signatures/sha256/", 1)):
            seen = proxy.counters.seen
            assert len(list(store.list(prefix))) == n
            assert proxy.counters.seen - seen == 1, prefix  # fsspec's default walk: a LIST per folder
    finally:
        proxy.stop()


def test_missing_keys_and_buckets(s3_url: str) -> None:
    store = FsspecStore(s3_url)
    with pytest.raises(NotFoundError):
        store.read("objects/sha256/00/" + "0" * 62)
    with pytest.raises(NotFoundError):
        store.read_range("objects/sha256/00/" + "0" * 62, 0, 10)
    assert store.info("objects/sha256/00/" + "0" * 62) is None
    gone = FsspecStore(s3_url.replace(s3_url.split("/")[2], "no-such-bucket-s3obstore"))
    for call in (lambda: list(gone.list("objects/")), lambda: gone.read("objects/x"),
                 lambda: gone.info("objects/x")):
        with pytest.raises(RemoteError, match="does not exist"):
            call()


def test_s3fs_option_names_still_work_and_credentials_never_show(filled: str, s3_server: S3Server,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    secret = "wrong-" + "q" * 30
    store = FsspecStore(filled, {"key": "AKIA" + "Z" * 16, "secret": secret, "endpoint_url": s3_server.endpoint,
                                 "config_kwargs": {"connect_timeout": 2, "read_timeout": 5, "retries": {}},
                                 "client_kwargs": {"region_name": "us-east-1"}})
    assert store.read(next(iter(KEYS))) == KEYS[next(iter(KEYS))]
    with pytest.raises(NotFoundError) as err:
        store.read("objects/sha256/00/" + "0" * 62)
    assert secret not in str(err.value)
    native = FsspecStore(filled, {"endpoint": s3_server.endpoint, "region": "us-east-1",
                                  "client_options": {"allow_http": True}})  # obstore's own names
    assert native.read(next(iter(KEYS))) == KEYS[next(iter(KEYS))]


def test_an_option_the_client_does_not_know_is_one_line_exit_2(s3_url: str, tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    root = _project(tmp_path / "p", casstore, s3_url, '[remote.options]\nversion_aware = true\n')
    r = casstore("push", cwd=root)
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: remote ") and "version_aware" in lines[0], r.stderr


def _project(root: Path, casstore, url: str, extra: str = "") -> Path:  # type: ignore[no-untyped-def]
    root.mkdir()
    git("init", "-q", cwd=root)
    assert casstore("init", "--remote", url, cwd=root).exit_code == 0
    write_cassette(root, "alpha")
    assert casstore("add", "tests/cassettes", cwd=root).exit_code == 0
    if extra:
        cfg = root / "casstore.toml"
        cfg.write_text(cfg.read_text() + "\n" + extra)
    return root


def _bare_env(tmp_path: Path, cache: str, **extra: str) -> dict[str, str]:
    """The environment without AWS credentials, shared files or instance metadata, and with
    an empty cache named ``cache`` (a pull must read the store)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_CONFIG_FILE": str(tmp_path / "none"),
                "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": os.environ["AWS_ENDPOINT_URL"],
                "CASSTORE_CACHE_DIR": str(tmp_path / cache), **extra})
    return env


def test_an_aws_profile_is_read_through_boto3s_chain(s3_url: str, tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    root = _project(tmp_path / "p", casstore, s3_url)
    assert casstore("push", cwd=root).exit_code == 0
    creds = tmp_path / "credentials"
    fake = fake_aws_env()
    creds.write_text(f"[casstore-test]\naws_access_key_id = {fake['AWS_ACCESS_KEY_ID']}\n"
                     f"aws_secret_access_key = {fake['AWS_SECRET_ACCESS_KEY']}\nregion = us-east-1\n")
    env = _bare_env(tmp_path, "cache-1", AWS_SHARED_CREDENTIALS_FILE=str(creds), AWS_PROFILE="casstore-test")
    res = run_casstore_subprocess("pull", cwd=root, env=env)
    assert res.returncode == 0 and "fetched 1 cassette(s)" in res.stdout, res.stderr
    # the same process without the profile finds no credentials at all
    env = _bare_env(tmp_path, "cache-2", AWS_SHARED_CREDENTIALS_FILE=str(creds))
    res = run_casstore_subprocess("pull", cwd=root, env=env)
    assert res.returncode == 2 and "no credentials found" in res.stderr, res.stderr
    env["AWS_PROFILE"] = "no-such-profile"
    res = run_casstore_subprocess("pull", cwd=root, env=env)
    assert res.returncode == 2 and "no-such-profile" in res.stderr and len(res.stderr.splitlines()) == 1, res.stderr


# a casstore process in which boto3 cannot be imported (as where it is not installed)
_NO_BOTO3 = "import sys; sys.modules['boto3'] = None; from casstore.cli import main; sys.argv[0] = 'casstore'; main()"


def test_without_boto3_object_stores_own_chain_reads_the_environment(s3_url: str, tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    import subprocess

    root = _project(tmp_path / "p", casstore, s3_url)
    assert casstore("push", cwd=root).exit_code == 0

    def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", _NO_BOTO3, "pull"], cwd=root, env=env, capture_output=True,
                              text=True, timeout=120, check=False)

    res = run(_bare_env(tmp_path, "cache-1", **fake_aws_env()))
    assert res.returncode == 0 and "fetched 1 cassette(s)" in res.stdout, res.stderr
    res = run(_bare_env(tmp_path, "cache-2", AWS_PROFILE="casstore-test"))
    assert res.returncode == 2 and "pip install boto3" in res.stderr and len(res.stderr.splitlines()) == 1, res.stderr


def _closure(req: str, seen: set[str]) -> set[str]:
    """Every distribution ``req`` installs (its extras' markers ignored), by normalized name."""
    name = re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0].lower().replace("_", "-")
    if name in seen:
        return seen
    seen.add(name)
    for sub in importlib.metadata.requires(name) or []:
        if "extra ==" not in sub:
            _closure(sub, seen)
    return seen


def test_the_s3_extra_leaves_botocore_to_boto3() -> None:
    """Nothing ``casstore[s3]`` installs requires botocore, so any boto3 resolves beside it (in a
    fresh venv: ``pip install '.[s3]' boto3 && pip check``, docs/design.md)."""
    from tests.helpers.toml import tomllib

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["s3"]
    installed: set[str] = set()
    for req in extra:
        _closure(req, installed)
    assert "obstore" in installed
    assert not {"botocore", "aiobotocore", "boto3", "s3fs"} & installed, installed
