"""``casstore init`` and ``casstore keys generate|list|trust``: a repository's configuration,
your signing key and the repository's trusted signers."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import CONFIG_FILE
from ..errors import RemoteError, UsageError
from ..model import defaults
from ..model.fsutil import atomic_write
from ..model.urls import mask_url
from ..project import DEFAULT_REMOTE, Project
from ..store import signing
from ..store.backends import probe
from ..store.remote import check_url

__all__ = ["InitResult", "init", "check_remote", "trust_key", "KeyGenerated", "generate_key", "list_keys"]


@dataclass
class InitResult:
    config_written: bool
    key_created: bool
    keyid: str | None
    trusted: bool
    remote: str


def init(root: Path, remote: str | None = None, *, identity: str | None = None,
         check: bool = True) -> InitResult:
    """Set up ``root``; safe to rerun. A remote is refused before anything is written when it
    cannot be what the user meant or (``check``) cannot be used: see :func:`check_remote`."""
    root = root.resolve()
    cfg = root / CONFIG_FILE
    if remote is not None and cfg.exists():
        current = Project.discover(root).config.remote_url
        if current != remote:
            raise UsageError(f"{CONFIG_FILE} already names the remote {mask_url(current or DEFAULT_REMOTE)}; "
                             f"to switch to {mask_url(remote)}, change [remote] url in {CONFIG_FILE}, then run "
                             "`casstore push` (init never rewrites an existing configuration)")
        remote = None  # the same remote again: nothing to change
    elif remote is not None:
        check_remote(remote, probe_it=check)
    written = False
    if not cfg.exists():
        lines = [
            "# casstore configuration: commit this file. Each key says what it does.",
            "# where recordings (working copies) are written by pytest and read by `casstore add`",
            f"cassette_dir = {json.dumps(defaults.CASSETTE_DIR)}",
            "",
            "# the team's store: any fsspec URL (s3://bucket/prefix, gs://, az://, a folder)",
            "[remote]",
            f"url = {json.dumps(remote or DEFAULT_REMOTE)}",
            "# options = { endpoint_url = \"http://127.0.0.1:9000\" }   # fsspec storage options",
            "",
            "# every pin signed by a key listed in .casstore/trusted_keys",
            "[trust]",
            "require_signatures = true",
            "",
            "# what `casstore check` (the pre-commit hook) enforces: a recording older than",
            "# max_age_days fails, older than warn_age_days warns (0 turns either off)",
            "[hygiene]",
            f"max_age_days = {defaults.HYGIENE['max_age_days']}",
            "warn_age_days = 60",
            "",
        ]
        cfg.write_text("\n".join(lines), encoding="utf-8")
        written = True
    project = Project.discover(root)
    project.cassette_dir.mkdir(parents=True, exist_ok=True)
    (root / ".casstore").mkdir(exist_ok=True)
    _ensure_gitignore(root, [".casstore/store/", ".casstore/lock.guard"])
    key = signing.load_signing_key(required=False)
    created = False
    if key is None:
        key, _ = signing.generate_signing_key(identity)
        created = True
    trusted = trust_key(project, key.public_line())
    return InitResult(config_written=written, key_created=created, keyid=key.keyid, trusted=trusted,
                      remote=project.remote_url)


_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


def check_remote(remote: str, *, probe_it: bool = True) -> None:
    """Refuse (exit 2) a malformed remote URL, a bare relative path that reads like a bucket (it
    would be a folder inside the repository), and with ``probe_it`` one that cannot be used."""
    check_url(remote)
    local = "://" not in remote
    if local and not (remote.startswith((".", "/", "~")) or _DRIVE.match(remote)):
        raise UsageError(f"remote {remote!r} has no scheme, so it would be a folder inside this repository: "
                         f"for a bucket write s3://{remote} (or gs://, az://), for a folder ./{remote}")
    if probe_it:
        try:
            probe(remote)
        except RemoteError as exc:
            raise RemoteError(f"{exc} (`casstore init --no-check` skips this check)") from None


def _ensure_gitignore(root: Path, patterns: list[str]) -> None:
    gi = root / ".gitignore"
    try:
        text = gi.read_bytes().decode("utf-8") if gi.exists() else ""
    except UnicodeDecodeError:  # e.g. UTF-16 from PowerShell's `echo x > .gitignore`, which git cannot read either
        raise UsageError(".gitignore is not UTF-8 text (git reads it as UTF-8): save it as UTF-8 and run init again") from None
    have = {line.rstrip("\r") for line in text.split("\n")}  # lines as git reads them, not splitlines'
    add = [p for p in patterns if p not in have]
    if add:
        gi.write_bytes(_appended(text, add))


def _appended(text: str, lines: list[str]) -> bytes:
    """``lines`` appended to a user's file: its lines stay as they are, the new ones end as its
    first line ends (CRLF on Windows)."""
    end = "\r\n" if "\n" in text and text.split("\n", 1)[0].endswith("\r") else "\n"
    sep = end if text and not text.endswith("\n") else ""
    return (text + sep + "".join(line + end for line in lines)).encode("utf-8")


def trust_key(project: Project, line_or_text: str) -> bool:
    key = signing.parse_public_key(line_or_text, source="key")
    path = project.trusted_keys_path
    current = project.trusted_keys()
    if key.keyid in current.by_id():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    # as bytes, not read_text's universal newlines: a lone "\r" in a comment (one line to git
    # and to TrustedKeys.load) would be written back as "\n", trusting the key after it
    text = path.read_bytes().decode("utf-8") if path.exists() else (
        "# casstore trusted signers: <identity> ed25519 <base64 raw public key>\n"
    )
    atomic_write(path, _appended(text, [key.line()]))
    return True


@dataclass
class KeyGenerated:
    key: signing.SigningKey
    path: Path
    trusted_in: str | None  # the trusted keys file it was added to, inside a casstore repository


def generate_key(identity: str | None = None, *, force: bool = False) -> KeyGenerated:
    """Create your signing key; inside a casstore repository also trust it there."""
    key, path = signing.generate_signing_key(identity, force=force)
    project = Project.discover()
    trusted_in = None
    if (project.root / CONFIG_FILE).exists() or project.config.source != "defaults":
        if trust_key(project, key.public_line()):
            trusted_in = str(project.config.trusted_keys_file)
    return KeyGenerated(key, path, trusted_in)


def list_keys(project: Project) -> dict[str, Any]:
    mine = signing.load_signing_key(required=False)
    trusted = project.trusted_keys()
    return {
        "signing_key": {"keyid": mine.keyid, "identity": mine.identity} if mine else None,
        "trusted": [{"keyid": k.keyid, "identity": k.identity} for k in trusted.keys],
    }
