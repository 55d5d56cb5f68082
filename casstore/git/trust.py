"""Trust from a base revision: ``trusted_keys`` as it was at a commit (``--trust-from REV``,
so a change cannot vouch for its own key), and what a range changed in it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import SignatureError
from ..model.lock import shown
from ..project import Project
from ..store.signing import TrustedKeys

if TYPE_CHECKING:  # git is read only with a revision (--trust-from): `verify` does not import it
    from ..config import Config

__all__ = ["TrustChange", "Policy", "trust_changes", "trusted_keys_at", "config_at", "policy"]


@dataclass(frozen=True)
class TrustChange:
    """One change to trusted_keys: ``added``, ``removed``, or ``identity`` (same key, new name)."""

    change: str
    keyid: str
    identity: str
    old_identity: str | None = None

    def line(self) -> str:
        """The change as printed (diff, check): identities escaped where not printable (a
        committed trusted_keys line may hold a terminal escape that erases this very line)."""
        if self.change == "identity":
            return f"key {self.keyid}: identity {shown(self.old_identity or '')} → {shown(self.identity)}"
        return f"{self.change} signer {shown(self.identity)} (key {self.keyid})"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def trust_changes(old: TrustedKeys, new: TrustedKeys) -> list[TrustChange]:
    """What changed from ``old`` to ``new``, by key id (pure; sorted: removed, added, identity)."""
    before, after = old.by_id(), new.by_id()
    out = [TrustChange("removed", k, before[k].identity) for k in sorted(before.keys() - after.keys())]
    out += [TrustChange("added", k, after[k].identity) for k in sorted(after.keys() - before.keys())]
    out += [TrustChange("identity", k, after[k].identity, before[k].identity)
            for k in sorted(before.keys() & after.keys()) if before[k].identity != after[k].identity]
    return out


@dataclass(frozen=True)
class Policy:
    """The keys a command checks signatures against, whether one is required, and their name."""

    trusted: TrustedKeys
    required: bool
    where: str = "trusted_keys"


def policy(project: Project, trust_from: str | None = None) -> Policy:
    """The working tree's trusted_keys and policy, or (``trust_from``) the keys at that
    revision with signatures always required: a change cannot trust its own key."""
    if trust_from is None:
        trusted = project.trusted_keys()
        return Policy(trusted, project.signatures_required(trusted))
    return Policy(trusted_keys_at(project, trust_from), True, f"trusted_keys at {trust_from}")


def config_at(project: Project, sha: bytes) -> Config | None:
    """The configuration commit ``sha`` holds (casstore.toml, else [tool.casstore]), None without
    one; a file that does not parse there fails closed, naming the commit."""
    from ..config import CONFIG_FILE, config_of
    from ..errors import ConfigError
    from .repo import GitRepo

    repo = GitRepo(project.root)
    got = [repo.read_at(sha, project.root / name) for name in (CONFIG_FILE, "pyproject.toml")]
    try:
        return config_of(*got)
    except ConfigError as exc:
        raise ConfigError(f"{exc} (at {sha.decode()[:12]})") from None


def trusted_keys_at(project: Project, rev: str | bytes | None) -> TrustedKeys:
    """``trusted_keys`` at commit ``rev`` (None: the working file; absent there: no key); a
    file that does not parse at ``rev`` fails closed, naming the revision."""
    if rev is None:
        return project.trusted_keys()
    from .repo import GitRepo

    repo = GitRepo(project.root)
    sha = rev if isinstance(rev, bytes) else repo.resolve(rev)
    data = repo.read_at(sha, project.trusted_keys_path)
    if data is None:
        return TrustedKeys()
    source = f"{project.config.trusted_keys_file} at {rev.decode()[:12] if isinstance(rev, bytes) else rev}"
    try:
        return TrustedKeys.parse(data.decode("utf-8"), source=source)
    except UnicodeDecodeError:
        raise SignatureError(f"{source}: not valid UTF-8") from None
