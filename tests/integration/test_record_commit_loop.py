"""The record -> commit loop, in real git repositories with casstore's real hooks.

A local pytest run that recorded pins what it recorded when it ends (signed with the
user's key), so `git commit` (the pre-commit hook) and `git push` (the pre-push hook
uploads the objects) are all that is left; a fresh clone in CI replays offline. The
pre-commit hook refuses a commit whose staged tests use a recording that is not pinned, or
that differs from its pin. A refused recording (a secret) is not pinned and fails the run.
Pytest runs as a user runs it (a subprocess, casstore's plugin), against a stub provider on
127.0.0.1 whose request count proves what reached it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.commands import REPO
from tests.helpers.llm_server import LLMServer

TEST_AGENT = '''
import os

import requests

import casstore


@casstore.use("agent_case")
def test_agent():
    r = requests.post(os.environ["STUB_URL"] + "/v1/chat/completions", timeout=5,
                      json={"model": "gpt-test", "messages": [{"role": "user", "content": os.environ.get("PROMPT", "hi")}]})
    assert r.status_code == 200
'''

# a second test whose recording carries a secret once written (as a hand edit or a buggy
# writer would leave it): the recorder's own redaction never lets one through
TEST_LEAKY = '''
import hashlib
import json
from pathlib import Path

import casstore


def test_leaky():
    with casstore.use("leaky"):
        casstore.tool("lookup", lambda order_id: "ok")(order_id=7)
    path = Path("tests/cassettes/leaky.json")
    data = json.loads(path.read_text())
    data["entries"][0]["response"]["result"] = "sk-" + "fakeT3st" + hashlib.sha256(b"leak").hexdigest()[:32]
    path.write_text(json.dumps(data))
'''

TRACKED = ["casstore.toml", "casstore.lock", ".casstore/trusted_keys", ".gitignore", ".gitattributes"]


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=240, check=False)


def pytest_run(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """pytest as a user runs it, with casstore's plugin (only it: faster than every entry point)."""
    return run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "casstore.replay.pytest_plugin",
                *args], cwd, {**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})


def git(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run(["git", *args], cwd, env)


def casstore_cli(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "casstore.cli", *args], cwd, env)


