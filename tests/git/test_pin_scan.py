"""Pinned content is scanned (issue #16, item 2), in real git repositories.

- ``casstore add`` scans what it pins with the rules of ``casstore check``: a finding
  refuses the whole add (exit 1), one line per finding naming the file, the entry, the
  field and the rule, never the secret; ``[redaction] allow`` (reviewed in casstore.toml)
  accepts a false positive, and ``hygiene.allow`` works as it does for ``check``.
- ``casstore check`` without paths scans the *content* of every pin that differs from a
  base: ``--since REV``; by default the merge base with the upstream branch, or every pin
  when there is none. Objects come from the cache, else the remote.
- the pre-commit hook scans the content of the pins the staged lock changes, so a commit
  of only ``casstore.lock`` cannot smuggle a secret.

A pin holding a secret is made the way an attacker (or an old casstore) would: object,
signature and lock written directly, without ``casstore add``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import zstandard

from tests.helpers.cassettes import leaky_doc, make_cassette, smuggle
from tests.helpers.commands import git, run_casstore_subprocess
from tests.helpers.fakes import ago, aws_key, openai_key
from tests.helpers.figures import record
from tests.helpers.gitrepo import commit


def assert_one_line_per_finding(r, cassette: str, field: str, rule: str, secret: str) -> None:  # type: ignore[no-untyped-def]
    out = r.stdout + r.stderr
    assert r.exit_code == 1, (r.exit_code, out)
    assert "Traceback" not in out
    lines = [ln for ln in out.splitlines() if f"({rule})" in ln]
    assert lines, out
    assert any(cassette in ln and field in ln for ln in lines), (cassette, field, lines)
    assert secret not in out and secret[4:14] not in out
    record("pinned content (CLI)", secrets_refused=len(lines))


# -- add ------------------------------------------------------------------------------------
@pytest.mark.parametrize("where,field", [("target", "$.entries[1].target"),
                                         ("body", "$.entries[1].response.body.choices[0].message.content")])
def test_add_refuses_a_secret_naming_file_entry_field_and_rule(repo: Path, casstore, isolated_user: Path,  # type: ignore[no-untyped-def]
                                                               where: str, field: str) -> None:
    secret = openai_key()
    clean = repo / "tests" / "cassettes" / "clean.json"
    clean.parent.mkdir(parents=True, exist_ok=True)
    clean.write_text(json.dumps(make_cassette("clean", recorded_at=ago(1))))
    bad = repo / "tests" / "cassettes" / "hand_edited.json"
    bad.write_text(json.dumps(leaky_doc("hand_edited", secret, where=where), indent=2))
    lock_before = (repo / "casstore.lock").read_bytes() if (repo / "casstore.lock").exists() else None
    r = casstore("add", str(clean), str(bad), cwd=repo)
    assert_one_line_per_finding(r, "tests/cassettes/hand_edited.json", field, "openai-key", secret)
    assert "entry 1" in r.stderr
    # all or nothing: neither file was pinned; the leaky one never entered the cache
    after = (repo / "casstore.lock").read_bytes() if (repo / "casstore.lock").exists() else None
    assert after == lock_before
    for p in (isolated_user / "cache").rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            if data[:4] == b"\x28\xb5\x2f\xfd":
                data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
            assert secret.encode() not in data, p
    r = casstore("add", str(clean), cwd=repo)
    assert r.exit_code == 0, r.stderr


def test_add_refuses_a_custom_pattern(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    cfg = repo / "casstore.toml"
    cfg.write_text(cfg.read_text() + '\n[redaction]\npatterns = ["ACCT-[0-9]{9}"]\n')
    secret = "ACCT-" + str(10**8 + os.getpid() % 10**8)
    doc = make_cassette("acct", recorded_at=ago(1), body={"note": f"account {secret}"})
    p = repo / "tests" / "cassettes" / "acct.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(doc))
    r = casstore("add", str(p), cwd=repo)
    assert_one_line_per_finding(r, "tests/cassettes/acct.json", "$.entries[0].response.body.note",
                                "pattern:ACCT-[0-9]{9}", secret)


def test_redaction_allow_accepts_a_false_positive_visibly(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    example = aws_key()  # e.g. the documented example key a provider's docs answer with
    p = repo / "tests" / "cassettes" / "docs_answer.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(make_cassette("docs_answer", recorded_at=ago(1),
                                          body={"content": f"an example id looks like {example}"})))
    assert casstore("add", str(p), cwd=repo).exit_code == 1
    cfg = repo / "casstore.toml"
    cfg.write_text(cfg.read_text() + f"\n[redaction]\nallow = [{json.dumps('^' + example + '$')}]\n")
    r = casstore("add", str(p), cwd=repo)
    assert r.exit_code == 0, r.stdout + r.stderr
    assert casstore("check", cwd=repo).exit_code == 0


def test_hygiene_allow_by_file_and_rule_applies_to_add(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    p = repo / "tests" / "cassettes" / "fixture_keys.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(make_cassette("fixture_keys", recorded_at=ago(1), body={"k": aws_key()})))
    assert casstore("add", str(p), cwd=repo).exit_code == 1
    cfg = repo / "casstore.toml"
    cfg.write_text(cfg.read_text().replace(
        "[hygiene]\n", '[hygiene]\nallow = ["tests/cassettes/fixture_keys.json:aws-access-key-id"]\n', 1))
    assert casstore("add", str(p), cwd=repo).exit_code == 0


# -- check --since ---------------------------------------------------------------------------
def test_check_scans_pins_changed_since_a_base(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    old_secret, new_secret = aws_key(), openai_key()
    smuggle(repo, leaky_doc("legacy", old_secret, where="body"))  # already on main, out of range
    commit(repo, "main with an old leak")
    git("checkout", "-q", "-b", "pr", cwd=repo)
    smuggle(repo, leaky_doc("sneaky", new_secret))
    commit(repo, "lock only")
    # the README flow: no working copy in the commit, so only the pins can show it
    r = casstore("check", "--since", "main", cwd=repo)
    assert_one_line_per_finding(r, "sneaky", "$.entries[1].target", "openai-key", new_secret)
    assert "legacy" not in r.stdout + r.stderr
    rj = casstore("check", "--json", "--since", "main", cwd=repo)
    found = [f for f in rj.json["findings"] if f["kind"] == "secret"]
    assert {(f["cassette"], f["rule"], f["entry"]) for f in found} == {("sneaky", "openai-key", 1)}
    # no upstream: every pin is scanned
    r = casstore("check", cwd=repo)
    assert_one_line_per_finding(r, "legacy", "$.entries[1].response.body", "aws-access-key-id", old_secret)
    assert "sneaky" in r.stdout + r.stderr
    # an unknown base is a usage error
    r = casstore("check", "--since", "nope", cwd=repo)
    assert r.exit_code == 2 and "nope" in r.stderr


def test_check_defaults_to_the_merge_base_with_upstream_and_reads_the_remote(  # type: ignore[no-untyped-def]
        tmp_path: Path, repo: Path, casstore, s3_url: str, monkeypatch) -> None:
    cfg = repo / "casstore.toml"
    cfg.write_text(cfg.read_text().replace('url = ".casstore/store"', f"url = {json.dumps(s3_url)}"))
    old_secret = aws_key()
    smuggle(repo, leaky_doc("legacy", old_secret, where="body"))
    assert casstore("push", cwd=repo).exit_code == 0
    commit(repo, "main")
    clone = tmp_path / "clone"
    git("clone", "-q", str(repo), str(clone), cwd=tmp_path)
    git("checkout", "-q", "-b", "feature", "--track", "origin/main", cwd=clone)
    new_secret = openai_key()
    smuggle(clone, leaky_doc("sneaky", new_secret))
    assert casstore("push", cwd=clone).exit_code == 0
    commit(clone, "feature")
    # CI: a fresh cache, the objects come from the remote
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(tmp_path / "ci-cache"))
    r = casstore("check", cwd=clone)
    assert_one_line_per_finding(r, "sneaky", "$.entries[1].target", "openai-key", new_secret)
    assert "legacy" not in r.stdout + r.stderr
    # the documented CI line, as real processes
    env = dict(os.environ, CI="1", CASSTORE_CACHE_DIR=str(tmp_path / "ci-cache-2"))
    p = run_casstore_subprocess("pull", "--frozen", cwd=clone, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    p = run_casstore_subprocess("check", "--since", "origin/main", cwd=clone, env=env)
    assert p.returncode == 1 and "sneaky" in p.stdout + p.stderr and new_secret not in p.stdout + p.stderr


def test_pre_commit_hook_scans_the_pins_the_staged_lock_changes(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    assert casstore("hooks", "install", cwd=repo).exit_code == 0
    git("add", "-A", cwd=repo)
    assert git("commit", "-q", "-m", "set up", cwd=repo, check=False).returncode == 0
    # a clean pin commits with only the lock staged
    p = repo / "tests" / "cassettes" / "fine.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(make_cassette("fine", recorded_at=ago(1))))
    assert casstore("add", str(p), cwd=repo).exit_code == 0
    git("add", "casstore.lock", cwd=repo)
    res = git("commit", "-q", "-m", "a clean pin", cwd=repo, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    # a pin whose content holds a secret does not
    secret = openai_key()
    smuggle(repo, leaky_doc("sneaky", secret))
    git("add", "casstore.lock", cwd=repo)
    res = git("commit", "-q", "-m", "only the lock", cwd=repo, check=False)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "sneaky" in out and "(openai-key)" in out and "$.entries[1].target" in out
    assert secret not in out


@pytest.mark.parametrize("widening,rule", [
    ('[redaction]\nallow = ["{secret}"]\n', "redaction.allow adds"),
    ('[hygiene]\nallow = ["tests/cassettes/*:secret"]\n', "hygiene.allow adds"),
])
def test_a_branch_cannot_widen_the_rules_that_judge_it(repo: Path, casstore, widening: str, rule: str) -> None:  # type: ignore[no-untyped-def]
    commit(repo, "main")
    git("checkout", "-q", "-b", "pr", cwd=repo)
    secret = openai_key()
    smuggle(repo, leaky_doc("sneaky", secret))
    cfg = repo / "casstore.toml"
    text = cfg.read_text()
    section = widening.split("\n", 1)[0]
    extra = widening.split("\n", 1)[1].replace("{secret}", secret[:12])
    cfg.write_text(text.replace(section + "\n", section + "\n" + extra, 1) if section in text else text + widening)
    commit(repo, "allow my own secret")
    r = casstore("check", "--since", "main", cwd=repo)
    assert_one_line_per_finding(r, "sneaky", "$.entries[1].target", "openai-key", secret)
    assert f"widened since main: {rule}" in r.stdout, r.stdout
    # once the rule change is on main, it is main's rule
    git("checkout", "-q", "main", cwd=repo)
    git("merge", "-q", "--ff-only", "pr", cwd=repo)
    git("checkout", "-q", "-b", "next", cwd=repo)
    r = casstore("check", "--since", "main", cwd=repo)
    assert r.exit_code == 0 and "widened" not in r.stdout, r.stdout + r.stderr
