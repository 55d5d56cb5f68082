"""How every command ends: a result as JSON (``--json``), or ``error:`` lines and an exit code;
and the options several commands share."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..errors import CasstoreError
    from ..project import Project

__all__ = ["emit_json", "fail", "report_error", "json_option", "progress_options", "rule_counts", "write_text", "project"]

def project() -> Project:
    """The project the command runs in; outside one: exit 2, `run casstore init`."""
    from ..project import Project

    return Project.require()


json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


def progress_options(f: Any) -> Any:
    f = click.option("-v", "--verbose", is_flag=True,
                     help="One line per object on stderr (the default in a log is one summary line).")(f)
    return click.option("-q", "--quiet", is_flag=True, help="No progress output.")(f)


def rule_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{rule}×{n}" for rule, n in sorted(counts.items()))


def write_text(path: Path, text: str) -> None:
    """A page or a review written to ``path``; a path that cannot be written is a usage error."""
    from ..errors import UsageError

    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def emit_json(obj: Any) -> None:
    """A result (a dataclass or ``to_dict()`` object, a list of them, or plain data) as
    indented JSON with sorted keys on stdout."""
    from ..ops.results import as_json  # only when --json is asked for (start-up time)

    click.echo(json.dumps(as_json(obj), indent=2, sort_keys=True, default=str))


def _error_lines(lines: list[str]) -> None:
    from ..model.urls import mask_url

    for line in lines:
        click.echo(f"error: {mask_url(line)}", err=True)


def fail(lines: list[str], code: int = 1) -> None:
    """One ``error:`` line per problem (URLs masked) on stderr, then exit ``code``."""
    _error_lines(lines)
    sys.exit(code)


def report_error(exc: CasstoreError) -> int:
    """``exc`` as ``error:`` lines on stderr (one per line of its message); returns its exit code."""
    _error_lines(str(exc).splitlines() or [""])
    return exc.exit_code
