"""A change cannot vouch for itself (issue #16, item 3), in real git repositories.

The attack: one commit adds the author's own key to ``.casstore/trusted_keys`` and pins
cassettes signed only by it. Plain ``verify`` / ``pull`` accept that (the working tree's
trusted_keys lists the key); ``verify --trust-from main`` and ``pull --trust-from main``
check the signatures against trusted_keys *as it was on main* and refuse, one line per
cassette naming the signer. ``casstore diff`` lists the trust change (added/removed
signer, identity, key id) and ``check --since main`` warns about it.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from casstore.store.signing import key_id
from tests.helpers.cassettes import make_cassette
from tests.helpers.commands import git
from tests.helpers.figures import record
from tests.helpers.gitrepo import commit


def new_key(identity: str) -> tuple[str, str, str]:
    """(private text for CASSTORE_SIGNING_KEY, trusted_keys line, key id), made at run time."""
    priv = Ed25519PrivateKey.generate()
    pub = priv.public_key().public_bytes_raw()
    seed = base64.b64encode(priv.private_bytes_raw()).decode()
    return (f"{identity} ed25519-private {seed}", f"{identity} ed25519 {base64.b64encode(pub).decode()}",
            key_id(pub))


def write(repo: Path, name: str, answer: str) -> Path:
    path = repo / "tests" / "cassettes" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(make_cassette(name, body={"choices": [{"message": {"content": answer}}]})))
    return path


def one_line_refusals(r, names: list[str], *needles: str) -> None:  # type: ignore[no-untyped-def]
    assert r.exit_code == 1, (r.exit_code, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    for name in names:
        mine = [ln for ln in errors if f"{name}:" in ln]
        assert mine, (name, r.stderr)
        for n in needles:
            assert any(n in ln for ln in mine), (n, mine)
    record("trust from the base (CLI)", self_vouching_pins_refused=len(names))


@pytest.fixture
def attacked(repo: Path, casstore, monkeypatch, s3_url: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """main: x pinned by the maintainer's key. Branch `pr`: the attacker's key trusted and
    y pinned (and x re-pinned) by it alone, in one commit. Everything pushed to S3."""
    cfg = repo / "casstore.toml"
    cfg.write_text(cfg.read_text().replace('url = ".casstore/store"', f"url = {json.dumps(s3_url)}"))
    assert casstore("add", str(write(repo, "x", "reviewed answer")), cwd=repo).exit_code == 0
    assert casstore("push", cwd=repo).exit_code == 0
    commit(repo, "x pinned by the maintainer")
    git("checkout", "-q", "-b", "pr", cwd=repo)
    priv, line, kid = new_key("mallory@example.com")
    monkeypatch.setenv("CASSTORE_SIGNING_KEY", priv)
    assert casstore("keys", "trust", line, cwd=repo).exit_code == 0
    assert casstore("add", str(write(repo, "y", "unreviewed")), str(write(repo, "x", "swapped answer")),
                    cwd=repo).exit_code == 0
    assert casstore("push", cwd=repo).exit_code == 0
    commit(repo, "innocent-looking change")
    monkeypatch.delenv("CASSTORE_SIGNING_KEY")
    return {"keyid": kid, "identity": "mallory@example.com"}


def test_verify_and_pull_trust_from_the_base_refuse_a_self_vouching_change(
        repo: Path, casstore, attacked: dict[str, str], monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # what the issue found: the change passes when it is its own judge
    assert casstore("verify", cwd=repo).exit_code == 0
    r = casstore("verify", "--trust-from", "main", cwd=repo)
    one_line_refusals(r, ["x", "y"], attacked["identity"], attacked["keyid"], "main")
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(tmp_path / "ci-cache"))
    r = casstore("pull", "--frozen", "--trust-from", "main", cwd=repo)
    one_line_refusals(r, ["x", "y"], attacked["keyid"], "main")
    assert not any((tmp_path / "ci-cache").rglob("*.tmp"))
    # the same commit checked against its own trusted_keys: accepted (the rev is what matters)
    r = casstore("pull", "--frozen", "--trust-from", "HEAD", cwd=repo)
    assert r.exit_code == 0, r.stdout + r.stderr
    assert casstore("verify", "--trust-from", "HEAD", cwd=repo).exit_code == 0


def test_trust_from_accepts_pins_signed_by_a_key_trusted_at_the_base(repo: Path, casstore, s3_url) -> None:  # type: ignore[no-untyped-def]
    assert casstore("add", str(write(repo, "x", "one")), cwd=repo).exit_code == 0
    commit(repo, "x")
    git("checkout", "-q", "-b", "feature", cwd=repo)
    assert casstore("add", str(write(repo, "z", "two")), cwd=repo).exit_code == 0
    commit(repo, "z signed by the maintainer")
    r = casstore("verify", "--trust-from", "main", cwd=repo)
    assert r.exit_code == 0, r.stdout + r.stderr
    r = casstore("pull", "--frozen", "--trust-from", "main", cwd=repo)
    assert r.exit_code == 0, r.stdout + r.stderr


def test_trust_from_a_base_without_trusted_keys_refuses_every_pin(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    git("commit", "-q", "--allow-empty", "-m", "empty base", cwd=repo)
    git("tag", "base", cwd=repo)
    assert casstore("add", str(write(repo, "x", "one")), cwd=repo).exit_code == 0
    commit(repo, "x and trusted_keys")
    r = casstore("verify", "--trust-from", "base", cwd=repo)
    one_line_refusals(r, ["x"], "base")


def test_trust_from_an_unknown_revision_is_a_usage_error(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    assert casstore("add", str(write(repo, "x", "one")), cwd=repo).exit_code == 0
    commit(repo, "x")
    for cmd in (("verify",), ("pull",)):
        r = casstore(*cmd, "--trust-from", "no-such-branch", cwd=repo)
        assert r.exit_code == 2, (cmd, r.stdout, r.stderr)
        assert "no-such-branch" in r.stderr and "Traceback" not in r.stderr


def test_diff_lists_trust_changes(repo: Path, casstore, attacked: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    r = casstore("diff", "main", "HEAD", cwd=repo)
    assert r.exit_code == 0, r.stdout + r.stderr
    lines = [ln for ln in r.stdout.splitlines() if "trusted" in ln.lower() or attacked["keyid"] in ln]
    assert any("added" in ln and attacked["identity"] in ln and attacked["keyid"] in ln for ln in lines), r.stdout
    r = casstore("diff", "--json", "main", "HEAD", cwd=repo)
    trust = r.json["trust"]
    assert [(c["change"], c["identity"], c["keyid"]) for c in trust] == [
        ("added", attacked["identity"], attacked["keyid"])]
    # the other way round: a removal; and an identity change of the same key
    r = casstore("diff", "--json", "HEAD", "main", cwd=repo)
    assert [(c["change"], c["keyid"]) for c in r.json["trust"]] == [("removed", attacked["keyid"])]
    tk = repo / ".casstore" / "trusted_keys"
    tk.write_text(tk.read_text().replace("mallory@example.com", "mallory@evil.example"))
    r = casstore("diff", "--json", "HEAD", cwd=repo)
    assert [(c["change"], c["keyid"], c["identity"], c.get("old_identity")) for c in r.json["trust"]] == [
        ("identity", attacked["keyid"], "mallory@evil.example", "mallory@example.com")]
    r = casstore("diff", "HEAD", cwd=repo)
    assert "mallory@example.com" in r.stdout and "mallory@evil.example" in r.stdout


def test_diff_without_trust_changes_says_nothing_about_trust(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    assert casstore("add", str(write(repo, "x", "one")), cwd=repo).exit_code == 0
    commit(repo, "x")
    assert casstore("add", str(write(repo, "x", "two")), cwd=repo).exit_code == 0
    r = casstore("diff", "--json", cwd=repo)
    assert r.json["trust"] == []
    assert "trusted" not in casstore("diff", cwd=repo).stdout.lower()


def test_check_since_warns_when_the_range_changes_trust(repo: Path, casstore, attacked: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    r = casstore("check", "--since", "main", cwd=repo)
    out = r.stdout + r.stderr
    warn = [ln for ln in out.splitlines() if ln.startswith("warn") and "trusted_keys" in ln]
    assert warn and attacked["keyid"] in warn[0] and "--trust-from" in out, out
    r = casstore("check", "--json", "--since", "main", cwd=repo)
    kinds = [f["kind"] for f in r.json["findings"] if f["level"] == "warning"]
    assert "trust" in kinds
    # no trust change in the range: no warning
    r = casstore("check", "--since", "HEAD", cwd=repo)
    assert "trusted_keys" not in r.stdout + r.stderr


def test_the_refusal_says_what_the_reviewer_runs_to_trust_the_new_signer(  # type: ignore[no-untyped-def]
        repo: Path, casstore, attacked: dict[str, str], monkeypatch, tmp_path: Path) -> None:
    """A teammate's first change, signed by a key main does not trust yet: the refusal names
    the command that trusts it on main; run there and merged, the change passes."""
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(tmp_path / "ci-cache"))
    for cmd in ("pull", "verify"):
        r = casstore(cmd, *(("--frozen",) if cmd == "pull" else ()), "--trust-from", "main", cwd=repo)
        assert r.exit_code == 1, r.stderr
        advice = [ln for ln in r.stderr.splitlines() if ln.startswith("to accept mallory@example.com as a signer")]
        assert len(advice) == 1, r.stderr
        assert "merged into main first: `casstore keys trust 'mallory@example.com ed25519 " in advice[0], advice
        assert "docs/security.md" in advice[0]
    key_line = advice[0].split("`casstore keys trust '", 1)[1].split("'`", 1)[0]
    git("checkout", "-q", "main", cwd=repo)
    assert casstore("keys", "trust", key_line, cwd=repo).exit_code == 0
    commit(repo, "trust mallory")
    git("checkout", "-q", "pr", cwd=repo)
    r = casstore("pull", "--frozen", "--trust-from", "main", cwd=repo)
    assert r.exit_code == 0, r.stdout + r.stderr
