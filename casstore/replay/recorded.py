"""The recorded entries of a replay session by call identity, with a cursor each: identical
calls are served in recorded order (an identity recorded once maps to its entry itself).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["Recorded"]

Entry = dict[str, Any]


class Recorded:
    """Entries by key (their identity, or ``key(entry)``), each key's in the given order."""

    __slots__ = ("_by", "_cursor", "rule1", "rule2", "salts", "max_seq")

    def __init__(self, entries: Iterable[Entry] = (), key: Callable[[Entry], str] | None = None) -> None:
        self._by: dict[str, Entry | list[Entry]] = {}
        self._cursor: dict[str, int] = {}
        # an HTTP entry recorded under identity rule 1 (no identity_rule field) is there
        self.rule1 = False
        self.rule2 = False  # an entry recorded under identity rule 2 (HTTP or tool) is there
        self.salts: list[str] = []  # the identity salts of rule 3 entries, first seen first
        self.max_seq = -1
        self.add(entries, key)

    def add(self, entries: Iterable[Entry], key: Callable[[Entry], str] | None = None) -> None:
        by = self._by
        rule1 = self.rule1
        top = self.max_seq
        for entry in entries:
            k = entry["identity"] if key is None else key(entry)
            prev = by.get(k)
            if prev is None:
                by[k] = entry
            elif isinstance(prev, list):
                prev.append(entry)
            else:
                by[k] = [prev, entry]
            rule = entry.get("identity_rule", 1)
            if rule != 3:
                if rule == 2:
                    self.rule2 = True
                elif not rule1 and rule == 1 and entry.get("kind") != "tool":
                    rule1 = True
            elif "identity_salt" in entry and entry["identity_salt"] not in self.salts:
                self.salts.append(str(entry["identity_salt"]))
            seq = int(entry.get("seq", 0))
            if seq > top:
                top = seq
        self.rule1 = rule1
        self.max_seq = top

    def _of(self, key: str) -> list[Entry]:
        found = self._by.get(key)
        return [] if found is None else found if type(found) is list else [found]  # type: ignore[list-item]

    def take(self, key: str, repeats: bool = False) -> Entry | None:
        """The next entry of ``key`` (its last again once all were taken, with ``repeats``)."""
        found = self._by.get(key)
        if found is None:
            return None
        i = self._cursor.get(key, 0)
        if type(found) is list:
            if i >= len(found):
                return found[-1] if repeats else None
            self._cursor[key] = i + 1
            return found[i]
        if i:
            return found if repeats else None  # type: ignore[return-value]
        self._cursor[key] = 1
        return found  # type: ignore[return-value]

    def count(self, key: str) -> int:
        return len(self._of(key))

    def all_played(self) -> bool:
        return all(self._cursor.get(key, 0) >= len(self._of(key)) for key in self._by)

    def unplayed(self) -> list[Entry]:
        """Entries not taken yet, in ``seq`` order."""
        cursor = self._cursor
        left = [entry for key in self._by for entry in self._of(key)[cursor.get(key, 0):]]
        return sorted(left, key=lambda e: int(e.get("seq", 0)))
