"""The ``casstore`` command group (an error: one line on stderr, exit 1 or 2, never a
traceback), and init, demo, show, keys and view."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..errors import CasstoreError, SignatureError, UsageError
from ..model.numerals import counted
from . import commands
from .output import emit_json, fail, json_option, project, report_error, rule_counts, write_text

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class _Group(click.Group):
    """Turns casstore errors into one line on stderr and their exit code (1 or 2), and
    imports the commands of :data:`LAZY_COMMANDS` only when they are used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is None and name in LAZY_COMMANDS:
            import importlib

            module, attr = LAZY_COMMANDS[name]
            cmd = getattr(importlib.import_module(module), attr)
            self.add_command(cmd, name)
        return cmd

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CasstoreError as exc:
            ctx.exit(report_error(exc))
        except BrokenPipeError:
            ctx.exit(1)


@click.group(cls=_Group, context_settings=CONTEXT)
@click.version_option(__version__, prog_name="casstore")
def cli() -> None:
    """Keep LLM/HTTP test recordings (cassettes) as signed, content-addressed blobs.

    \b
    Typical flow:
      casstore init --remote s3://bucket/prefix   # once per repository
      pytest                                       # records tests/cassettes/*.json
      casstore add tests/cassettes/                # pin by digest in casstore.lock, signed
      casstore push                                # upload what the store lacks
      git commit casstore.lock ...
    In CI:
      casstore pull --frozen && casstore check --since origin/main && pytest
    """


# -- init / add -------------------------------------------------------------------
@cli.command()
@click.option("--remote", metavar="URL", help="Shared store: s3://bucket/prefix, gs://…, a folder. Default: .casstore/store")
@click.option("--identity", metavar="NAME", help="Signer identity for a new key (default: git user.email).")
@click.option("--no-check", is_flag=True, help="Do not probe the remote (bucket, credentials) before writing.")
def init(remote: str | None, identity: str | None, no_check: bool) -> None:
    """Set up casstore in this repository.

    Writes casstore.toml, creates your signing key if you have none (kept in your user
    config dir, mode 0600) and trusts it in .casstore/trusted_keys. A remote is checked
    first: a URL with a scheme (s3://bucket/prefix), a backend that is installed, a bucket
    that exists, credentials that work; a folder is ./path or /path. Safe to rerun: with
    the same remote it changes nothing; to switch remotes, edit casstore.toml.
    """
    from ..ops import init as init_ops
    from ..store import signing

    res = init_ops.init(Path.cwd(), remote, identity=identity, check=not no_check)
    click.echo(f"{'wrote' if res.config_written else 'kept'} casstore.toml (remote: {res.remote})")
    if res.key_created:
        click.echo(f"created signing key {res.keyid} in {signing.config_dir()}")
    click.echo(f"{'trusted' if res.trusted else 'already trusted'} key {res.keyid} in .casstore/trusted_keys")
    click.echo("next: `casstore hooks install`, then record (pytest pins what it recorded) and `git commit`")


