"""A secret in a cassette's name never reaches the lock, the store or a listing (issue #16).

The pytest plugin names a cassette after the test id, so a test parametrized with a key
(``test_key[sk-proj-…]``) made ``test_key-sk-proj-….json``: the name went into the lock,
the object's ``name``, the file name and ``ls``. Now the name carries a placeholder and a
short hash of the key (two keys stay two cassettes), and ``add`` / ``check`` refuse a
name that holds a credential in one masked line. Real pytest processes, the loopback
stub and the real CLI; fake keys built at run time.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.helpers.cassettes import make_cassette
from tests.helpers.commands import git
from tests.helpers.fakes import openai_key
from tests.helpers.llm_server import LLMServer
from tests.replay.test_replay_plugin import _pytest

PARAM_TEST = textwrap.dedent(
    """
    import os

    import pytest
    import requests

    KEYS = os.environ["FAKE_KEYS"].split(",")

    @pytest.mark.casstore
    @pytest.mark.parametrize("key", KEYS)
    def test_key(key):
        r = requests.get(os.environ["STUB_URL"] + "/echo", headers={"x-api-key": key}, timeout=10)
        assert r.status_code == 200
    """
)


def _everything(root: Path) -> str:
    """Every path and every file's text under the project (the store and the lock included)."""
    out = []
    for p in sorted(root.rglob("*")):
        if ".git" in p.parts:
            continue
        out.append(str(p.relative_to(root)))
        if p.is_file():
            out.append(p.read_bytes().decode("latin-1"))
    return "\n".join(out)


def test_a_key_in_a_test_id_never_names_a_cassette(tmp_path: Path, casstore, llm_server: LLMServer,  # type: ignore[no-untyped-def]
                                                    replay_env: None, isolated_user: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    git("init", "-q", cwd=root)
    assert casstore("init", cwd=root).exit_code == 0
    (root / "test_param.py").write_text(PARAM_TEST)
    keys = [openai_key(), openai_key()]
    env = {"STUB_URL": llm_server.url, "FAKE_KEYS": ",".join(keys)}

    run = _pytest(root, "test_param.py", env=env)
    assert "2 passed" in run.stdout, run.stdout + run.stderr
    assert all(k in repr(llm_server.seen) for k in keys), "the keys did not reach the stub"
    cassettes = sorted(p.relative_to(root / "tests" / "cassettes").as_posix()
                       for p in (root / "tests" / "cassettes").rglob("*.json"))
    assert len(cassettes) == 2, cassettes  # two keys, two cassettes
    assert all(c.startswith("test_param/test_key-redacted-openai-key-") for c in cassettes), cassettes

    r = casstore("add", "tests/cassettes", cwd=root)
    assert r.exit_code == 0, r.stdout + r.stderr
    listing = casstore("ls", "--json", cwd=root)
    assert listing.exit_code == 0 and "redacted-openai-key" in listing.stdout
    seen = llm_server.count
    again = _pytest(root, "test_param.py", "--casstore-mode=replay", env={**env, "CASSTORE_OFFLINE": "1"})
    assert "2 passed" in again.stdout, again.stdout + again.stderr
    assert llm_server.count == seen  # the same names are derived again, and replayed
    found = [k[:12] for k in keys for text in (_everything(root), _everything(isolated_user), listing.stdout,
                                               run.stdout, again.stdout) if k in text or k[8:40] in text]
    assert not found, found


def test_add_and_check_refuse_a_name_holding_a_key(tmp_path: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    """A name made by hand (or by an older plugin): one masked line, nothing pinned."""
    root = tmp_path / "proj"
    root.mkdir()
    git("init", "-q", cwd=root)
    assert casstore("init", cwd=root).exit_code == 0
    key = openai_key()
    name = f"test_param/test_key-{key}"
    path = root / "tests" / "cassettes" / f"{name}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(make_cassette(name)))

    r = casstore("add", str(path), cwd=root)
    out = r.stdout + r.stderr
    assert r.exit_code == 1
    assert "secret (openai-key) in the cassette name: sk-p…" in out and "nothing pinned" in out
    lines = [ln for ln in out.splitlines() if "in the cassette name" in ln]
    assert len(lines) == 1 and lines[0].startswith("error: tests/cassettes/test_param/test_key-sk-p…"), out
    lock = root / "casstore.lock"
    assert not lock.exists() or "test_key" not in lock.read_text()

    r = casstore("check", str(path), cwd=root)
    assert r.exit_code == 1 and "secret (openai-key) in the cassette name" in r.stdout + r.stderr
    out += r.stdout + r.stderr
    assert key not in out and key[8:40] not in out


def test_adds_one_pass_over_document_and_name_finds_what_check_finds(repo) -> None:  # type: ignore[no-untyped-def]
    """add's scanner proves a cassette clean in one pass over the document and the name's
    texts; wherever a key sits in the name (after "/", "-", "_", ".", at the start) or the
    document, it reports exactly what check's secret_findings reports."""
    from casstore.ops.findings import SecretScanner, secret_findings
    from casstore.project import Project
    from tests.helpers.fakes import aws_key

    scanner = SecretScanner(Project.discover(repo))
    key, aws = openai_key(), aws_key()
    names = ["clean/name", "a/b-c_d.e", f"{key}", f"x/{key}", f"x-{key}", f"x_{key}", f"x.{key}", f"t/{aws}-z",
             f"a/b/{key}/c"]
    leaky = make_cassette("n")
    leaky["entries"][0]["request"]["headers"]["x-api-key"] = key
    for name in names:
        for doc, leaks in ((make_cassette("n"), False), (leaky, True)):
            doc = {**doc, "name": name}
            got = [f.line() for f in scanner(lambda: "f.json", doc, name)]
            want = [f.line() for f in secret_findings(scanner.rules, "f.json", doc, name)]
            assert got == want, name
            assert bool(got) == (leaks or name not in ("clean/name", "a/b-c_d.e")), name
