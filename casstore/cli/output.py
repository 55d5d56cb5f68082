"""How every command ends: a result as JSON (``--json``), or ``error:`` lines and an exit code.

Errors raised as :class:`~casstore.errors.CasstoreError` end in :func:`report_error` (one
``error:`` line per line of the message, the error's exit code): the click group calls it;
:func:`fail` is for a command that collected several problems itself.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..errors import CasstoreError

__all__ = ["echo", "emit_json", "fail", "report_error"]


def echo(message: str = "", *, err: bool = False) -> None:
    """A line on stdout (stderr)."""
    click.echo(message, err=err)


def emit_json(obj: Any) -> None:
    """A result (a dataclass or ``to_dict()`` object, a list of them, or plain data) as
    indented JSON with sorted keys on stdout."""
    from ..ops.results import as_json  # only when --json is asked for (start-up time)

    echo(json.dumps(as_json(obj), indent=2, sort_keys=True, default=str))


def fail(lines: list[str], code: int = 1) -> None:
    """One ``error:`` line per problem (URLs masked) on stderr, then exit ``code``."""
    from ..model.urls import mask_url

    for line in lines:
        echo(f"error: {mask_url(line)}", err=True)
    sys.exit(code)


def report_error(exc: CasstoreError) -> int:
    """``exc`` as ``error:`` lines on stderr (one per line of its message: one per finding,
    URLs masked); returns its exit code."""
    from ..model.urls import mask_url

    for line in str(exc).splitlines() or [""]:
        echo(f"error: {mask_url(line)}", err=True)
    return exc.exit_code