@cli.command()
@click.option("--keep", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Run in DIR (new or empty) and leave it there to look at.")
def demo(keep: Path | None) -> None:
    """Run the whole job once, offline, in a temporary folder: record, pin, push, pull, replay.

    A fake OpenAI-compatible provider on 127.0.0.1 answers the recording; a fresh clone then
    pulls --frozen and replays with the network off (the provider counts no request), and a
    changed prompt shows the miss and its explanation. Needs git; uses none of your keys.
    """
    from ..ops.demo import run_demo

    def show(step: Any) -> None:
        click.echo(f"$ {step.command}")
        if step.note:
            click.echo(f"  # {step.note}")
        lines = step.output.splitlines()
        if step.exit_code and "CassetteMiss" in step.output:  # the explanation, not the traceback
            lines = lines[next(i for i, x in enumerate(lines) if "CassetteMiss" in x):]
        for line in lines[:14]:
            click.echo(f"  {line}")
        if step.runs_agent:
            click.echo(f"  (the provider received {counted(step.provider_requests, 'request', 'requests')})")

    run_demo(keep, on_step=show)
    click.echo("done: recorded once, pinned, pulled and replayed offline. "
               "Next: `casstore init` in your repository (README.md, Quickstart).")


for _command in commands.COMMANDS:  # add, push, pull, verify, ls, status
    cli.add_command(_command)


@cli.command()
@click.argument("name")
@json_option
def show(name: str, as_json: bool) -> None:
    """Show a pinned cassette: digest, signers, provenance and its calls."""
    from ..ops import inspect

    info = inspect.show(project(), name)
    if as_json:
        emit_json(info)
    else:
        from ..model.lock import shown  # models and dates: lock text no signature covers, escaped

        click.echo(f"name:     {info['name']}")
        click.echo(f"digest:   {info['digest']}")
        click.echo(f"size:     {info['size']} bytes, {counted(info['entries'], 'entry', 'entries')}")
        click.echo(f"recorded: {shown(info.get('recorded_from') or '?')} .. {shown(info.get('recorded_to') or '?')}")
        click.echo(f"models:   {', '.join(map(shown, info.get('models') or [])) or '-'}")
        click.echo(f"signed:   {', '.join(info.get('verified_signers') or []) or '-'}")
        meta = info.get("meta") or {}
        if meta.get("git"):
            g = meta["git"]
            click.echo(f"git:      {g.get('commit', '?')} on {g.get('branch', '?')}{' (dirty)' if g.get('dirty') else ''}")
        if meta.get("recorder"):
            click.echo(f"recorder: {meta['recorder']}")
        if meta.get("fingerprint"):
            click.echo(f"run:      {meta['fingerprint']}")
        plat = meta.get("platform") if isinstance(meta.get("platform"), dict) else {}
        if plat:
            pkgs = meta.get("packages") if isinstance(meta.get("packages"), dict) else {}
            click.echo(f"platform: {plat.get('os', '?')} {plat.get('arch', '?')}, Python {plat.get('python', '?')}"
                       + ("; " + ", ".join(f"{k} {v}" for k, v in sorted(pkgs.items())) if pkgs else ""))
        fork = meta.get("fork") if isinstance(meta.get("fork"), dict) else {}
        if fork:
            click.echo(f"fork of:  {fork.get('parent', '?')} at call {fork.get('at', '?')}")
        hits = (info.get("redaction") or {}).get("hits") or {}
        if hits:
            click.echo("redacted: " + rule_counts(hits))
        for c in info.get("calls", []):
            tgt = c.get("target")
            tgt = tgt if isinstance(tgt, str) else json.dumps(tgt, sort_keys=True)
            click.echo(f"  #{c['seq']:<4} {c['kind']:<5} {tgt}  {str(c.get('identity'))[:12]}")
    errs = [info[k] for k in ("signature_error", "object_error") if k in info]
    if errs:
        fail(errs)


# -- keys ------------------------------------------------------------------------
@cli.group()
def keys() -> None:
    """Manage signing keys and the repository's trusted signers."""


@keys.command("generate")
@click.option("--identity", metavar="NAME", help="Signer identity (default: git user.email).")
@click.option("--force", is_flag=True, help="Replace an existing key.")
def keys_generate(identity: str | None, force: bool) -> None:
    """Create your Ed25519 signing key (user config dir, mode 0600).

    Inside a casstore repository the public key is also added to .casstore/trusted_keys.
    Bots set CASSTORE_SIGNING_KEY instead of keeping a key file.
    """
    from ..ops import init as init_ops

    res = init_ops.generate_key(identity, force=force)
    key = res.key
    click.echo(f"created key {key.keyid} for {key.identity} in {res.path}")
    if res.trusted_in:
        click.echo(f"trusted it in {res.trusted_in}")
    click.echo(key.public_line())


@keys.command("list")
@json_option
def keys_list(as_json: bool) -> None:
    """Show your signing key and the repository's trusted keys."""
    from ..ops import init as init_ops
    from ..project import Project

    data = init_ops.list_keys(Project.discover())
    if as_json:
        emit_json(data)
        return
    from ..model.lock import shown  # a trusted_keys identity may hold a terminal escape: escaped

    mine = data["signing_key"]
    click.echo(f"your key: {mine['keyid']} {shown(mine['identity'])}" if mine else "your key: none (run `casstore keys generate`)")
    for k in data["trusted"]:
        click.echo(f"trusted:  {k['keyid']} {shown(k['identity'])}{'  (yours)' if mine and k['keyid'] == mine['keyid'] else ''}")


@keys.command("trust")
@click.argument("key")
def keys_trust(key: str) -> None:
    """Trust a signer: KEY is a file holding '<identity> ed25519 <base64>' or that line itself."""
    p = Path(key)
    text = p.read_text(encoding="utf-8") if p.is_file() else key
    from ..ops import init as init_ops

    proj = project()
    try:
        added = init_ops.trust_key(proj, text)
    except SignatureError as exc:  # a malformed KEY argument is the user's input: exit 2
        raise UsageError(f"not a public key line: {exc}") from None
    click.echo("trusted" if added else "already trusted")


# -- view ------------------------------------------------------------------------------------
@cli.command("view")
@click.argument("names", nargs=-1, metavar="[NAME...]")
@click.option("--rev", help="The pins and trusted keys of this revision (default: the working tree).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=Path("casstore-view.html"),
              show_default=True, help="Where to write the page ('-': standard output).")
@click.option("--open", "open_", is_flag=True, help="Open the page in the default browser.")
def view_cmd(names: tuple[str, ...], rev: str | None, output: Path, open_: bool) -> None:
    """Write a self-contained HTML page of the recordings: an index of every pinned cassette,
    or, with NAMEs, each one in full (header, timeline, LLM conversations, requests and
    responses). Only stored, verified, redacted content is shown; the page loads nothing."""
    from ..ops.view import view_page

    if open_ and str(output) == "-":
        raise UsageError("--open opens a file: give -o PATH, not -o -")
    html, data = view_page(project(), list(names), rev)
    if str(output) == "-":
        click.echo(html, nl=False)
        return
    write_text(output, html)
    n = len(data.get("pins") or data.get("cassettes") or [])
    click.echo(f"wrote {output} ({counted(n, 'cassette', 'cassettes')})")
    if open_:  # webbrowser honours $BROWSER; without a browser the page is still written
        import webbrowser

        url = output.resolve().as_uri()
        try:
            opened = webbrowser.open(url)
        except webbrowser.Error:
            opened = False
        if not opened:
            click.echo(f"casstore: no browser to open the page (set BROWSER, or open {url})", err=True)


# -- commands contributed by other modules --------------------------------------------
# Imported on first use, so `casstore pull` does not pay for importing `check` or `gc`:
# start-up time is most of what a git hook costs. name -> (module, attribute).
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    # git integration: diff, log, gc and the hidden drivers git runs
    "diff": ("casstore.cli.git", "diff_cmd"),
    "log": ("casstore.cli.git", "log_cmd"),
    "gc": ("casstore.cli.git", "gc_cmd"),
    "git-textconv": ("casstore.cli.git", "textconv_cmd"),
    "git-merge-lock": ("casstore.cli.git", "merge_lock_cmd"),
    "git-drivers": ("casstore.cli.git", "drivers_cmd"),
    # interop: import vcr|jsonl, export
    "import": ("casstore.cli.interop", "import_group"),
    "export": ("casstore.cli.interop", "export_cmd"),
    # hygiene: check, hooks install|pre-push
    "check": ("casstore.cli.hygiene", "check"),
    "hooks": ("casstore.cli.hygiene", "hooks"),
    # replay: fork a cassette at a call
    "fork": ("casstore.cli.fork", "fork_cmd"),
}


def main() -> None:
    try:
        cli(prog_name="casstore")
    finally:
        # no last collection over every object the imports made (atexit handlers still run)
        import gc

        gc.freeze()


if __name__ == "__main__":
    main()
