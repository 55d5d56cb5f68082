"""`casstore diff --format markdown` and `--html`: the review of a change to the recordings, in
real git repositories (the HTML read in headless chromium after its script ran)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from casstore.ops.diff import diff_markdown
from tests.helpers.browser import Browser, needs_chromium
from tests.helpers.gitrepo import commit, pin

PAYLOAD = "</script><img src=x onerror=\"window.__pwned='diff'\"> | `tick` <!--"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    b = Browser()
    yield b
    b.close()


def _rerecord(casstore, repo: Path) -> None:  # type: ignore[no-untyped-def]
    """HEAD~1: triage (2 calls) and other; HEAD: triage with new answers and a replaced call."""
    pin(casstore, repo, "triage", prompts=["refund order 7", "where is my parcel"])
    pin(casstore, repo, "other", n=1)
    commit(repo, "record")
    pin(casstore, repo, "triage", answer=PAYLOAD, prompts=["refund order 7", "cancel my subscription"])
    commit(repo, "re-record")


def test_markdown_review_has_the_fields_side_by_side(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    _rerecord(casstore, repo)
    r = casstore("diff", "HEAD~1", "HEAD", "--format", "markdown", cwd=repo)
    assert r.exit_code == 0, r.stderr
    md = r.stdout
    assert md.startswith("### casstore: recorded calls, HEAD~1 → HEAD")
    assert "#### ✏️ triage (changed)" in md and "other" not in md
    assert "- entries: 2 → 2; calls: +1 -1 ~1 =0" in md
    assert "| field | before | after |" in md
    # the changed answer, side by side: markup escaped, the table and code spans unbroken
    row = next(line for line in md.splitlines() if "choices\\[0\\].message.content" in line)
    assert len(re.findall(r"(?<!\\)\|", row)) == 4, row  # | path | before | after |: the payload's pipe escaped
    assert "&lt;/script&gt;&lt;img src=x onerror=" in row and "\\| \\`tick\\`" in row
    assert "<" not in md  # no raw HTML (nor a comment that hides the rest) reaches the PR comment


def test_markdown_is_capped_with_a_line_saying_what_was_left_out(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    pin(casstore, repo, "big", n=400)
    commit(repo, "one")
    pin(casstore, repo, "big", n=400, answer="x" * 300)
    r = casstore("diff", "--format", "markdown", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert len(r.stdout) <= 60_000
    last = r.stdout.rstrip("\n").splitlines()[-1]
    assert last.startswith("*Left out to fit: ") and "casstore diff --html" in last, last
    small = diff_markdown({"old": "a", "new": "b", "unchanged": 0, "trust": [], "cassettes": []}, cap=1000)
    assert "No cassette changed" in small


def test_markdown_names_trust_model_and_signer_changes() -> None:
    data = {"old": "main", "new": "HEAD", "unchanged": 3,
            "trust": [{"change": "added", "keyid": "ed25519:abcd", "identity": "mallory@example.com"}],
            "cassettes": [{"name": "triage", "status": "changed", "old_digest": "sha256:1", "new_digest": "sha256:2",
                           "old_entries": 1, "new_entries": 1, "unchanged": 0, "old_signers": ["alice"],
                           "new_signers": ["mallory"], "error": None, "old_models": ["gpt-4o"],
                           "new_models": ["gpt-4o-mini"], "calls": []}]}
    md = diff_markdown(data)
    assert "- **trusted keys**: added ed25519:abcd mallory@example.com" in md
    assert "- models: gpt-4o → gpt-4o-mini" in md
    assert "- signers: alice → mallory" in md


@needs_chromium
def test_html_review_in_the_browser(repo: Path, casstore, browser: Browser) -> None:  # type: ignore[no-untyped-def]
    _rerecord(casstore, repo)
    r = casstore("diff", "HEAD~1", "HEAD", "--html", "-o", "review.html", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert "wrote review.html (1 cassette(s) changed)" in r.stdout
    browser.events.clear()
    browser.open(repo / "review.html")
    sections = browser.eval("Array.from(document.querySelectorAll('section.change')).map(s => [s.dataset.name, s.dataset.status])")
    assert sections == [["triage", "changed"]]
    calls = browser.eval("Array.from(document.querySelectorAll('div.call')).map(c => c.dataset.change + ' #' + c.dataset.seq)")
    assert sorted(calls) == ["added #1", "changed #0", "removed #1"]
    pairs = browser.eval("Array.from(document.querySelectorAll('tr.pair')).map(r => Array.from(r.children).map(c => c.textContent))")
    assert ["response.body.choices[0].message.content", "answer 0", PAYLOAD] in pairs, pairs
    assert browser.eval("window.__pwned === undefined") is True and browser.dialogs() == []
    assert browser.eval("document.querySelectorAll('main img, main script').length") == 0
    assert browser.requests() == [(repo / "review.html").resolve().as_uri()]


@pytest.mark.parametrize("args", [["--html", "--json"], ["--format", "markdown", "--html"], ["-o", "x.md"]])
def test_output_options_that_do_not_go_together_exit_2(repo: Path, casstore, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    r = casstore("diff", *args, cwd=repo)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert not (repo / "x.md").exists()


def test_json_and_text_output_are_unchanged_by_the_new_options(repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    _rerecord(casstore, repo)
    r = casstore("diff", "HEAD~1", "HEAD", "--json", cwd=repo)
    assert set(json.loads(r.stdout)) == {"old", "new", "unchanged", "cassettes", "trust"}
