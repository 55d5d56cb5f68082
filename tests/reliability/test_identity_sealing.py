"""Issue #29, item 6: a redacted value cannot be recovered cheaply from a call's stored identity.

The identity of a call is computed from the un-redacted request (so redaction never merges
two calls). Under identity rules 1 and 2 it is a fast sha256 of that request: from a
redacted cassette alone, a dictionary tried through casstore's own identity function found
``"password": "sunshine42"`` at once. Under rule 3 each value redaction replaces enters the
identity as a salted scrypt digest: the fast attack finds nothing, and the attack that
seals each guess as casstore does pays one scrypt per guess. Calls are recorded with the
real requests client against the loopback stub, through ``casstore.use`` and the pytest
plugin; the attacker is a fresh interpreter that reads only the cassette file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import requests

import casstore
from casstore.model.identity import IDENTITY_RULE, http_identity, tool_identity
from casstore.model.recording import decode_headers, request_body_bytes
from tests.helpers.commands import REPO
from tests.helpers.figures import record
from tests.helpers.llm_server import LLMServer

SECRET = "sunshine42"
WORDS = ["password", "123456", "letmein", "dragon", "sunshine42", "qwerty", "monkey"]  # the 7 words
MIN_SECONDS_PER_GUESS = 0.01  # scrypt N=2**14, r=8: ~65 ms of one core here; 10 ms on any machine we run on

# The attacker: a fresh interpreter with casstore installed and the cassette file, nothing else.
# For each entry with a redacted password it puts each word where the placeholder is and
# recomputes the identity with casstore's own function: "fast" as under rules 1 and 2 (a
# sha256), "sealed" with the salt the entry stores (as rule 3 computes it). Prints JSON.
ATTACK = textwrap.dedent(
    """
    import json, sys, time
    from casstore.model.identity import digest_document, normalize_http, normalize_tool
    from casstore.model.recording import decode_headers, request_body_bytes

    cassette, mode, words = json.load(open(sys.argv[1])), sys.argv[2], json.loads(sys.argv[3])
    if mode == "sealed":
        from casstore.model.identity import Sealing, http_identity, tool_identity
    found, guesses, start = [], 0, time.process_time()
    for entry in cassette["entries"]:
        req = entry["request"]
        for word in words:
            guesses += 1
            if entry["kind"] == "tool":
                kwargs = {k: (word if "REDACTED" in str(v) else v) for k, v in req["kwargs"].items()}
                if mode == "fast":  # rule 2: the sha256 of the identity document
                    ident = digest_document(normalize_tool(entry["target"], req["args"], kwargs))
                else:
                    ident = tool_identity(entry["target"], req["args"], kwargs,
                                          sealing=Sealing(entry["identity_salt"])).identity
            else:
                body = request_body_bytes(req).replace(b"[REDACTED:password]", word.encode())
                args = (req["method"], req["url"], decode_headers(req.get("headers")), body)
                if mode == "fast":
                    ident = digest_document(normalize_http(*args, rule=2))
                else:
                    ident = http_identity(*args, sealing=Sealing(entry["identity_salt"])).identity
            if ident == entry["identity"]:
                found.append(word)
    print(json.dumps({"found": found, "guesses": guesses, "cpu": time.process_time() - start}))
    """
)


def attack(cassette: Path, mode: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-c", ATTACK, str(cassette), mode, json.dumps(WORDS)], env=env,
                       capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr
    out: dict[str, object] = json.loads(p.stdout)
    return out


def login(url: str, password: str) -> str:
    """A chat call that carries a password in its body; the stub's answer numbers each request."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "metadata": {"user": "alice", "password": password}}
    r = requests.post(f"{url}/v1/chat/completions", json=body, timeout=10)
    return str(r.json()["choices"][0]["message"]["content"])


def check_password(user: str, password: str) -> str:
    return f"{user}:{len(password)}"


def record_login(cassette_dir: Path, llm_server: LLMServer, name: str = "login") -> Path:
    with casstore.use(name, mode="record", cassette_dir=cassette_dir):
        assert "hi" in login(llm_server.url, SECRET)
        casstore.tool("check_password", check_password)("alice", password=SECRET)
    path = cassette_dir / f"{name}.json"
    assert SECRET not in path.read_text()
    return path


