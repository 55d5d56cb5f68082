"""How every command ends: a result as JSON (``--json``), or ``error:`` lines and an exit code.

Errors raised as :class:`~casstore.errors.CasstoreError` end in the group's handler
(one ``error:`` line per line of the message, the error's exit code); :func:`fail` is for
a command that collected several problems itself.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ..model.urls import mask_url

__all__ = ["emit_json", "fail"]


def emit_json(obj: Any) -> None:
    """A result (a dataclass or ``to_dict()`` object, a list of them, or plain data) as
    indented JSON with sorted keys on stdout."""
    from ..ops.results import as_json  # only when --json is asked for (start-up time)

    click.echo(json.dumps(as_json(obj), indent=2, sort_keys=True, default=str))


def fail(lines: list[str], code: int = 1) -> None:
    """One ``error:`` line per problem (URLs masked) on stderr, then exit ``code``."""
    for line in lines:
        click.echo(f"error: {mask_url(line)}", err=True)
    sys.exit(code)
