"""What the verbs share: a collected :class:`Problem` (the caller decides the exit code), pin
selection, the JSON form of a result, and ``--trust-from``'s advice."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import TYPE_CHECKING, Any

from ..errors import CasstoreError, UsageError
from ..model.lock import Lock, Pin
from ..model.names import not_pinned

if TYPE_CHECKING:
    from ..project import Project

__all__ = ["Problem", "TransferReport", "error_text", "select", "short", "as_json", "trust_advice"]


def error_text(err: object) -> str:
    """An error as a message: a casstore error's own text, another's with its type's name."""
    return str(err) if isinstance(err, CasstoreError) else f"{type(err).__name__}: {err}"


@dataclass
class Problem:
    name: str
    digest: str
    message: str

    @classmethod
    def of(cls, pin: Pin, err: object) -> Problem:
        return cls(pin.name, pin.digest, f"{pin.name}: {error_text(err)}")

    def line(self) -> str:
        return self.message if self.name in self.message else f"{self.name}: {self.message}"


@dataclass
class TransferReport:
    done: list[str] = field(default_factory=list)  # names transferred
    skipped: list[str] = field(default_factory=list)  # already there
    repaired: list[str] = field(default_factory=list)  # push: corrupt in the store, replaced
    refetched: list[str] = field(default_factory=list)  # pull: corrupt in the cache, fetched again
    warnings: list[str] = field(default_factory=list)  # worth a line, not a failure
    problems: list[Problem] = field(default_factory=list)
    bytes: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def short(digest: str) -> str:
    """The digest as messages show it: ``sha256:`` and the first 12 hex digits."""
    return digest[:19]


def select(lock: Lock, names: Sequence[str]) -> list[Pin]:
    """The pins named (every pin when none is); a name not pinned is a usage error."""
    if not names:
        return list(lock.pins.values())
    missing = [n for n in names if n not in lock.pins]
    if missing:
        raise UsageError(not_pinned(missing, lock.pins))
    return [lock.pins[n] for n in names]


def as_json(obj: Any) -> Any:
    """A result (a ``to_dict()`` object, a dataclass, a list of them, or plain data) as JSON-ready data."""
    if callable(getattr(obj, "to_dict", None)):
        return obj.to_dict()
    if is_dataclass(obj) and not isinstance(obj, type):
        return asdict(obj)
    if isinstance(obj, list):
        return [as_json(x) for x in obj]
    return obj


_UNTRUSTED = "is signed only by keys not in trusted_keys at "


def trust_advice(project: Project, trust_from: str | None, problems: list[Problem]) -> list[str]:
    """What a reviewer runs when pins are signed only by a key ``trust_from`` does not trust
    (a new teammate's first change, say): one line per signer the change adds to trusted_keys."""
    if trust_from is None or not any(_UNTRUSTED in p.message for p in problems):
        return []
    from ..git.trust import trust_changes, trusted_keys_at
    from ..model.lock import shown

    try:
        here = project.trusted_keys()
        added = [c for c in trust_changes(trusted_keys_at(project, trust_from), here) if c.change == "added"]
    except CasstoreError:
        added = []
    keys = here.by_id() if added else {}
    lines = [f"to accept {shown(c.identity)} as a signer, a maintainer trusts the key in a change merged into "
             f"{trust_from} first: `casstore keys trust '{shown(keys[c.keyid].line())}'` (this change cannot trust "
             "its own key); or re-signs these pins with a key it trusts: `casstore add` of their working copies "
             "(docs/security.md)" for c in added]
    return lines or [f"to accept these pins, a maintainer whose key {trust_from} trusts re-signs them: "
                     "`casstore add` of their working copies, committed here (docs/security.md)"]