def test_a_dictionary_no_longer_recovers_a_redacted_password(cassette_dir: Path, llm_server: LLMServer) -> None:
    path = record_login(cassette_dir, llm_server)
    fast = attack(path, "fast")  # what found the password under rule 2 (sha256 of the request)
    assert fast["found"] == [], fast
    entries = json.loads(path.read_text())["entries"]
    assert [e["identity_rule"] for e in entries] == [IDENTITY_RULE, IDENTITY_RULE] == [3, 3]
    assert all(len(e["identity_salt"]) == 32 for e in entries)  # one random salt per cassette
    assert len({e["identity_salt"] for e in entries}) == 1
    sealed = attack(path, "sealed")  # the attack that knows rule 3: it works, at one scrypt a guess
    assert sealed["found"] == [SECRET, SECRET], sealed
    per_guess = float(sealed["cpu"]) / int(sealed["guesses"])  # type: ignore[arg-type]
    assert per_guess >= MIN_SECONDS_PER_GUESS, per_guess
    record("identity sealing", attack_cpu_ms_per_guess=round(per_guess * 1000))


def test_the_replay_matches_and_two_passwords_stay_two_calls(cassette_dir: Path, llm_server: LLMServer) -> None:
    with casstore.use("two", mode="record", cassette_dir=cassette_dir):
        first, second = login(llm_server.url, SECRET), login(llm_server.url, "moonlight7")
    entries = json.loads((cassette_dir / "two.json").read_text())["entries"]
    assert entries[0]["identity"] != entries[1]["identity"]  # redacted alike, still two calls
    assert entries[0]["request"] == entries[1]["request"]  # (the cassette shows them alike)
    seen = llm_server.count
    with casstore.use("two", mode="replay", cassette_dir=cassette_dir):  # each answer to its own call
        assert login(llm_server.url, "moonlight7") == second and login(llm_server.url, SECRET) == first
    with casstore.use("login-replay", mode="record", cassette_dir=cassette_dir):
        casstore.tool("check_password", check_password)("alice", password=SECRET)
    with casstore.use("login-replay", mode="replay", cassette_dir=cassette_dir):
        assert casstore.tool("check_password", check_password)("alice", password=SECRET) == "alice:10"
        with pytest.raises(casstore.CassetteMiss):
            casstore.tool("check_password", check_password)("alice", password="moonlight7")
    assert llm_server.count == seen


def test_a_cassette_recorded_under_rule_2_still_replays(cassette_dir: Path, llm_server: LLMServer) -> None:
    """An entry as rule 2 wrote it: the sha256 identity of the un-redacted request, no salt."""
    path = record_login(cassette_dir, llm_server)
    data = json.loads(path.read_text())
    for entry in data["entries"]:
        req = entry["request"]
        if entry["kind"] == "tool":
            kwargs = {k: (SECRET if "REDACTED" in str(v) else v) for k, v in req["kwargs"].items()}
            old = tool_identity(entry["target"], req["args"], kwargs, rule=2)
        else:
            body = request_body_bytes(req).replace(b"[REDACTED:password]", SECRET.encode())
            old = http_identity(req["method"], req["url"], decode_headers(req.get("headers")), body, rule=2)
        assert old.salt is None and old.identity != entry["identity"]
        entry.update(identity=old.identity, identity_rule=2)
        del entry["identity_salt"]
    path.write_text(json.dumps(data, indent=2))
    seen = llm_server.count
    with casstore.use("login", mode="replay", cassette_dir=cassette_dir):
        assert "hi" in login(llm_server.url, SECRET)
        assert casstore.tool("check_password", check_password)("alice", password=SECRET) == "alice:10"
    assert llm_server.count == seen


PLUGIN_TEST = textwrap.dedent(
    """
    import os

    import pytest
    import requests

    URL = os.environ["CASSTORE_TEST_URL"]


    @pytest.mark.casstore
    def test_login():
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                "metadata": {"user": "alice", "password": "sunshine42"}}
        r = requests.post(URL + "/v1/chat/completions", json=body, timeout=10)
        assert r.json()["choices"][0]["message"]["content"].endswith("hi")
    """
)


