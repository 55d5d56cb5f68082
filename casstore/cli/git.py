"""``casstore diff``, ``log``, ``gc`` and the hidden drivers git runs."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

import click

from ..errors import UsageError
from ..git.drivers import merge_files, register, textconv
from ..model.lock import shown
from ..model.numerals import counted
from ..ops import gc
from ..store.transfer import make_reporter
from .output import emit_json, fail, json_option, progress_options, project, write_text

__all__ = ["diff_cmd", "log_cmd", "gc_cmd", "textconv_cmd", "merge_lock_cmd", "drivers_cmd"]


def _size(n: int) -> str:
    size, unit = float(n), "B"
    for bigger in ("KiB", "MiB", "GiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"


def _age(seconds: float) -> str:
    s = int(seconds)
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s // n}{unit}"
    return f"{s}s"


# -- diff -------------------------------------------------------------------------------------
@click.command("diff")
@click.argument("revs", nargs=-1, metavar="[REV [REV]]")
@json_option
@click.option("--format", "fmt", type=click.Choice(["text", "markdown"]), default="text", show_default=True,
              help="markdown: a review for a pull-request comment or $GITHUB_STEP_SUMMARY (capped in size).")
@click.option("--html", "as_html", is_flag=True, help="Write the review as a self-contained HTML page (to -o PATH, else standard output).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the markdown or HTML review here (default: standard output).")
def diff_cmd(revs: tuple[str, ...], as_json: bool, fmt: str, as_html: bool, output: Path | None) -> None:
    """Which recorded calls changed, cassette by cassette.

    \b
    casstore diff              working casstore.lock vs HEAD
    casstore diff REV          working casstore.lock vs REV
    casstore diff REV1 REV2    REV1 vs REV2
    Calls are matched by identity: added, removed, and changed (with the fields that
    differ). Only the lock needs to be in git: cassettes come from the cache, else the store.
    """
    from ..ops.diff import diff

    if len(revs) > 2:
        raise UsageError("casstore diff takes at most two revisions")
    if sum((as_json, as_html, fmt != "text")) > 1:
        raise UsageError("choose one of --json, --html and --format markdown")
    if output is not None and not (as_html or fmt != "text"):
        raise UsageError("-o writes the --html or --format markdown review")
    report = diff(project(), revs)
    if as_html or fmt == "markdown":
        text = report.review(html=as_html)
        if output is None:
            click.echo(text, nl=False)
        else:
            write_text(output, text)
            click.echo(f"wrote {output} ({len(report.result.cassettes)} cassette(s) changed)")
    elif as_json:
        emit_json(report.to_json())
    else:
        click.echo(report.text(), nl=False)
    if report.result.errors:
        fail([f"calls not compared for {e}" for e in report.result.errors])


# -- log --------------------------------------------------------------------------------------
@click.command("log")
@click.argument("name")
@click.option("--rev", default="HEAD", show_default=True, help="Walk the history reachable from this revision.")
@json_option
def log_cmd(name: str, rev: str, as_json: bool) -> None:
    """History of a cassette's pins: commit, date, digest, entries, signer."""
    from ..ops.log import log

    rows = log(project(), name, rev)
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        signers = ", ".join(map(shown, r["signers"])) or "unsigned"  # lock text: escaped
        digest = (r["digest"] or "-")[:19]
        click.echo(f"{r['commit'][:12]}  {r['date']}  {r['action']:<9} {digest}  {counted(r['entries'], 'entry', 'entries')}  "
                   f"signed by {signers}  {r['subject']}")


# -- gc ---------------------------------------------------------------------------------------
@click.command("gc")
@click.option("--dry-run", "-n", is_flag=True, help="List what would be deleted; delete nothing.")
@click.option("--grace", default=gc.DEFAULT_GRACE, show_default=True, metavar="DURATION",
              help="Keep unpinned objects younger than this: 0, 30m, 24h, 7d.")
