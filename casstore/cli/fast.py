"""The everyday command lines, run before click is imported.

``casstore add``, ``verify``, ``status``, ``ls``, ``pull``, ``push`` and ``check`` (the
pre-commit hook runs ``check --staged`` on every commit) are everyday commands whose time is
mostly start-up up to a few thousand cassettes, and importing click and building the command
group is ~25-30 ms of it (docs/benchmarks.md, "Scale"). A command line made only of such a
command's own flags, its ``--option VALUE`` (or ``--option=VALUE``) pairs and plain
arguments has one meaning under click, and runs here: the same function
(:mod:`casstore.cli.commands`), the same output (click's ``echo``, see
:func:`casstore.cli.output.echo`), the same ``error:`` lines and exit codes.

Anything else goes to click as before: ``--help``, a typo, a missing or odd value (a value
option twice, an empty value, ``-j 0``, ``-qv``, ``--``, an argument starting with ``-``),
``add`` with no path or a path that does not exist, shell completion, Windows. So click's
help, its usage errors (exit 2, one line) and every conversion it would refuse are
unchanged: this module only ever declines.
``tests/test_cli_fast.py`` checks that each spec below matches its click command's
parameters, and that both paths print the same and exit the same.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["SPECS", "Spec", "parse", "run"]


class Spec:
    """One command's parameters as click declares them (tests/test_cli_fast.py compares)."""

    __slots__ = ("flags", "values", "ints", "args", "paths", "exists")

    def __init__(self, flags: dict[str, str], values: dict[str, str], ints: dict[str, str], args: str | None,
                 *, paths: bool = False, exists: bool = False) -> None:
        self.flags = flags  # a boolean flag -> its parameter
        self.values = values  # an option taking one string -> its parameter
        self.ints = ints  # an option taking an integer in 1..256 (click.IntRange(1, 256))
        self.args = args  # the name of the one ``nargs=-1`` argument, or None
        self.paths = paths  # its values are click.Path(path_type=Path), not required to exist ...
        self.exists = exists  # ... or required to exist, and then at least one is (required=True)


_JOBS = {"-j": "jobs", "--jobs": "jobs"}
_QUIET = {"-q": "quiet", "--quiet": "quiet", "-v": "verbose", "--verbose": "verbose"}

SPECS: dict[str, Spec] = {
    "add": Spec({"--json": "as_json"}, {}, {}, "paths", paths=True, exists=True),
    "verify": Spec({"--remote": "remote", "--json": "as_json"}, {"--trust-from": "trust_from"}, {}, "names"),
    "status": Spec({"--offline": "offline", "--json": "as_json"}, {}, {}, None),
    "ls": Spec({"--remote": "remote", "--json": "as_json"}, {}, {}, None),
    "pull": Spec({"--frozen": "frozen", "--json": "as_json", **_QUIET}, {"--trust-from": "trust_from"}, _JOBS,
                 "names"),
    "push": Spec({"--json": "as_json", **_QUIET}, {}, _JOBS, "names"),
    "check": Spec({"--staged": "staged", "--offline": "offline", "--json": "as_json"}, {"--since": "since"}, {},
                  "paths", paths=True),
}
INT_RANGE = (1, 256)


def parse(spec: Spec, argv: list[str]) -> dict[str, Any] | None:
    """The keyword arguments click would pass for ``argv`` (the command's own arguments), or
    None where this parser does not vouch for click's reading (click then parses it)."""
    kw: dict[str, Any] = dict.fromkeys(spec.flags.values(), False)
    kw.update(dict.fromkeys([*spec.values.values(), *spec.ints.values()]))
    plain: list[str] = []
    given: set[str] = set()
    i = 0
    while i < len(argv):
        tok = argv[i]
        i += 1
        if not tok.startswith("-"):
            if spec.args is None or not tok:
                return None
            plain.append(tok)
            continue
        if tok in spec.flags:
            kw[spec.flags[tok]] = True
            continue
        opt, eq, value = tok.partition("=")
        if not (eq and opt.startswith("--")):  # `--opt VALUE` (a short option only so)
            if i >= len(argv):
                return None
            opt, value = tok, argv[i]
            i += 1
            if value.startswith("-"):
                return None
        name = spec.values.get(opt) or spec.ints.get(opt)
        if name is None or name in given or not value:
            return None
        given.add(name)
        if opt in spec.ints:
            from ..model.numerals import ascii_int  # a tiny module, on the int options' path only

            n = ascii_int(value)
            if n is None or not INT_RANGE[0] <= n <= INT_RANGE[1]:
                return None
            kw[name] = n
        else:
            kw[name] = value
    if spec.args is not None:
        if spec.paths:
            from pathlib import Path

            if spec.exists and not plain:  # click: "Missing argument"
                return None
            for p in plain:  # what click.Path refuses, with its message:
                if not os.path.exists(p):  # (os.stat fails) a missing path, with exists=True
                    if spec.exists:
                        return None
                elif not os.access(p, os.R_OK):  # an existing path it cannot read
                    return None
            kw[spec.args] = tuple(Path(p) for p in plain)
        else:
            kw[spec.args] = tuple(plain)
    return kw


def run(argv: list[str]) -> bool:
    """Run ``casstore ARGV`` here if it is one of the command lines above; False: click's."""
    if not argv or sys.platform == "win32" or "_CASSTORE_COMPLETE" in os.environ:
        return False
    spec = SPECS.get(argv[0])
    kw = parse(spec, argv[1:]) if spec is not None else None
    if kw is None:
        return False
    from ..errors import CasstoreError
    from . import commands
    from .output import echo, report_error

    command: Callable[..., None] = getattr(commands, argv[0])
    try:  # what the click group and click's standalone mode make of the same outcomes
        command(**kw)
    except CasstoreError as exc:
        sys.exit(report_error(exc))
    except BrokenPipeError:
        sys.exit(1)
    except (EOFError, KeyboardInterrupt):
        echo(err=True)
        echo("Aborted!", err=True)
        sys.exit(1)
    finally:
        import gc

        gc.freeze()  # as casstore.cli.main.main: no collection walks the start-up's objects at exit
    return True
