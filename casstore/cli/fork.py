"""``casstore fork``: a thin click layer over :mod:`casstore.ops.fork`."""

from __future__ import annotations

import click

from ..model.numerals import counted
from ..ops.fork import fork
from .output import emit_json, json_option, project

__all__ = ["fork_cmd"]


@click.command("fork")
@click.argument("name")
@click.option("--at", "at", type=click.IntRange(min=0), required=True, help="The call (entry seq, 0-based) to change.")
@click.option("--set", "sets", multiple=True, required=True, metavar="PATH=VALUE",
              help="Change call K's response, e.g. response.status=429 (repeatable).")
@click.option("--as", "new_name", required=True, help="The new cassette's name (its working copy is written).")
@click.option("--force", is_flag=True, help="Replace an existing working copy of NEW.")
@json_option
def fork_cmd(name: str, at: int, sets: tuple[str, ...], new_name: str, force: bool, as_json: bool) -> None:
    """Fork cassette NAME at call K with a changed response, as NEW.

    NEW holds NAME's calls before K and call K changed; replay NEW in record-new mode to
    record what the program does after K (the calls that diverge).
    """
    result = fork(project(), name, at, list(sets), new_name, force=force)
    if as_json:
        emit_json(result)
        return
    click.echo(f"forked {result.parent} at call {result.at} -> {result.path} ({counted(result.entries, 'entry', 'entries')})")
    for change in result.changes:
        click.echo(f"  set {change}")
    click.echo(f'next: CASSTORE_MODE=record-new pytest …  (or casstore.use("{result.name}", mode="record-new"))')
