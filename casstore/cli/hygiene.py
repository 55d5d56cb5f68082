"""``casstore check`` and ``casstore hooks install|pre-push``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import CheckFailed
from .output import emit_json, progress_options, project, rule_counts

# each command imports what it runs: the pre-commit hook (`check --staged`) does not load
# the transfer code of pre-push, nor pre-push the secret scanner

__all__ = ["check", "hooks"]


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--staged", is_flag=True, help="Check what is staged in the git index (the pre-commit hook does).")
@click.option("--offline", is_flag=True, help="Do not ask the remote store for pinned objects the cache lacks.")
@click.option("--since", metavar="REV", help="Scan the content of the pins that differ from REV "
              "(default: the merge base with the upstream branch; every pin without one).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def check(paths: tuple[Path, ...], staged: bool, offline: bool, since: str | None, as_json: bool) -> None:
    """Check cassettes and the lock: secrets, age, size, signatures, objects.

    \b
    Scans the cassette working copies, YAML/JSON cassettes in the cassette dir (vcrpy)
    and files matched by [hygiene] globs, for:
      - secrets (the redaction rules: API keys, tokens, cookies, private keys, …)
      - age: entries older than hygiene.max_age_days (default 90) fail,
        older than hygiene.warn_age_days warn
      - size: hygiene.max_cassette_bytes, hygiene.max_entry_bytes
      - the lock: a trusted signature and an object in the cache or the store, per pin
      - pinned content: without PATHS, the content of every pin that differs from
        --since REV (default: the merge base with the upstream branch, or every pin),
        read from the cache or the store; with --staged, the pins the staged lock changes
      - trust: a change to .casstore/trusted_keys since that base is a warning
    Prints a redaction report (hits per rule). Exit 1 if anything fails; warnings do
    not fail. Output never contains a secret, only a masked preview. In CI:
    casstore pull --frozen && casstore check --since origin/main
    """
    from ..ops import check as check_mod

    rep = check_mod.check(project(), list(paths), staged=staged, offline=offline, since=since)
    if as_json:
        emit_json(rep)
        if not rep.ok:
            sys.exit(1)
        return
    for f in rep.findings:
        tag = "FAIL" if f.level == "error" else "warn"
        click.echo(f"{tag} {f.line()}")
    if rep.redacted or rep.secrets:
        parts = []
        if rep.redacted:
            parts.append(f"redacted at record time: {rule_counts(rep.redacted)}")
        if rep.secrets:
            parts.append(f"secrets still present: {rule_counts(rep.secrets)}")
        click.echo("redaction report: " + "; ".join(parts))
    if rep.pins_scanned or rep.base:
        since_what = f" (changed since {rep.base})" if rep.base else " (changed by the staged lock)"
        click.echo(f"scanned the content of {rep.pins_scanned} pin(s){since_what}")
    what = "staged file(s)" if staged else "file(s)"
    tail = f", {rep.suppressed} allowed by hygiene.allow" if rep.suppressed else ""
    click.echo(f"checked {len(rep.files)} {what} and {rep.pins_checked} pin(s): "
               f"{len(rep.errors)} error(s), {len(rep.warnings)} warning(s){tail}")
    if not rep.ok:
        bypass = " (`git commit --no-verify` skips the hook, but CI runs `casstore check` too)" if staged else ""
        raise CheckFailed(f"casstore check failed: {len(rep.errors)} problem(s){bypass}")


@click.group()
def hooks() -> None:
    """Git hooks: pre-commit runs `casstore check --staged`; pre-push uploads pinned objects."""


@hooks.command("install")
@click.option("--uninstall", is_flag=True, help="Remove casstore's hooks and restore the hooks they chained.")
def hooks_install(uninstall: bool) -> None:
    """Install the pre-commit and pre-push hooks in this repository.

    Honours core.hooksPath. An existing hook is kept (renamed <hook>.pre-casstore) and runs
    first. Safe to rerun. Also registers casstore's git diff/merge drivers for the lock
    when they are available.
    """
    from ..git import hooks as hooks_mod

    proj = project()
    if uninstall:
        rep = hooks_mod.uninstall(proj.root)
    else:
        rep = hooks_mod.install(proj.root)
    click.echo(f"hooks folder: {rep.hooks_dir}")
    for line in rep.actions:
        click.echo(line)


@hooks.command("pre-push")
@click.argument("remote", required=False)
@click.argument("url", required=False)
@progress_options
def hooks_pre_push(remote: str | None, url: str | None, quiet: bool, verbose: bool) -> None:
    """(run by the pre-push hook) Upload objects pinned by the pushed commits.

    Reads git's pre-push lines ('<local ref> <local sha> <remote ref> <remote sha>')
    from stdin. Exit 1 refuses the push.
    """
    from ..ops.pre_push import pre_push
    from ..store.transfer import make_reporter

    proj = project()
    stdin = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    rep = pre_push(proj, stdin, remote, reporter=make_reporter(quiet, verbose))
    if rep.store_contacted:
        click.echo(f"casstore: {rep.pins} object(s) pinned by the pushed commits: uploaded {len(rep.uploaded)}, "
                   f"{len(rep.already)} already in {proj.remote_url}", err=True)
    if not rep.ok:
        for p in rep.problems:
            click.echo(f"error: {p}", err=True)
        raise CheckFailed("push refused: pinned objects could not be uploaded to the casstore remote "
                          "(`git push --no-verify` skips this, and CI will not find them)")
