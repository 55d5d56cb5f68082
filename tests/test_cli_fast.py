"""`casstore add|verify|status|pull|push|check` run before click is imported (casstore.cli.fast):
the same parameters as click reads them, the same output and exit codes, and everything
else (help, usage errors, odd values) still click's.
"""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from casstore.cli import fast
from casstore.cli.main import cli
from tests.helpers.cassettes import leaky, write_cassette
from tests.helpers.commands import git


def _command(name: str) -> click.Command:
    with click.Context(cli) as ctx:
        cmd = cli.get_command(ctx, name)
    assert cmd is not None
    return cmd


@pytest.mark.parametrize("name", sorted(fast.SPECS))
def test_each_spec_is_its_click_command(name: str) -> None:
    spec, cmd = fast.SPECS[name], _command(name)
    flags, values, ints, args = {}, {}, {}, []
    for p in cmd.params:
        if isinstance(p, click.Argument):
            assert p.nargs == -1 and p.required == spec.exists  # (exists: at least one path, each existing)
            assert isinstance(p.type, click.Path) == spec.paths
            if spec.paths:
                assert isinstance(p.type, click.Path) and p.type.exists == spec.exists and p.type.type is Path
                assert p.type.readable and not (p.type.writable or p.type.executable or p.type.resolve_path)
                assert p.type.file_okay and p.type.dir_okay and p.type.allow_dash is False
            args.append(p.name)
            continue
        assert isinstance(p, click.Option) and not p.secondary_opts and p.envvar is None and not p.multiple
        into = flags if p.is_flag else ints if isinstance(p.type, click.IntRange) else values
        if isinstance(p.type, click.IntRange):
            assert (p.type.min, p.type.max, p.type.min_open, p.type.max_open) == (*fast.INT_RANGE, False, False)
        elif not p.is_flag:
            assert p.type is click.STRING and p.nargs == 1  # (defaults: compared by the test below)
        into.update(dict.fromkeys(p.opts, p.name))
    assert (flags, values, ints) == (spec.flags, spec.values, spec.ints)
    assert args == ([spec.args] if spec.args else [])


_TOKENS = ["--json", "--remote", "--offline", "--staged", "--frozen", "-q", "--quiet", "-v", "--verbose",
           "--trust-from", "--trust-from=main", "--since", "--since=HEAD~1", "-j", "--jobs", "--jobs=4",
           "--jobs=0", "4", "256", "257", "0", "04", "+4", "٤", "main", "suite/a", "x.json", "--", "-", "",
           "-qv", "-j4", "--json=1", "--help", "-h", "--bogus", "-x", "a b", "--trust-from=", "=x", ".", "tests"]


@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from(sorted(fast.SPECS)), argv=st.lists(st.sampled_from(_TOKENS), max_size=6))
def test_what_the_fast_parser_accepts_click_reads_the_same(name: str, argv: list[str]) -> None:
    kw = fast.parse(fast.SPECS[name], argv)
    if kw is None:
        return  # click parses it, as it always did
    with _command(name).make_context(name, list(argv)) as ctx:
        assert ctx.params == kw


@pytest.mark.parametrize("argv", [
    ["verify", "--help"], ["status", "-h"], ["pull", "-j", "0"], ["push", "--jobs=300"], ["pull", "-qv"],
    ["verify", "--", "suite/a"], ["check", "-"], ["verify", ""], ["verify", "--json=1"], ["verify", "--trust-from"],
    ["verify", "--trust-from", "a", "--trust-from", "b"], ["check", "--since="], ["status", "--bogus"],
    ["status", "suite/a"], ["show", "suite/a"], ["verfy"], [], ["--json", "verify"],
    ["add"], ["add", "--json"], ["add", "no-such-folder"], ["add", ".", "no/such.json"], ["add", "-h"],
    ["pull", "-j", "4" * 5000], ["push", "--jobs=" + "0" * 5000],  # int()'s 4300-digit limit: a ValueError here
])
def test_anything_else_is_left_to_click(argv: list[str]) -> None:
    spec = fast.SPECS.get(argv[0]) if argv else None
    assert spec is None or fast.parse(spec, argv[1:]) is None


@pytest.fixture
def pinned(repo: Path, casstore) -> Path:  # type: ignore[no-untyped-def]
    for name in ("suite/a", "suite/b"):
        write_cassette(repo, name)
    assert casstore("add", "tests/cassettes", cwd=repo).exit_code == 0
    assert casstore("push", cwd=repo).exit_code == 0  # so that push and pull change nothing below
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "pins", cwd=repo)
    return repo


def _fast(argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    monkeypatch.setattr(gc, "freeze", lambda: None)  # the test process's objects stay collectable
    capsys.readouterr()
    code = 0
    try:
        assert fast.run(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def _click(argv: list[str]) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, argv, prog_name="casstore", catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


@pytest.mark.parametrize("argv", [
    ["verify"], ["verify", "--json", "suite/a"], ["verify", "nosuch"], ["verify", "--trust-from", "HEAD"],
    ["verify", "--trust-from=no-such-rev"], ["status"], ["status", "--offline", "--json"], ["ls"], ["ls", "--json"],
    ["ls", "--remote"],
    ["push", "-q"], ["push", "--json", "-j", "2"], ["pull", "--frozen", "--jobs=3", "suite/b"], ["pull", "nosuch"],
    ["check", "--staged"], ["check", "--offline", "tests/cassettes/suite/a.json"], ["check", "--since", "HEAD", "--json"],
    ["add", "tests/cassettes"], ["add", "--json", "tests/cassettes/suite/b.json", "tests/cassettes/suite/a.json"],
    ["add", ".casstore"],
])
def test_the_fast_path_prints_and_exits_as_click(pinned: Path, argv: list[str], capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(pinned)
    assert _fast(argv, capsys, monkeypatch) == _click(argv)


def test_failures_end_as_under_click(pinned: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fake_key: str) -> None:
    monkeypatch.chdir(pinned)
    leaky(pinned, "suite/a", fake_key)
    git("add", "-A", cwd=pinned)
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(tmp_path / "empty-cache"))
    for argv in (["check", "--staged"], ["verify"], ["check", "--json", "--offline"], ["add", "tests/cassettes"]):
        got = _fast(argv, capsys, monkeypatch)
        assert got == _click(argv)
        assert got[0] == 1 and fake_key not in got[1] + got[2]
    monkeypatch.chdir(tmp_path)  # outside a project: exit 2, one line
    got = _fast(["status"], capsys, monkeypatch)
    assert got == _click(["status"]) and got[0] == 2 and got[2].count("\n") == 1


def test_a_real_add_verify_and_hook_check_load_no_click(pinned: Path) -> None:
    write_cassette(pinned, "suite/a", n=3)
    git("add", "-A", cwd=pinned)
    probe = ("import runpy, sys; sys.argv = ['casstore', *sys.argv[1:]]\n"
             "try:\n    runpy.run_module('casstore.cli', run_name='__main__')\n"
             "except SystemExit as exc:\n    print('EXIT', exc.code)\n"
             "print('CLICK', 'click' in sys.modules)")
    for args, needle in ((["verify"], "verified 2/2"), (["check", "--staged"], "checked 1 staged file(s)"),
                         (["add", "tests/cassettes"], "pinned suite/a "), (["verify", "--help"], "Usage: casstore verify")):
        r = subprocess.run([sys.executable, "-c", probe, *args], cwd=pinned, capture_output=True, text=True,
                           timeout=120, check=False)
        assert needle in r.stdout, r.stdout + r.stderr
        assert r.stdout.rstrip().endswith(f"CLICK {args[-1] == '--help'}"), r.stdout
