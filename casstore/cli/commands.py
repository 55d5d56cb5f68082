"""The everyday commands: ``add``, ``push``, ``pull``, ``verify``, ``ls`` and ``status``; each
imports the use case it runs when it runs (start-up is most of what a small command costs)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..model import defaults
from ..model.numerals import counted
from .output import emit_json, fail, json_option, progress_options, project

if TYPE_CHECKING:
    from ..ops.results import Problem, TransferReport

__all__ = ["COMMANDS", "add", "ls", "pull", "push", "status", "verify", "problem_lines"]


def kb(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


TRUST_FROM_HELP = ("Check signatures against .casstore/trusted_keys as it was at REV (e.g. main), never "
                   "the working tree's: a change cannot trust its own key. Signatures are then required.")


# -- add ---------------------------------------------------------------------------
@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@json_option
def add(paths: tuple[Path, ...], as_json: bool) -> None:
    """Pin cassette files (or folders of them) in casstore.lock.

    Each file is validated as format v1, canonicalized, hashed (sha256), compressed
    (zstd) into the local cache, signed with your key and pinned by digest. All or
    nothing: if any file is invalid, the lock is left untouched.
    """
    from ..ops.add import add as add_cassettes

    res = add_cassettes(project(), list(paths))
    if as_json:
        emit_json(res)
        return
    click.echo("\n".join(f"{'pinned' if a.changed else 'unchanged'} {a.name} {a.digest[:19]} {counted(a.entries, 'entry', 'entries')} "
                          f"{kb(a.size)}" + (f" signed by {a.signed_by}" if a.signed_by else " (unsigned)")
                          for a in res))  # one write, a line per cassette (not an echo call each)


# -- push / pull ------------------------------------------------------------------
@click.command()
@click.argument("names", nargs=-1)
@click.option("-j", "--jobs", type=click.IntRange(1, 256), help=f"Parallel uploads (default: config `jobs`, {defaults.JOBS}).")
@json_option
@progress_options
def push(names: tuple[str, ...], jobs: int | None, as_json: bool, quiet: bool, verbose: bool) -> None:
    """Upload pinned objects (and signatures) that the remote store lacks."""
    from ..ops import sync
    from ..store.transfer import make_reporter

    rep = sync.push(project(), names, jobs=jobs, reporter=make_reporter(quiet or as_json, verbose))
    _transfer_summary("pushed", rep, as_json)


@click.command()
@click.argument("names", nargs=-1)
@click.option("--frozen", is_flag=True,
              help="CI mode: the lock must exist and be valid, every pinned object must be fetched "
                   "and verified (digest, size, trusted signature), else exit 1.")
@click.option("-j", "--jobs", type=click.IntRange(1, 256), help=f"Parallel downloads (default: config `jobs`, {defaults.JOBS}).")
@json_option
@progress_options
@click.option("--trust-from", metavar="REV", help=TRUST_FROM_HELP)
def pull(names: tuple[str, ...], frozen: bool, jobs: int | None, as_json: bool, quiet: bool,
         verbose: bool, trust_from: str | None) -> None:
    """Fetch pinned cassettes into the local cache, verified."""
    from ..ops import sync
    from ..ops.results import trust_advice
    from ..store.transfer import make_reporter

    proj = project()
    rep = sync.pull(proj, names, frozen=frozen, jobs=jobs, reporter=make_reporter(quiet or as_json, verbose),
                    trust_from=trust_from)
    if not (rep.done or rep.skipped or rep.problems):  # nothing pinned, the remote never asked: is it there?
        from ..store.backends import probe

        probe(proj.remote_location, proj.config.remote_options)
    if not as_json:
        for line in trust_advice(proj, trust_from, rep.problems):
            click.echo(line, err=True)
    _transfer_summary("fetched", rep, as_json)


def _transfer_summary(verb: str, rep: TransferReport, as_json: bool) -> None:
    if as_json:
        emit_json({"ok": rep.ok, "done": rep.done, "skipped": rep.skipped, "bytes": rep.bytes,
                    "repaired": rep.repaired, "refetched": rep.refetched,
                    "problems": [p.__dict__ for p in rep.problems]})
    else:
        click.echo(f"{verb} {len(rep.done)} cassette(s), {kb(rep.bytes)}; {len(rep.skipped)} already there"
                   + (f"; replaced {len(rep.repaired)} corrupt object(s) in the store" if rep.repaired else ""))
        for name in rep.repaired:
            click.echo(f"repaired {name}: the store's copy was corrupt; replaced it with the verified local copy")
    for name in rep.refetched:
        click.echo(f"note: {name}: the cached object was corrupt; dropped it and fetched it again", err=True)
    if rep.warnings:
        from ..model.urls import mask_url

        for line in rep.warnings:
            click.echo(f"warning: {mask_url(line)}", err=True)
    if rep.problems:
        fail(problem_lines(rep.problems) + [f"{len(rep.problems)} cassette(s) failed"])


_VARYING = (r"sha256:[0-9a-f]+…?|\b[0-9a-f]{12,}\b|(objects|signatures|packs)/[^\s:]+|\(\d+ B\)"
            r"|after \d+ attempts? in [\d.]+ s|\b\d+(\.\d+)? ?m?s\b")  # compiled when a transfer fails


def problem_lines(problems: list[Problem], *, keep: int = 2) -> list[str]:
    """One line per problem, except that many cassettes failing for one cause (a full
    disk, a dead store, a missing bucket) show ``keep`` examples and a count."""
    groups: dict[str, list[Problem]] = {}
    for p in problems:
        msg = p.message.removeprefix(f"{p.name}: ")
        groups.setdefault(re.sub(_VARYING, "…", msg.replace(p.name, "…")), []).append(p)
    lines = []
    for cause, same in groups.items():
        lines += [p.line() for p in same[:keep]]
        if len(same) > keep + 1:
            more = [p.name for p in same[keep:]]
            lines.append(f"… and {len(more)} more cassette(s) with the same error ({cause}): "
                         f"{', '.join(more[:5])}{', …' if len(more) > 5 else ''}")
        elif len(same) == keep + 1:
            lines.append(same[keep].line())
    return lines


# -- verify / status ----------------------------------------------------------------
@click.command()
@click.argument("names", nargs=-1)
@click.option("--remote", is_flag=True, help="Check the remote store instead of the cache, and list orphans.")
@json_option
@click.option("--trust-from", metavar="REV", help=TRUST_FROM_HELP)
def verify(names: tuple[str, ...], remote: bool, as_json: bool, trust_from: str | None) -> None:
    """Check every pinned cassette: trusted signature, object present, digest and size."""
    from ..ops.results import trust_advice
    from ..ops.verify import verify as verify_pins

    proj = project()
    rep = verify_pins(proj, names, remote=remote, trust_from=trust_from)
    if as_json:
        emit_json(rep)
    else:
        where = "remote store" if remote else "cache"
        click.echo(f"verified {len(rep.ok)}/{rep.checked} cassette(s) in the {where}, {kb(rep.bytes)}")
        for line in sorted(set(rep.unbound)):
            click.echo(line)
        for name in sorted(rep.refetched):
            click.echo(f"repaired {name}: the cached object was corrupt; dropped it and fetched it again")
        fs = rep.fsck
        if fs is not None:
            click.echo(f"store: {fs.objects} object(s), {kb(fs.bytes)}; {len(rep.orphans)} not pinned by "
                       f"this lock ({len(fs.corrupt)} corrupt); {len(fs.unsigned)} unsigned; signature "
                       f"envelopes: {len(fs.bad_signatures)} bad, {len(fs.dangling_signatures)} dangling")
            for d in fs.unsigned:
                click.echo(f"unsigned {d}")
            for u in fs.untrusted:
                click.echo(f"untrusted {u}")
            for k in fs.dangling_signatures + fs.strays:
                click.echo(f"stray {k} (no object; `casstore gc --remote` removes it)" if k in fs.dangling_signatures
                           else f"stray {k} (not part of the store layout)")
        for o in rep.orphans:
            click.echo(f"orphan {o} (pinned by no cassette in this lock; see `casstore gc --dry-run --remote`)")
    if rep.problems:
        for line in trust_advice(proj, trust_from, rep.problems):
            click.echo(line, err=True)
        fail([p.line() for p in rep.problems])


@click.command()
@click.option("--offline", is_flag=True, help="Do not ask the remote store what it has.")
@json_option
def status(offline: bool, as_json: bool) -> None:
    """What is pinned, cached, pushed, and which working copies changed."""
    from ..ops import inspect

    st = inspect.status(project(), remote=not offline)
    if as_json:
        emit_json(st)
        return
    lines = [f"remote: {st['remote']}" + (f" (unreachable: {st['remote_error']})" if st["remote_error"] else "")]
    w = max(map(len, [r["name"] for r in st["pins"]] + list(st["unpinned"])), default=0)  # no row's columns shift
    for r in st["pins"]:
        pushed = {True: "pushed", False: "NOT PUSHED", None: "push ?"}[r["pushed"]]
        lines.append(f"{r['name']:<{w}} {r['digest'][:19]} {'cached' if r['cached'] else 'not cached':<10} "
                     f"{pushed:<10} working copy: {r['working_copy']}")
    lines += [f"{n:<{w}} unpinned working copy (run `casstore add`)" for n in st["unpinned"]]
    click.echo("\n".join(lines))  # one write, not one per pin


@click.command(name="ls")
@click.option("--remote", is_flag=True, help="List the objects in the remote store instead.")
@json_option
def ls(remote: bool, as_json: bool) -> None:
    """List pinned cassettes (or the remote store's objects)."""
    from ..model.lock import shown
    from ..ops import inspect

    rows = inspect.ls(project(), remote=remote)
    if as_json:
        emit_json(rows)
        return
    if not rows:  # say why the listing is empty (on stderr: stdout stays a clean listing)
        click.echo("the remote store holds no cassettes (`casstore push` uploads what is pinned)" if remote else
                   "nothing is pinned in casstore.lock yet: record cassettes, then `casstore add tests/cassettes/`",
                   err=True)
        return
    if remote:
        for r in rows:
            click.echo(f"{r['digest']}  {r['stored_bytes']:>10}  {', '.join(r['pinned_as']) or '(unpinned)'}")
        return
    w = max(len(r["name"]) for r in rows)
    for r in rows:
        signers = ",".join(map(shown, r["signers"])) or "unsigned"  # lock text: escaped
        click.echo(f"{r['name']:<{w}} {r['digest'][:19]} {counted(r['entries'], 'entry', 'entries'):>14} "
                   f"{kb(r['size']):>10} {'cached' if r['cached'] else 'not cached':<10} {signers}")


COMMANDS = [add, push, pull, verify, ls, status]
