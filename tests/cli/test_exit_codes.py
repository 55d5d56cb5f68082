"""docs/cli.md's exit-code table, enforced over every command of the CLI.

0 ok · 1 a check failed · 2 usage or configuration. The table names every command (a new
command without a row fails here); each command is then run the ways a user gets it
wrong: an unknown option, outside a casstore project, an unknown cassette name, a remote
that cannot be used. Each must exit 2 with one line that says what to do.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from casstore.cli import cli
from tests.helpers.cassettes import write_cassette
from tests.helpers.commands import REPO, git

DOC = REPO / "docs" / "cli.md"


def all_commands(group: click.Group = cli, prefix: str = "") -> dict[str, click.Command]:
    ctx = click.Context(group)
    out: dict[str, click.Command] = {}
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        full = f"{prefix}{name}"
        if isinstance(cmd, click.Group):
            out.update(all_commands(cmd, full + " "))
        else:
            out[full] = cmd
    return out


def table_rows() -> dict[str, dict[str, str]]:
    """``{command: {"needs": ..., "1": ..., "2": ...}}`` from the table in docs/cli.md."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## Exit codes")
    rows: dict[str, dict[str, str]] = {}
    header: list[str] = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("## "):
            break
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not header:
            header = [c.lower() for c in cells]
            continue
        if set(cells[0]) <= set("-: "):
            continue
        m = re.fullmatch(r"`casstore ([a-z -]+?)`(?: .*)?", cells[0])
        assert m, f"row does not name a command: {line}"
        rows[m.group(1)] = dict(zip(header[1:], cells[1:], strict=True))
    return rows


def test_every_command_has_a_row_and_every_row_a_command() -> None:
    rows, cmds = table_rows(), all_commands()
    missing, stale = sorted(set(cmds) - set(rows)), sorted(set(rows) - set(cmds))
    assert not missing, f"add a row to the exit-code table of docs/cli.md for: {missing}"
    assert not stale, f"docs/cli.md's exit-code table names commands that do not exist: {stale}"


# -- the ways of getting it wrong -------------------------------------------------------
NEEDS_PROJECT = [name for name, row in table_rows().items() if row.get("project") == "yes"]
TAKES_NAME = {  # command -> argv with an unknown cassette name
    "show": ["show", "triage_hapy_path"],
    "log": ["log", "triage_hapy_path"],
    "export": ["export", "triage_hapy_path"],
    "view": ["view", "triage_hapy_path"],
    "push": ["push", "triage_hapy_path"],
    "pull": ["pull", "triage_hapy_path"],
    "verify": ["verify", "triage_hapy_path"],
}


@pytest.mark.parametrize("name", sorted(all_commands()))
def test_an_unknown_option_exits_2(name: str, casstore, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = casstore(*name.split(), "--no-such-option", cwd=tmp_path)
    assert r.exit_code == 2, (name, r.stdout, r.stderr)


@pytest.mark.parametrize("name", NEEDS_PROJECT)
def test_outside_a_project_says_run_casstore_init(name: str, casstore, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    git("init", "-q", cwd=tmp_path)  # a git repository, but no casstore.toml
    args = {"show": ["x"], "log": ["x"], "export": ["x"], "add": ["."], "import vcr": ["."],
            "import jsonl": ["x.jsonl", "--name", "x"], "keys trust": ["k"],
            "fork": ["x", "--at", "0", "--set", "response.status=500", "--as", "y"]}.get(name, [])
    r = casstore(*name.split(), *args, cwd=tmp_path)
    assert r.exit_code == 2, (name, r.stdout, r.stderr)
    assert "run `casstore init`" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "casstore.toml").exists() and not (tmp_path / "casstore.lock").exists()


@pytest.mark.parametrize("name", sorted(TAKES_NAME))
def test_an_unknown_name_exits_2_and_suggests_the_closest(name: str, repo: Path, casstore) -> None:  # type: ignore[no-untyped-def]
    write_cassette(repo, "triage_happy_path")
    write_cassette(repo, "billing_refund")
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "pins", cwd=repo)
    r = casstore(*TAKES_NAME[name], cwd=repo)
    assert r.exit_code == 2, (name, r.stdout, r.stderr)
    assert "triage_hapy_path" in r.stderr
    assert "did you mean triage_happy_path?" in r.stderr, r.stderr
    assert "billing_refund" not in r.stderr