def test_the_pytest_plugin_records_sealed_and_replays_offline(tmp_path: Path, llm_server: LLMServer,
                                                             replay_env: None) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "casstore.toml").write_text("# plugin project\n")
    (root / "test_login.py").write_text(PLUGIN_TEST)
    env = {**os.environ, "CASSTORE_TEST_URL": llm_server.url, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "casstore.replay.pytest_plugin",
           "test_login.py"]
    first = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert "1 passed" in first.stdout, first.stdout + first.stderr
    (cassette,) = (root / "tests" / "cassettes").rglob("*.json")
    (entry,) = json.loads(cassette.read_text())["entries"]
    assert entry["identity_rule"] == 3 and "identity_salt" in entry and SECRET not in cassette.read_text()
    seen = llm_server.count
    second = subprocess.run([*cmd, "--casstore-mode=replay"], cwd=root, env={**env, "CASSTORE_OFFLINE": "1"},
                            capture_output=True, text=True, timeout=240, check=False)
    assert "1 passed" in second.stdout, second.stdout + second.stderr
    assert llm_server.count == seen


def test_rule_3_is_rule_2_where_nothing_is_sealed_and_leaves_out_the_names_added_for_it() -> None:
    """A call with nothing to seal keeps its rule 2 identity (rule 2 cassettes pay no second
    lookup); the credential names tagged for rule 3 never count under it, and still do under 2."""
    chat = ("POST", "https://api.openai.com/v1/chat/completions", {"content-type": "application/json"},
            json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
    assert http_identity(*chat).identity == http_identity(*chat, rule=2).identity
    assert http_identity(*chat).salt is None
    url, plain = "https://example.com/v1/items", {"accept": "application/json"}
    keyed = {**plain, "DD-APPLICATION-KEY": "f" * 8 + "0123456789abcdef"}
    assert http_identity("GET", url, keyed, None).identity == http_identity("GET", url, plain, None).identity
    assert http_identity("GET", url, keyed, None, rule=2).identity != http_identity("GET", url, plain, None, rule=2).identity


def test_a_long_random_key_in_free_text_is_left_to_the_sha256_a_named_password_is_sealed() -> None:
    """The credential shapes match only long random keys (no dictionary recovers them), so
    rule 3 does not scan free text for them; a value under a key rule is sealed."""
    key = "sk-proj-" + os.urandom(24).hex()  # a fake key, made at run time
    def chat(content: str, **extra: str) -> tuple[str, str, dict[str, str], str]:
        return ("POST", "https://api.openai.com/v1/chat/completions", {"content-type": "application/json"},
                json.dumps({"model": "m", "messages": [{"role": "user", "content": content}], **extra}))
    shaped = http_identity(*chat(f"my key is {key}"))
    assert shaped.salt is None and shaped.identity == http_identity(*chat(f"my key is {key}"), rule=2).identity
    named = http_identity(*chat("hi", password=SECRET))
    assert named.salt is not None and SECRET not in json.dumps(named.document)


def test_a_cassette_sealed_by_the_built_in_rules_replays_under_a_projects_own(cassette_dir: Path,
                                                                           llm_server: LLMServer) -> None:
    """An import seals by the built-in rules; a project whose [redaction] rules also replace
    another field of the call (so its own identity of the call differs) still replays it."""
    record_login(cassette_dir, llm_server)
    seen = llm_server.count
    with casstore.use("login", mode="replay", cassette_dir=cassette_dir, redaction={"paths": ["metadata.user"]}):
        assert "hi" in login(llm_server.url, SECRET)
    assert llm_server.count == seen


def test_calls_from_many_threads_share_the_cassettes_one_salt(cassette_dir: Path, llm_server: LLMServer) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with casstore.use("threads", mode="record", cassette_dir=cassette_dir), ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: login(llm_server.url, f"{SECRET}-{i}"), range(8)))
    entries = json.loads((cassette_dir / "threads.json").read_text())["entries"]
    assert len(entries) == 8 and len({e["identity_salt"] for e in entries}) == 1


def test_sessions_of_one_project_share_one_sealing_rule_set() -> None:
    """Every session makes its own RuleSet of the project's rules: rule 3 keeps one rule set
    to seal by per configuration, not one per session for the life of the process."""
    from casstore.model.identity import Sealing
    from casstore.model.redaction import RuleSet

    sealed_by = set()
    for i in range(50):
        rules = RuleSet.from_config({"patterns": ["order-[0-9]+"]})  # as each session makes its own
        http_identity("POST", "https://example.com/login", {}, json.dumps({"password": SECRET}),
                      sealing=Sealing(f"salt{i}", rules))
        sealed_by.add(id(rules.without_shapes))
    assert len(sealed_by) == 1