@click.option("--remote", is_flag=True, help="Sweep the remote store too (it must serve this repository only).")
@click.option("-j", "--jobs", type=click.IntRange(1, 256), help="Parallel deletions on the store.")
@json_option
@progress_options
def gc_cmd(dry_run: bool, grace: str, remote: bool, jobs: int | None, as_json: bool, quiet: bool,
           verbose: bool) -> None:
    """Delete objects that no commit of any ref pins, once older than the grace period.

    Marks every digest pinned by casstore.lock in every commit reachable from any ref
    (branches, tags, remote-tracking refs), the staged lock and the working lock; then
    sweeps the rest from the local cache and, with --remote, from the store (with their
    signature envelopes). Fetch first, so that remote-tracking refs are current.
    """
    rep = gc.gc(project(), grace=grace, remote=remote, dry_run=dry_run, jobs=jobs,
                reporter=make_reporter(quiet or as_json or dry_run, verbose))
    if as_json:
        data = asdict(rep)
        data["total_bytes"] = rep.total_bytes
        emit_json(data)
    else:
        verb = "would delete" if dry_run else "deleted"
        for item in rep.deleted:
            if item.error is None:
                click.echo(f"{verb} {item.where:<5} {item.digest}  {item.bytes} B  age {_age(item.age_seconds)}"
                           + (f"  +{item.signatures} signature(s)" if item.signatures else ""))
        n = sum(1 for i in rep.deleted if i.error is None)
        click.echo(f"{verb} {n} object(s), {rep.total_bytes} bytes ({_size(rep.total_bytes)}); "
                   f"kept {rep.live} pinned digest(s) from {rep.commits} commit(s) and "
                   f"{rep.lock_versions} lock version(s), {rep.kept_young} younger than {grace}"
                   + (f", {rep.kept_unpushed} only in the cache" if rep.kept_unpushed else "")
                   + (f", {rep.kept_refreshed} re-pinned by a push within {grace}" if rep.kept_refreshed else "")
                   + (f"; {rep.markers_deleted} liveness marker(s) older than {grace}" if rep.markers_deleted else ""))
        if rep.dangling_signatures:
            click.echo(f"{verb} {rep.dangling_signatures} dangling signature envelope(s)")
        if rep.temp_files:
            click.echo(f"{verb} {rep.temp_files} temp file(s) left by interrupted writes ({_size(rep.temp_bytes)})")
        if rep.stray_packs:
            click.echo(f"{verb} {rep.stray_packs} pack(s) without an index (left by an interrupted push)")
        if rep.packs_merged:
            click.echo(f"{'would merge' if dry_run else 'merged'} {rep.packs_merged} cache pack(s) into one "
                       f"({_size(rep.packs_merged_bytes)})")
        for note in rep.notes:
            click.echo(f"note: {note}")
    if rep.problems:
        fail(rep.problems)


# -- drivers git runs (hidden) --------------------------------------------------------------
@click.command("git-textconv", hidden=True)
@click.argument("file", type=click.Path(path_type=Path))
def textconv_cmd(file: Path) -> None:
    """git's textconv for casstore.lock: one line per recorded call (raw text as a fallback)."""
    try:
        text = textconv(file)
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc.strerror or exc}") from None
    sys.stdout.write(text)
    sys.stdout.flush()


@click.command("git-merge-lock", hidden=True)
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("ours", type=click.Path(path_type=Path))
@click.argument("theirs", type=click.Path(path_type=Path))
@click.argument("marker_size", required=False, default="7")
@click.argument("path", required=False, default="casstore.lock")
def merge_lock_cmd(base: Path, ours: Path, theirs: Path, marker_size: str, path: str) -> None:
    """git's merge driver for casstore.lock: 3-way merge by cassette name (%O %A %B %L %P)."""
    size = int(marker_size) if marker_size.isdigit() and 0 < int(marker_size) < 100 else 7
    code, messages = merge_files(base, ours, theirs, marker_size=size, label=path)
    for m in messages:
        click.echo(m, err=True)
    sys.exit(code)


@click.command("git-drivers", hidden=True)
def drivers_cmd() -> None:
    """Register the casstore.lock diff and merge drivers (also done by `casstore hooks install`)."""
    root = project().root
    changed = register(root)
    for line in changed:
        click.echo(f"set {line}")
    click.echo("git drivers for casstore.lock are registered" + ("" if changed else " (unchanged)"))

