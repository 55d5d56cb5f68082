"""``casstore import vcr|jsonl`` and ``casstore export``: a thin click layer over casstore.interop."""

from __future__ import annotations

from pathlib import Path

import click

from ..interop.export import export_cassette
from ..interop.imports import ImportedCassette, import_jsonl, import_vcr
from ..interop.jsonl import FIELDS, parse_base_urls, parse_mapping
from ..model.fsutil import atomic_write
from ..model.numerals import counted
from .output import emit_json, json_option, project, rule_counts

__all__ = ["import_group", "export_cmd"]


def _report(results: list[ImportedCassette], as_json: bool, add: bool) -> None:
    if as_json:
        emit_json(results)
        return
    for r in results:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(r.kinds.items())) or "no calls"
        click.echo(f"imported {' + '.join(r.sources)} -> {r.path}: {counted(r.entries, 'entry', 'entries')} ({kinds})")
        if r.interactions is not None:
            click.echo(f"  {r.replayed} of {r.interactions} interactions replay")
        total = sum(r.redaction_hits.values())
        click.echo("  redacted: " + (f"{rule_counts(r.redaction_hits)} ({total} in all)" if total else "nothing"))
        for note in r.notes:
            click.echo(f"  note: {note}")
        if r.digest:
            click.echo(f"  pinned {r.name} {r.digest[:19]}" + (f" signed by {r.signed_by}" if r.signed_by else " (unsigned)"))
    if not add and results:
        paths = " ".join(r.path for r in results)
        click.echo(f"next: review, then `casstore add {paths}` (or import with --add)")


@click.group(name="import")
def import_group() -> None:
    """Import recordings made by other tools (vcrpy cassettes, JSONL traces)."""


@import_group.command("vcr")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--name", metavar="NAME", help="Cassette name (one file only). Default: the file's stem.")
@click.option("--add", "add", is_flag=True, help="Pin the imported cassettes in casstore.lock right away.")
@click.option("--force", is_flag=True,
              help="Replace existing working copies of the same name; import calls that would not replay.")
@json_option
def import_vcr_cmd(paths: tuple[Path, ...], name: str | None, add: bool, force: bool, as_json: bool) -> None:
    """Import vcrpy / pytest-recording cassettes (YAML or JSON), files or folders.

    Each file becomes the working copy <cassette dir>/<name>.json, named after the file
    (legacy.yaml -> legacy; in a folder, the path below it). Identities are computed as
    if the calls had gone through casstore, so requests/httpx code replays them under
    casstore.use(name). Secrets are redacted on the way in. All or nothing: a malformed
    file, or a body casstore cannot read, is reported with its line and nothing is written.
    Every imported call is then looked up as a replay would look it up; a call that would
    miss is named and stops the import, unless --force.
    """
    results = import_vcr(project(), list(paths), name=name, add=add, force=force)
    _report(results, as_json, add)


@import_group.command("jsonl")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--name", required=True, metavar="NAME", help="The cassette to create.")
@click.option("--map", "maps", multiple=True, metavar="FIELD=PATH",
              help=f"Where a field lives in each record, as a dot-path (fields: {', '.join(FIELDS)}). Repeatable.")
@click.option("--base-url", "base_urls", multiple=True, metavar="[openai=|anthropic=]URL",
              help="The SDK base_url the calls replay under (OpenAI's ends in /v1, Anthropic's does not). "
                   "Default: the providers' public APIs. Repeatable, once per provider.")
@click.option("--add", "add", is_flag=True, help="Pin the imported cassette in casstore.lock right away.")
@click.option("--force", is_flag=True, help="Replace an existing working copy of the same name.")
@json_option
def import_jsonl_cmd(paths: tuple[Path, ...], name: str, maps: tuple[str, ...], base_urls: tuple[str, ...],
                     add: bool, force: bool, as_json: bool) -> None:
    """Import JSONL call logs (one call a line) as one cassette.

    Records hold kind, model or tool, request, response and timestamp; OpenAI and
    Anthropic request/response bodies and tool calls are understood as they are
    (see docs/migrating.md), other shapes with --map, e.g.
    --map request=input.payload --map response=output.
    """
    result = import_jsonl(project(), list(paths), name=name, mapping=parse_mapping(maps),
                                  base_urls=parse_base_urls(base_urls), add=add, force=force)
    _report([result], as_json, add)


@click.command("export")
@click.argument("name")
@click.option("--format", "fmt", type=click.Choice(["json", "vcr"]), default="json", show_default=True,
              help="json: the format-v1 working copy; vcr: a vcrpy YAML cassette (HTTP entries).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE instead of stdout.")
def export_cmd(name: str, fmt: str, output: Path | None) -> None:
    """Write a readable copy of a cassette (pinned first, else the working copy)."""
    data, notes = export_cassette(project(), name, fmt)
    if output is None:
        click.echo(data, nl=False)  # bytes go to the binary stdout as they are
    else:
        atomic_write(output, data)
        click.echo(f"wrote {output} ({len(data)} bytes)", err=True)
    for note in notes:
        click.echo(f"note: {note}", err=True)
