"""`casstore check`: secrets, age, size, pins, --staged; the redaction report; no secret in any output."""

from __future__ import annotations

import base64
import datetime as dt
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.helpers.cassettes import leaky, make_cassette, write_cassette
from tests.helpers.commands import git, merge_conflict
from tests.helpers.fakes import ago, aws_key, openai_key, rnd
from tests.model.test_redaction import CORPUS


def set_config(repo: Path, extra: str) -> None:
    cfg = repo / "casstore.toml"
    cfg.write_text(cfg.read_text() + "\n" + extra + "\n")


def add_hygiene(repo: Path, line: str) -> None:
    """Add a key to the [hygiene] table that `casstore init` wrote."""
    cfg = repo / "casstore.toml"
    cfg.write_text(cfg.read_text().replace("[hygiene]\n", f"[hygiene]\n{line}\n", 1))


def output(r) -> str:  # type: ignore[no-untyped-def]
    return r.stdout + r.stderr


# -- secrets ---------------------------------------------------------------------------
def test_clean_repository_passes(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    write_cassette(repo, "clean", recorded_at=ago(1))
    r = casstore("check", cwd=repo)
    assert r.exit_code == 0, output(r)
    assert "checked 1 file(s) and 0 pin(s): 0 error(s), 0 warning(s)" in r.stdout


@pytest.mark.parametrize("make_secret,rule", [(aws_key, "aws-access-key-id"), (openai_key, "openai-key")])
def test_secret_fails_and_output_names_file_and_rule_not_the_key(repo: Path, casstore, make_secret, rule) -> None:  # type: ignore[no-untyped-def]
    secret = make_secret()
    leaky(repo, "leak", secret, recorded_at=ago(1))
    r = casstore("check", cwd=repo)
    assert r.exit_code == 1
    out = output(r)
    assert "tests/cassettes/leak.json" in out and f"({rule})" in out
    assert "entry 0" in out and "$.entries[0].response.body.choices[0].message.content" in out
    assert secret not in out and secret[4:12] not in out
    assert f"secrets still present: {rule}×2" in out
    rj = casstore("check", "--json", cwd=repo)
    assert rj.exit_code == 1
    assert secret not in rj.stdout
    rep = json.loads(rj.stdout)
    assert rep["ok"] is False and rep["redaction"]["found"] == {rule: 2}
    assert {(f["file"], f["rule"], f["entry"]) for f in rep["findings"]} == {
        ("tests/cassettes/leak.json", rule, 0), ("tests/cassettes/leak.json", rule, 1)}


def test_whole_fake_corpus_is_caught_and_never_printed(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    cas = make_cassette("corpus", n=1, recorded_at=ago(1))
    cas["entries"][0]["response"]["body"] = {"items": [obj for _l, _s, obj, _r in CORPUS]}
    (repo / "tests/cassettes/corpus.json").write_text(json.dumps(cas, indent=2))
    r = casstore("check", "--json", cwd=repo)
    assert r.exit_code == 1
    rep = json.loads(r.stdout)
    found = {f["path"].split("]", 5)[-2] + "]" for f in rep["findings"]}  # ...items[i]
    assert len(found) == len(CORPUS)
    text = casstore("check", cwd=repo)
    for label, secret, _obj, _rule in CORPUS:
        assert secret not in r.stdout and secret not in output(text), label


def test_a_form_field_is_found_whatever_the_case_of_its_header(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    secret = rnd(24)
    body = f'--b\r\nContent-Disposition: form-Data; name="api_key"\r\n\r\n{secret}\r\n--b--\r\n'
    cas = make_cassette("form", n=1, recorded_at=ago(1))
    cas["entries"][0]["request"]["body"] = body
    (repo / "tests/cassettes/form.json").write_text(json.dumps(cas))
    r = casstore("check", cwd=repo)
    assert r.exit_code == 1, output(r)
    assert "(api-key)" in r.stdout and "<form-data>.api_key" in r.stdout and secret not in output(r)


def test_redaction_report_sums_hits_per_rule(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    for name in ("a", "b"):
        cas = make_cassette(name, recorded_at=ago(2))
        cas["redaction"] = {"rules": ["authorization", "api-key"], "hits": {"authorization": 2, "api-key": 1}}
        (repo / f"tests/cassettes/{name}.json").write_text(json.dumps(cas))
    r = casstore("check", cwd=repo)
    assert r.exit_code == 0
    assert "redaction report: redacted at record time: api-key×2, authorization×4" in r.stdout


def test_config_redaction_rules_apply_to_the_check(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    set_config(repo, '[redaction]\npaths = ["customer.email"]')
    write_cassette(repo, "pii", recorded_at=ago(1), body={"customer": {"email": "ana@example.com"}})
    r = casstore("check", cwd=repo)
    assert r.exit_code == 1
    assert "(path:customer.email)" in r.stdout and "ana@example.com" not in output(r)


def test_vcrpy_yaml_cassettes_are_scanned_in_the_cassette_dir_and_by_globs(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    token = rnd(40)
    vcr = {"version": 1, "interactions": [{
        "request": {"method": "GET", "uri": "https://api.example.com/x", "body": None,
                    "headers": {"Authorization": [f"Bearer {token}"]}},
        "response": {"status": {"code": 200, "message": "OK"},
                     "headers": {"Date": [dt.datetime.now(dt.timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")]},
                     "body": {"string": "{}"}}}]}
    (repo / "tests/cassettes/vcr_one.yaml").write_text(yaml.safe_dump(vcr))
    other = repo / "fixtures" / "vcr" / "deep"
    other.mkdir(parents=True)
    (other / "two.yml").write_text(yaml.safe_dump(vcr))
    r = casstore("check", cwd=repo)
    assert r.exit_code == 1
    assert "tests/cassettes/vcr_one.yaml: secret (authorization) in entry 0" in r.stdout
    assert "fixtures/vcr" not in r.stdout  # not configured yet
    add_hygiene(repo, 'globs = ["fixtures/**/*.yml"]')
    r = casstore("check", cwd=repo)
    assert "fixtures/vcr/deep/two.yml: secret (authorization)" in r.stdout, output(r)
    assert token not in output(r)


def test_a_glob_selects_a_file_in_a_folder_with_a_line_break_in_its_name(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    # "**" was ".*", which stops at a line break: "fixtures/a\nb/two.yml" was found by the
    # walk but not matched, so its secret was never scanned
    token = rnd(40)
    vcr = {"version": 1, "interactions": [{
        "request": {"method": "GET", "uri": "https://api.example.com/x", "body": None,
                    "headers": {"Authorization": [f"Bearer {token}"]}},
        "response": {"status": {"code": 200, "message": "OK"}, "headers": {}, "body": {"string": "{}"}}}]}
    for folder in ("plain", "a\nb"):
        (repo / "fixtures" / folder).mkdir(parents=True)
        (repo / "fixtures" / folder / "two.yml").write_text(yaml.safe_dump(vcr))
    add_hygiene(repo, 'globs = ["fixtures/**/*.yml"]')
    r = casstore("check", cwd=repo)
    assert r.exit_code == 1
    found = [ln for ln in r.stdout.splitlines() if "two.yml: secret (authorization)" in ln]
    assert len(found) == 2 and any("plain" in ln for ln in found), output(r)  # the control and the hostile one
    assert token not in output(r)


def test_check_reads_the_python_tags_vcrpy_writes_as_import_does(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    """Python 2-era vcrpy files tag strings ``!!python/unicode``: check scans them (one YAML
    reader with ``casstore import``), and still refuses a tag that would run code."""
    token = rnd(40)
    date = dt.datetime.now(dt.timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")
    (repo / "tests/cassettes/py2.yaml").write_text(
        "interactions:\n- request:\n    method: GET\n    uri: !!python/unicode 'https://api.example.com/x'\n"
        f"    headers:\n      Authorization: [!!python/unicode 'Bearer {token}']\n"
        f"  response:\n    status: {{code: 200}}\n    headers:\n      Date: ['{date}']\n"
        "    body: {string: !!python/unicode 'ok'}\nversion: 1\n")
    (repo / "tests/cassettes/evil.yaml").write_text("x: !!python/object/apply:os.system ['true']\n")
    r = casstore("check", cwd=repo)
    assert r.exit_code == 1
    assert "tests/cassettes/py2.yaml: secret (authorization) in entry 0" in r.stdout, output(r)
    assert "tests/cassettes/evil.yaml: is not valid YAML at line 1" in r.stdout, output(r)
    assert "unsupported YAML tag (tag:yaml.org,2002:python/object/apply:os.system)" in r.stdout, output(r)
    assert token not in output(r)


def test_vcrpy_age_comes_from_the_response_date_header(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    old = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=200)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    vcr = {"version": 1, "interactions": [{"request": {"method": "GET", "uri": "https://x.test/", "headers": {}},
                                           "response": {"status": {"code": 200}, "headers": {"date": [old]},
                                                        "body": {"string": "ok"}}}]}
    (repo / "tests/cassettes/old.yaml").write_text(yaml.safe_dump(vcr))
    r = casstore("check", cwd=repo)
    assert r.exit_code == 1
    assert "tests/cassettes/old.yaml: stale: entries were recorded 200 days ago" in r.stdout


def test_broken_files_fail_without_quoting_their_content(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    secret = aws_key()
    (repo / "tests/cassettes/bad.yaml").write_text(f"key: [{secret}\n  - : :\n")
    (repo / "tests/cassettes/bad.json").write_text('{"x": "' + secret + '", oops}')
    r = casstore("check", cwd=repo)
    assert r.exit_code == 1
    assert "tests/cassettes/bad.yaml: is not valid YAML at line" in r.stdout
    assert "tests/cassettes/bad.json: is not valid JSON: line 1" in r.stdout
    assert secret not in output(r)


def test_a_file_that_is_not_a_v1_cassette_fails(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    (repo / "tests/cassettes/wrong.json").write_text(json.dumps({"format": "casstore.cassette/v1", "name": "wrong"}))
    r = casstore("check", cwd=repo)
    assert r.exit_code == 1
    assert "tests/cassettes/wrong.json: is not a valid casstore.cassette/v1 cassette: 'entries' must be a list" in r.stdout


# -- age -----------------------------------------------------------------------------------
def test_age_fails_after_max_and_warns_after_warn(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    write_cassette(repo, "old", recorded_at=ago(200))
    r = casstore("check", cwd=repo)
    assert r.exit_code == 1
    assert "FAIL tests/cassettes/old.json: stale: entries were recorded 200 days ago" in r.stdout
    assert "hygiene.max_age_days is 90" in r.stdout
    (repo / "tests/cassettes/old.json").unlink()
    write_cassette(repo, "ageing", recorded_at=ago(70))  # casstore init sets warn_age_days = 60
    r = casstore("check", cwd=repo)
    assert r.exit_code == 0, output(r)
    assert "warn tests/cassettes/ageing.json: ageing: entries were recorded 70 days ago" in r.stdout
    assert "0 error(s), 1 warning(s)" in r.stdout


def test_oldest_entry_counts_and_limits_come_from_config(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    cas = make_cassette("mixed", n=3, recorded_at=ago(1))
    cas["entries"][2]["recorded_at"] = ago(120)
    (repo / "tests/cassettes/mixed.json").write_text(json.dumps(cas))
    r = casstore("check", cwd=repo)
    assert r.exit_code == 1 and "120 days ago" in r.stdout and "(entry 2)" in r.stdout
    cfg = (repo / "casstore.toml").read_text().replace("max_age_days = 90", "max_age_days = 365")
    (repo / "casstore.toml").write_text(cfg.replace("warn_age_days = 60", "warn_age_days = 100"))
    r = casstore("check", cwd=repo)
    assert r.exit_code == 0 and "1 warning(s)" in r.stdout


def test_hygiene_allow_suppresses_a_finding_by_file_and_kind(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    write_cassette(repo, "legacy", recorded_at=ago(400))
    add_hygiene(repo, 'allow = ["tests/cassettes/legacy.json:age"]')
    r = casstore("check", cwd=repo)
    assert r.exit_code == 0, output(r)
    assert "1 allowed by hygiene.allow" in r.stdout


# -- size ----------------------------------------------------------------------------------
def test_size_limits(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    big = base64.b64encode(bytes(range(256)) * 40).decode()  # ~13.6 KB of ordinary base64
    write_cassette(repo, "big", recorded_at=ago(1), body={"image": big})
    r = casstore("check", cwd=repo)
    assert r.exit_code == 0, output(r)  # base64 images are not secrets
    cfg = (repo / "casstore.toml").read_text().replace(
        "[hygiene]\n", "[hygiene]\nmax_cassette_bytes = 100000\nmax_entry_bytes = 10000\n", 1)
    (repo / "casstore.toml").write_text(cfg)
    r = casstore("check", cwd=repo)
    assert r.exit_code == 1
    assert "tests/cassettes/big.json: entry 0 is" in r.stdout and "over hygiene.max_entry_bytes = 10000" in r.stdout
    (repo / "casstore.toml").write_text(cfg.replace("max_cassette_bytes = 100000", "max_cassette_bytes = 1000"))
    r = casstore("check", cwd=repo)
    assert "over hygiene.max_cassette_bytes = 1000" in r.stdout


# -- the lock ------------------------------------------------------------------------------
def test_pins_need_a_trusted_signature(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    write_cassette(repo, "signed", recorded_at=ago(1))
    assert casstore("add", "tests/cassettes/signed.json", cwd=repo).exit_code == 0
    r = casstore("check", cwd=repo)
    assert r.exit_code == 0, output(r)
    assert "1 pin(s)" in r.stdout
    other = base64.b64encode(Ed25519PrivateKey.generate().public_key().public_bytes_raw()).decode()
    (repo / ".casstore/trusted_keys").write_text(f"someone@example.com ed25519 {other}\n")
    r = casstore("check", cwd=repo)
    assert r.exit_code == 1
    assert "FAIL casstore.lock: signed: sha256:" in r.stdout and "signed only by keys not in trusted_keys" in r.stdout


def test_pinned_object_must_be_in_the_cache_or_the_store(repo: Path, casstore, isolated_user: Path) -> None:  # type: ignore[no-untyped-def]
    write_cassette(repo, "obj", recorded_at=ago(1))
    assert casstore("add", "tests/cassettes/obj.json", cwd=repo).exit_code == 0
    shutil.rmtree(isolated_user / "cache")
    r = casstore("check", cwd=repo)
    assert r.exit_code == 1
    assert "obj: sha256:" in r.stdout and "is neither in the local cache nor in the store" in r.stdout
    r = casstore("check", "--offline", cwd=repo)
    assert r.exit_code == 0 and "store not asked: --offline" in r.stdout


def test_pushed_object_is_found_in_the_store(repo: Path, casstore, isolated_user: Path) -> None:  # type: ignore[no-untyped-def]
    write_cassette(repo, "obj", recorded_at=ago(1))
    assert casstore("add", "tests/cassettes/obj.json", cwd=repo).exit_code == 0
    assert casstore("push", cwd=repo).exit_code == 0
    shutil.rmtree(isolated_user / "cache")
    r = casstore("check", cwd=repo)
    assert r.exit_code == 0, output(r)


def test_pin_age_is_checked_from_the_lock_when_no_working_copy_is_there(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    p = write_cassette(repo, "gone", recorded_at=ago(150))
    cfg = (repo / "casstore.toml").read_text().replace("max_age_days = 90", "max_age_days = 400")
    (repo / "casstore.toml").write_text(cfg)
    assert casstore("add", str(p), cwd=repo).exit_code == 0
    p.unlink()
    (repo / "casstore.toml").write_text(cfg.replace("max_age_days = 400", "max_age_days = 90"))
    r = casstore("check", cwd=repo)
    assert r.exit_code == 1
    assert "FAIL casstore.lock: stale: gone: its oldest entry was recorded 150 days ago" in r.stdout


def test_malformed_lock_is_a_failing_finding(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    (repo / "casstore.lock").write_text("version = 1\n[cassettes.x]\ndigest = 3\n")
    r = casstore("check", cwd=repo)
    assert r.exit_code == 1
    assert "FAIL casstore.lock: casstore.lock is malformed" in r.stdout


# -- --staged ------------------------------------------------------------------------------
def test_staged_reads_the_index_not_the_working_tree(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    secret = aws_key()
    p = leaky(repo, "c", secret, recorded_at=ago(1))
    git("add", str(p), cwd=repo)
    write_cassette(repo, "c", recorded_at=ago(1))  # fixed in the working tree, not staged
    assert casstore("check", cwd=repo).exit_code == 0
    r = casstore("check", "--staged", cwd=repo)
    assert r.exit_code == 1
    assert "tests/cassettes/c.json: secret (aws-access-key-id)" in r.stdout and secret not in output(r)
    assert "checked 1 staged file(s)" in r.stdout
    assert "--no-verify" in r.stderr
    git("add", str(p), cwd=repo)
    assert casstore("check", "--staged", cwd=repo).exit_code == 0
    leaky(repo, "c", secret, recorded_at=ago(1))  # leak only in the working tree now
    assert casstore("check", "--staged", cwd=repo).exit_code == 0


def test_staged_checks_only_staged_files(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    write_cassette(repo, "old", recorded_at=ago(300))  # not staged: not this commit's business
    p = write_cassette(repo, "new", recorded_at=ago(1))
    git("add", str(p), cwd=repo)
    r = casstore("check", "--staged", cwd=repo)
    assert r.exit_code == 0, output(r)
    assert "checked 1 staged file(s)" in r.stdout


def test_staged_lock_asks_the_store_only_for_changed_pins(repo: Path, casstore, monkeypatch, isolated_user: Path) -> None:  # type: ignore[no-untyped-def]
    p = write_cassette(repo, "one", recorded_at=ago(1))
    assert casstore("add", str(p), cwd=repo).exit_code == 0
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "one", cwd=repo)
    # from now on, a store that fails if it is touched at all
    monkeypatch.setenv("CASSTORE_REMOTE", "s3://no-such-bucket/x")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("CASSTORE_RETRY_ATTEMPTS", "1")
    shutil.rmtree(isolated_user / "cache")
    # the lock is staged but pins nothing new (a comment changed): no store request, passes
    lock = repo / "casstore.lock"
    lock.write_text(lock.read_text() + "# reviewed\n")
    git("add", "casstore.lock", cwd=repo)
    r = casstore("check", "--staged", cwd=repo)
    assert r.exit_code == 0, output(r)
    assert "0 pin(s)" in r.stdout
    # a changed pin whose object is not cached: the store is asked (and here it fails)
    write_cassette(repo, "one", recorded_at=ago(1), n=3)
    monkeypatch.delenv("CASSTORE_REMOTE")
    assert casstore("add", str(p), cwd=repo).exit_code == 0
    shutil.rmtree(isolated_user / "cache")
    monkeypatch.setenv("CASSTORE_REMOTE", "s3://no-such-bucket/x")
    git("add", "casstore.lock", cwd=repo)
    r = casstore("check", "--staged", "casstore.lock", cwd=repo)
    assert r.exit_code == 1
    assert "FAIL casstore.lock: cannot ask the store s3://no-such-bucket/x" in r.stdout


# -- usage -----------------------------------------------------------------------------------
def test_paths_limit_the_check_and_bad_paths_are_usage_errors(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    leaky(repo, "leak", aws_key(), recorded_at=ago(1))
    write_cassette(repo, "ok", recorded_at=ago(1))
    r = casstore("check", "tests/cassettes/ok.json", cwd=repo)
    assert r.exit_code == 0 and "checked 1 file(s)" in r.stdout
    r = casstore("check", "tests/cassettes", cwd=repo)
    assert r.exit_code == 1
    r = casstore("check", "nope.json", cwd=repo)
    assert r.exit_code == 2 and r.stderr.strip() == "error: nope.json: no such file or folder"


def test_bad_redaction_config_is_a_usage_error(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    set_config(repo, '[redaction]\npatterns = ["("]')
    r = casstore("check", cwd=repo)
    assert r.exit_code == 2
    assert r.stderr.startswith("error: 'redaction.patterns[0]' is not a valid regex")
    assert "Traceback" not in output(r)


def test_staged_lists_what_the_index_changes_against_head(repo: Path) -> None:
    from casstore.git.plumbing import GitCommands

    def staged(repo: Path) -> dict[str, bytes | None]:  # staged path -> its bytes (None: deleted)
        cmds = GitCommands.open(repo)
        shas = cmds.staged_shas() if cmds is not None else None
        assert cmds is not None and shas is not None
        return {p: None if s is None else cmds.cat([s])[0] for p, s in shas.items()}  # type: ignore[index]

    for i in range(5):
        write_cassette(repo, f"d{i}/c{i}", recorded_at=ago(1))
    git("add", "-A", cwd=repo)
    first = staged(repo)  # no HEAD yet: everything in the index
    assert len(first) > 5 and first["tests/cassettes/d0/c0.json"] == (repo / "tests/cassettes/d0/c0.json").read_bytes()
    git("commit", "-q", "-m", "x", cwd=repo)
    write_cassette(repo, "d1/c1", recorded_at=ago(2))
    write_cassette(repo, "new/one", recorded_at=ago(2))
    git("add", "-A", cwd=repo)
    git("rm", "-q", "tests/cassettes/d2/c2.json", cwd=repo)
    write_cassette(repo, "d3/c3", recorded_at=ago(3))  # changed in the work tree only: not staged
    now = staged(repo)
    assert set(now) == {"tests/cassettes/d1/c1.json", "tests/cassettes/new/one.json",
                        "tests/cassettes/d2/c2.json"}
    assert now["tests/cassettes/d2/c2.json"] is None
    assert now["tests/cassettes/new/one.json"] == (repo / "tests/cassettes/new/one.json").read_bytes()


def test_a_recording_made_by_the_replay_library_checks_clean(repo: Path, casstore, llm_server, fake_key: str,  # type: ignore[no-untyped-def]
                                                            replay_env) -> None:
    """One rule set: what the recorder writes (redacted with it) passes the checker built on it."""
    import casstore as lib
    from tests.replay.test_replay_sdks import _agent_run

    with lib.use("agent/run", mode="record", cassette_dir=repo / "tests" / "cassettes"):
        _agent_run(llm_server, fake_key)
    text = (repo / "tests/cassettes/agent/run.json").read_text()
    assert fake_key not in text
    r = casstore("check", cwd=repo)
    assert r.exit_code == 0, output(r)
    assert "redaction report: redacted at record time:" in r.stdout
    assert "authorization×" in r.stdout or "api-key×" in r.stdout
    # the same file with the key put back is refused, and the key is not printed
    (repo / "tests/cassettes/agent/run.json").write_text(text.replace("answer", "answer " + fake_key, 1))
    r = casstore("check", cwd=repo)
    assert r.exit_code == 1 and "(openai-key)" in r.stdout and fake_key not in output(r)


def test_globs_outside_the_project_are_a_config_error(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    add_hygiene(repo, 'globs = ["../elsewhere/*.yaml"]')
    r = casstore("check", cwd=repo)
    assert r.exit_code == 2 and "'hygiene.globs' must be relative patterns inside the project" in r.stderr


def test_staged_shas_is_what_the_commit_changes(repo: Path) -> None:
    """git diff-index's answer: no HEAD yet (against the empty tree), an edit, a new path
    with spaces and non-ASCII letters, a deletion, no mode-only change; in a conflict, a
    path counts as "ours" (the commit's first parent), else "theirs"."""
    from casstore.git.plumbing import GitCommands

    def staged() -> dict[str, bytes | None]:
        cmds = GitCommands.open(repo)
        shas = cmds.staged_shas() if cmds is not None else None
        assert shas is not None
        return shas

    blob = lambda rel: git("rev-parse", f":{rel}", cwd=repo).stdout.strip().encode()  # noqa: E731
    for i in range(6):
        write_cassette(repo, f"d{i}/c{i}", recorded_at=ago(1))
    git("add", "-A", cwd=repo)
    first = staged()  # no HEAD yet
    assert len(first) > 6 and first["tests/cassettes/d0/c0.json"] == blob("tests/cassettes/d0/c0.json")
    git("commit", "-q", "-m", "x", cwd=repo)
    assert staged() == {}
    write_cassette(repo, "d1/c1", recorded_at=ago(2))
    write_cassette(repo, "new dir/ünï cödé", recorded_at=ago(2))
    git("add", "-A", cwd=repo)
    git("rm", "-q", "tests/cassettes/d2/c2.json", cwd=repo)
    (repo / "tests/cassettes/d3/c3.json").chmod(0o755)  # a mode-only change: no new content
    git("add", "-A", cwd=repo)
    assert staged() == {"tests/cassettes/d1/c1.json": blob("tests/cassettes/d1/c1.json"),
                        "tests/cassettes/new dir/ünï cödé.json": blob("tests/cassettes/new dir/ünï cödé.json"),
                        "tests/cassettes/d2/c2.json": None}
    git("commit", "-q", "-m", "y", cwd=repo)
    merge_conflict(repo, lambda: write_cassette(repo, "d4/c4", recorded_at=ago(5)),
                   lambda: write_cassette(repo, "d4/c4", recorded_at=ago(6)))
    assert staged() == {}  # "ours" is HEAD's
    theirs = git("rev-parse", "other:tests/cassettes/d4/c4.json", cwd=repo).stdout.strip().encode()
    git("rm", "-q", "--cached", "tests/cassettes/d4/c4.json", cwd=repo)  # ours deleted, theirs kept
    stages = f"100644 {theirs.decode()} 3\ttests/cassettes/d4/c4.json\n"
    subprocess.run(["git", "update-index", "--index-info"], cwd=repo, input=stages, text=True, check=True)
    assert staged() == {"tests/cassettes/d4/c4.json": theirs}
