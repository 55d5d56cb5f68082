import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    import tomllib

    with pytest.raises(ConfigError):
        Config.from_dict(tomllib.loads(body))


def test_malformed_toml_is_a_config_error(tmp_path):
    (tmp_path / "casstore.toml").write_text("[remote\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path)


# -- the scan of simple files (config.scan_toml) against tomllib --------------------------
_LINES = ['cassette_dir = "tests/cassettes"', "[remote]", 'url = ".casstore/store"', "[trust]",
          "require_signatures = true", "enabled = false", "max_age_days = 90", "jobs = 0", "[hygiene]",
          "# casstore configuration", "", "  ", "\t", 'url="s3://b/p"  # shared', "x = 1#c", "[ remote ]",
          "  [trust]  # t", 'name = "tab\there"', 'name = "é ü 漢"', 'name = ""', "name = 007", "name = -1",
          "name = +1", "name = 1_000", "name = 1.5", "name = True", 'name = "a\\"b"', "name = 'lit'",
          "remote.url = 'x'", "[remote.options]", "options = { anon = true }", "paths = [\"a\"]", "[[x]]",
          'name = "a" "b"', "= 1", "[]", "name =", 'name = "\x01"', "# bad \x01 comment", "x = 99999999999999999999",
          "a-b_C9 = 1", '"quoted" = 1', "name = 1 2", "[remote] x = 1", "x = true # ok", "x = truee"]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_LINES), max_size=8), st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_what_the_scan_reads_tomllib_reads_the_same(lines: list[str], newline: str, trailing: bool) -> None:
    import tomllib

    from casstore.config import scan_toml

    text = newline.join(lines) + (newline if trailing else "")
    scanned = scan_toml(text.encode())
    if scanned is None:
        return  # tomllib reads it, as it always did
    assert scanned == tomllib.loads(text)
    assert [type(v) for v in scanned.values()] == [type(v) for v in tomllib.loads(text).values()]


def test_the_file_init_writes_is_scanned_and_the_rest_goes_to_tomllib(tmp_path) -> None:
    from casstore.config import scan_toml
    from casstore.ops.init import init

    init(tmp_path, None, identity="t@example.com")
    text = (tmp_path / "casstore.toml").read_bytes()
    assert scan_toml(text) is not None and load_config(tmp_path).remote_url == ".casstore/store"
    for other in (b'a = "x"\r\n', b"a = [1]\n", b"a = 1\na = 2\n", b"[t]\n[t]\n", b"a = 1\n[a]\n", b"\xff = 1\n"):
        assert scan_toml(other) is None
    (tmp_path / "casstore.toml").write_bytes(b"cassette_dir = 1\ncassette_dir = 2\n")  # tomllib's error, as before
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path)
    (tmp_path / "casstore.toml").write_bytes(b'cassette_dir = "\xff"\n')
    with pytest.raises(ConfigError, match="not valid UTF-8"):
        load_config(tmp_path)
