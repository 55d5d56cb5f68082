import pytest

from casstore.config import Config, load_config
from casstore.errors import ConfigError


def test_defaults_without_config(tmp_path):
    cfg = load_config(tmp_path)
    assert cfg.cassette_dir == "tests/cassettes" and cfg.remote_url is None


def test_casstore_toml(tmp_path):
    (tmp_path / "casstore.toml").write_text(
        'cassette_dir = "cas"\nmode = "replay"\n[remote]\nurl = "s3://b/p"\noptions = {anon = false}\n'
    )
    cfg = load_config(tmp_path)
    assert (cfg.cassette_dir, cfg.mode, cfg.remote_url, cfg.remote_options) == ("cas", "replay", "s3://b/p", {"anon": False})


def test_pyproject_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname="x"\n[tool.casstore]\nremote = "gs://b/p"\n')
    assert load_config(tmp_path).remote_url == "gs://b/p"


def test_unknown_keys_are_named_together(tmp_path):
    (tmp_path / "casstore.toml").write_text('remtoe = "x"\n[hygiene]\nmax_age_dayz = 3\n')
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    assert "'remtoe'" in str(err.value) and "'max_age_dayz'" in str(err.value)


@pytest.mark.parametrize("body", ['mode = "sometimes"', "zstd_level = 99", 'cassette_dir = "../out"',
                                  "jobs = true", "[trust]\nrequire_signatures = 1", "remote = 3"])
def test_bad_values(body):
    from tests.helpers.toml import tomllib

    with pytest.raises(ConfigError):
        Config.from_dict(tomllib.loads(body))


def test_malformed_toml_is_a_config_error(tmp_path):
    (tmp_path / "casstore.toml").write_text("[remote\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path)


def test_the_file_init_writes_reads_back_and_tomllib_errors_are_config_errors(tmp_path) -> None:
    from casstore.ops.init import init

    init(tmp_path, None, identity="t@example.com")
    assert load_config(tmp_path).remote_url == ".casstore/store"
    (tmp_path / "casstore.toml").write_bytes(b"cassette_dir = 1\ncassette_dir = 2\n")  # tomllib's error, as before
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path)
    (tmp_path / "casstore.toml").write_bytes(b'cassette_dir = "\xff"\n')
    with pytest.raises(ConfigError, match="not valid UTF-8"):
        load_config(tmp_path)