@pytest.fixture
def dev(tmp_path: Path, llm_server: LLMServer, replay_env: None) -> dict[str, Any]:
    """A developer's clone of ``origin`` (a bare repository) after `casstore init` with a
    shared folder store and `casstore hooks install`; the environment every command gets."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "CASSTORE_MODE"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)  # hooks too
    env["STUB_URL"] = llm_server.url
    origin, root = tmp_path / "origin.git", tmp_path / "dev"
    assert git(tmp_path, env, "init", "-q", "--bare", str(origin)).returncode == 0
    assert git(tmp_path, env, "clone", "-q", str(origin), str(root)).returncode == 0
    for args in (("init", "--remote", str(tmp_path / "store")), ("hooks", "install")):
        r = casstore_cli(root, env, *args)
        assert r.returncode == 0, r.stderr
    (root / "tests").mkdir(exist_ok=True)
    (root / "tests" / "test_agent.py").write_text(TEST_AGENT)
    return {"root": root, "env": env, "origin": origin, "tmp": tmp_path}


def stage_and_commit(root: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    present = [p for p in TRACKED if (root / p).exists()]
    assert git(root, env, "add", "--", *present, *extra).returncode == 0
    return git(root, env, "commit", "-q", "-m", "change")


def lock_names(root: Path) -> list[str]:
    text = (root / "casstore.lock").read_text() if (root / "casstore.lock").exists() else ""
    return [line.split('"')[1] for line in text.splitlines() if line.startswith("[cassettes.")]


def test_record_then_git_commit_and_push_then_ci_replays_offline(dev: dict[str, Any], llm_server: LLMServer) -> None:
    root, env = dev["root"], dev["env"]
    r = pytest_run(root, env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert llm_server.count == 1
    assert "casstore: pinned 1 recorded cassette(s) in casstore.lock (signed by tester@example.com): agent_case; " \
           "`git commit` and the pre-push hook do the rest" in r.stdout, r.stdout
    assert lock_names(root) == ["agent_case"]
    # no other command: the pre-commit hook passes, the pre-push hook uploads
    c = stage_and_commit(root, env, "tests/test_agent.py")
    assert c.returncode == 0, c.stdout + c.stderr
    p = git(root, env, "push", "-q", "origin", "HEAD")
    assert p.returncode == 0, p.stdout + p.stderr
    assert list((dev["tmp"] / "store" / "objects").rglob("*")), "the pre-push hook uploaded nothing"

    # CI: a fresh clone, an empty cache, no signing key, offline
    ci = dev["tmp"] / "ci"
    assert git(dev["tmp"], env, "clone", "-q", str(dev["origin"]), str(ci)).returncode == 0
    ci_env = {**env, "CI": "true", "CASSTORE_OFFLINE": "1", "CASSTORE_CACHE_DIR": str(dev["tmp"] / "ci-cache"),
              "CASSTORE_CONFIG_DIR": str(dev["tmp"] / "ci-config")}
    before = llm_server.count
    r = pytest_run(ci, ci_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout
    assert llm_server.count == before, "CI reached the provider"
    assert "casstore: pinned" not in r.stdout
    assert not (ci / "tests" / "cassettes").exists(), "CI wrote a working copy"


def test_the_pre_commit_hook_refuses_a_recording_that_is_not_pinned_or_differs(
        dev: dict[str, Any], llm_server: LLMServer) -> None:
    root, env = dev["root"], dev["env"]
    r = pytest_run(root, {**env, "CASSTORE_PIN": "0"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "casstore: pinned" not in r.stdout
    # a commit that stages no test file is not held up by working copies
    c = stage_and_commit(root, env)
    assert c.returncode == 0, c.stdout + c.stderr
    head = git(root, env, "rev-parse", "HEAD").stdout
    c = stage_and_commit(root, env, "tests/test_agent.py")
    assert c.returncode != 0, "the hook let an unpinned recording through"
    out = c.stdout + c.stderr
    assert "tests/cassettes/agent_case.json: recorded but not pinned: run " \
           "`casstore add tests/cassettes/agent_case.json`, then `git add casstore.lock`" in out, out
    assert "tests/test_agent.py" in out
    assert git(root, env, "rev-parse", "HEAD").stdout == head, "something was committed"
    # the command it names is the fix
    assert casstore_cli(root, env, "add", "tests/cassettes/agent_case.json").returncode == 0
    c = stage_and_commit(root, env, "tests/test_agent.py")
    assert c.returncode == 0, c.stdout + c.stderr

    # re-recorded with another prompt and not pinned: the working copy differs from its pin
    (root / "tests" / "test_agent.py").write_text(TEST_AGENT + "\n# the prompt changed\n")
    r = pytest_run(root, {**env, "PROMPT": "changed", "CASSTORE_MODE": "record"}, "--casstore-no-pin")
    assert r.returncode == 0, r.stdout + r.stderr
    c = stage_and_commit(root, env, "tests/test_agent.py")
    out = c.stdout + c.stderr
    assert c.returncode != 0 and "tests/cassettes/agent_case.json: differs from its pin in casstore.lock: run " \
           "`casstore add tests/cassettes/agent_case.json`" in out, out
    # pinned in the work tree but casstore.lock left unstaged: the commit would still lack it
    assert casstore_cli(root, env, "add", "tests/cassettes/agent_case.json").returncode == 0
    assert git(root, env, "add", "tests/test_agent.py").returncode == 0
    c = git(root, env, "commit", "-q", "-m", "prompt changed")
    out = c.stdout + c.stderr
    assert c.returncode != 0 and "pinned in casstore.lock, which is not staged: run `git add casstore.lock`" in out, out
    assert stage_and_commit(root, env).returncode == 0


def test_pinning_at_the_end_can_be_turned_off(dev: dict[str, Any]) -> None:
    root, env = dev["root"], dev["env"]
    cfg = root / "casstore.toml"
    config = cfg.read_text()
    for args, extra, toml in ((["--casstore-no-pin"], {}, ""), ([], {"CASSTORE_PIN": "0"}, ""),
                              ([], {}, "\n[replay]\npin = false\n")):
        cfg.write_text(config + toml)
        r = pytest_run(root, {**env, **extra, "CASSTORE_MODE": "record"}, *args)
        assert r.returncode == 0, r.stdout + r.stderr
        assert (root / "tests" / "cassettes" / "agent_case.json").is_file()
        assert "casstore: pinned" not in r.stdout and lock_names(root) == [], (args, extra, toml)
    # CASSTORE_PIN=1 beats the config
    r = pytest_run(root, {**env, "CASSTORE_PIN": "1", "CASSTORE_MODE": "record"})
    assert "casstore: pinned 1" in r.stdout and lock_names(root) == ["agent_case"], r.stdout
    # a value that is not a boolean is refused, by every command
    cfg.write_text(config + "\n[replay]\npin = \"no\"\n")
    r = casstore_cli(root, env, "status")
    assert r.returncode == 2 and "'replay.pin' must be true or false" in r.stderr, r.stderr


def test_a_run_that_records_nothing_loads_no_store_to_pin(dev: dict[str, Any]) -> None:
    """The end-of-run pin costs a run that records nothing no more than a look at the cassettes'
    folder: the project's store, keys and lock are loaded only once something was recorded."""
    root, env = dev["root"], dev["env"]
    (root / "tests" / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    (root / "tests" / "conftest.py").write_text(
        "import sys\n\ndef pytest_unconfigure(config):\n"
        "    print('LOADED', sorted(m for m in ('casstore.project', 'casstore.store') if m in sys.modules))\n")
    r = pytest_run(root, env, "-s", "tests/test_plain.py")
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr
    assert "LOADED []" in r.stdout, r.stdout
    # the same run recording a cassette still pins it
    r = pytest_run(root, {**env, "CASSTORE_MODE": "record"}, "-s", "tests")
    assert r.returncode == 0 and "casstore: pinned 1" in r.stdout, r.stdout + r.stderr
    assert lock_names(root) == ["agent_case"]


def test_ci_records_with_the_lift_but_never_pins(dev: dict[str, Any], llm_server: LLMServer) -> None:
    root, env = dev["root"], dev["env"]
    r = pytest_run(root, {**env, "CI": "true", "CASSTORE_ALLOW_RECORD": "1", "CASSTORE_MODE": "auto"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert llm_server.count == 1 and (root / "tests" / "cassettes" / "agent_case.json").is_file()
    assert "casstore: pinned" not in r.stdout and lock_names(root) == []


def test_a_secret_in_a_recording_fails_the_run_and_pins_nothing_of_it(dev: dict[str, Any]) -> None:
    root, env = dev["root"], dev["env"]
    (root / "tests" / "test_leaky.py").write_text(TEST_LEAKY)
    r = pytest_run(root, env, "-p", "xdist.plugin", "-n", "2")  # the controller pins what the workers wrote
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "2 passed" in r.stdout
    secret = "sk-" + "fakeT3st" + hashlib.sha256(b"leak").hexdigest()[:32]
    assert secret not in out, "the secret was printed"
    refusal = [ln for ln in r.stdout.splitlines() if ln.startswith("casstore: not pinned: tests/cassettes/leaky.json")]
    assert refusal and "leaky.json: tests/" not in refusal[0], out
    assert "$.entries[0].response.result" in out and "openai" in out.lower(), out  # the field and the rule
    # the clean recording is pinned, the leaky one is not
    assert "casstore: pinned 1 recorded cassette(s)" in r.stdout and lock_names(root) == ["agent_case"], out
    leaky = json.loads((root / "tests" / "cassettes" / "leaky.json").read_text())
    assert leaky["name"] == "leaky"


# -- advice by situation: each one line with the exact command ----------------------------
def ci_clone(dev: dict[str, Any], name: str = "ci") -> tuple[Path, dict[str, str]]:
    ci = dev["tmp"] / name
    assert git(dev["tmp"], dev["env"], "clone", "-q", str(dev["origin"]), str(ci)).returncode == 0
    return ci, {**dev["env"], "CI": "true", "CASSTORE_OFFLINE": "1", "CASSTORE_CACHE_DIR": str(dev["tmp"] / f"{name}-cache"),
                "CASSTORE_CONFIG_DIR": str(dev["tmp"] / f"{name}-config")}


def test_ci_advice_for_a_recording_never_pinned_names_add_never_a_record_mode(dev: dict[str, Any]) -> None:
    root, env = dev["root"], dev["env"]
    assert pytest_run(root, {**env, "CASSTORE_PIN": "0"}).returncode == 0
    assert stage_and_commit(root, env, "tests/test_agent.py").returncode != 0  # the hook refuses ...
    assert git(root, env, "commit", "-q", "--no-verify", "-m", "unpinned").returncode == 0  # ... and is skipped
    assert git(root, env, "push", "-q", "origin", "HEAD").returncode == 0
    ci, ci_env = ci_clone(dev)
    r = pytest_run(ci, ci_env)
    assert r.returncode == 1, r.stdout
    assert "recorded locally but never pinned: run `casstore add tests/cassettes/agent_case.json` and commit " \
           "`casstore.lock`" in r.stdout, r.stdout
    assert "CASSTORE_MODE=record" not in r.stdout, "CI refuses record modes: never advise one there"


def test_ci_advice_for_a_pin_the_store_lacks_names_who_pushes(dev: dict[str, Any]) -> None:
    root, env = dev["root"], dev["env"]
    assert pytest_run(root, env).returncode == 0
    assert stage_and_commit(root, env, "tests/test_agent.py").returncode == 0
    assert git(root, env, "push", "-q", "--no-verify", "origin", "HEAD").returncode == 0  # no pre-push upload
    ci, ci_env = ci_clone(dev)
    r = pytest_run(ci, ci_env)
    assert r.returncode == 1, r.stdout
    assert "pinned but not pushed: tester@example.com runs `casstore push` in the clone that pinned it" in r.stdout, \
        r.stdout
    # what it says is the fix
    assert casstore_cli(root, env, "push").returncode == 0
    assert pytest_run(ci, ci_env).returncode == 0


def test_a_changed_request_advises_re_recording_just_this_test(dev: dict[str, Any], llm_server: LLMServer) -> None:
    root, env = dev["root"], dev["env"]
    assert pytest_run(root, env).returncode == 0
    changed = {**env, "PROMPT": "a changed prompt"}
    r = pytest_run(root, {**changed, "CASSTORE_MODE": "replay"})
    assert r.returncode == 1
    rerecord = "`CASSTORE_MODE=record pytest 'tests/test_agent.py::test_agent'`"
    line = next((ln for ln in r.stdout.splitlines() if "the request changed: re-record just this test:" in ln), "")
    assert rerecord in line and "`CASSTORE_MODE=record-new pytest 'tests/test_agent.py::test_agent'`" in line, r.stdout
    assert "keeps the old entry" in line
    # the command it names, run as written: one entry, the new prompt, pinned at the end
    r = pytest_run(root, {**changed, "CASSTORE_MODE": "record"}, "tests/test_agent.py::test_agent")
    assert r.returncode == 0 and "casstore: pinned 1" in r.stdout, r.stdout
    data = json.loads((root / "tests" / "cassettes" / "agent_case.json").read_text())
    assert [e["request"]["body"]["messages"][0]["content"] for e in data["entries"]] == ["a changed prompt"]
    assert pytest_run(root, {**changed, "CASSTORE_MODE": "replay", "CASSTORE_OFFLINE": "1"}).returncode == 0
