"""What every verb shares: a collected :class:`Problem` (never lost; the caller decides the
exit code), pin selection, and the JSON form of a result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

from ..errors import CasstoreError, UsageError
from ..model.lock import Lock, Pin
from ..model.names import not_pinned

__all__ = ["Problem", "TransferReport", "error_text", "select", "short", "as_json"]


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
    """What a push or a pull did."""

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
