"""How every command ends: a result as JSON (``--json``), or ``error:`` lines and an exit code.

Errors raised as :class:`~casstore.errors.CasstoreError` end in :func:`report_error` (one
``error:`` line per line of the message, the error's exit code): the click group calls it,
and so does :mod:`casstore.cli.fast`; :func:`fail` is for a command that collected several
problems itself.

No click here: :func:`echo` writes text as ``click.echo`` does, so that the commands
:mod:`casstore.cli.fast` runs before click is imported print exactly what they print under
click (and click is imported only for what it does differently: see :func:`echo`).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..errors import CasstoreError

__all__ = ["echo", "emit_json", "fail", "report_error"]

_PLAIN: dict[str, bool] = {}  # stream encoding -> written as it is (not ASCII, which click rewraps)


def _plain(stream: Any) -> bool:
    """Whether click.echo would write to ``stream`` as it is: a text stream whose encoding is
    not ASCII (click rewraps an ASCII one as UTF-8), off Windows (its console streams)."""
    enc = getattr(stream, "encoding", None)
    if not isinstance(enc, str) or sys.platform == "win32":
        return False
    plain = _PLAIN.get(enc)
    if plain is None:
        import codecs

        try:
            plain = codecs.lookup(enc).name != "ascii"
        except LookupError:
            plain = False
        _PLAIN[enc] = plain
    return plain


def echo(message: str = "", *, err: bool = False) -> None:
    """``click.echo(message, err=err)`` for text: the line on stdout (stderr), flushed.

    What click does differently (an ASCII or non-text stream, the Windows console, ANSI
    codes it strips or keeps) is left to click itself, imported only then."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:  # no stream to write to (click writes nothing either)
        return
    if "\x1b" in message or not _plain(stream):
        import click

        click.echo(message, err=err)
        return
    stream.write(message + "\n")
    stream.flush()


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
