"""The index of a scanned casstore.lock: its names and where each block starts (pure, no I/O).

Reading a lock of 10,000 pins means matching ~4.7 MB against one regular expression per
block (~40-50 ms of CPU); every command, hook and ``use()`` process pays it again. A lock
that :func:`~casstore.model.lock.scan_lock` accepted is indexed once: the sorted names and
block offsets, bound to the sha256 of the lock's exact bytes and sealed with a sha256 of
their own. Reading the same bytes later (the key is their hash: a changed lock is another
key, never a stale answer) takes the hash, one read of the index and a few checks, and each
Pin is still built from the lock's own text when first used, its block matched by the same
expression. What is checked when an index is used:

* the first line: the format and a digest of the scan's rules (an index written by a
  casstore that scanned by other rules is not read);
* the seal and the key (a torn, truncated or copied index is no index);
* the header ends where the first block starts; names are names the scan accepts (no
  escape, no quote, no .json suffix, at most 200 characters) and strictly increase (no
  duplicate, as TOML requires); offsets strictly increase, each block starts with its
  name's header, and the text has no other block header;
* on first use of a pin, its block matches the scan's expression and ends where the next
  block starts (the last at the end of the text), so the blocks cover the text as the scan
  saw it.

``casstore add`` knows the index of the lock it writes without scanning it (:func:`~casstore.model.lock.laid_out`):
the blocks it wrote are ones the scan matches as written (``lock.block_scans``), so their
names and starts are the scan's rows; what cannot be known so is scanned as before.

An index that fails a check at load is ignored (the lock is parsed). One that fails when a
pin is built makes the table parse the text in full: a lock the parser refuses raises its
LockError, and a lock whose pins are not the index's names raises too. So a lock read
whole (``values()``, ``items()``: verify, pull, gc, push) is exactly the parse.

What the seal is not: a key. It is a sha256 anyone can compute, so it proves the index is
whole, not who wrote it; an index casstore wrote is right for its bytes (it is written only
after the scan accepted them). Checking every block at load would cost what the index
saves, so an index written by hand to pass the checks can still serve one pin of a lock the
parser refuses, or a block the parser reads as the inside of a multi-line string. That is
why it is trusted only as this user's own file (``project.LockIndexFiles``: a plain file of
this user, writable by no one else): a process that runs as the user can as well rewrite
the lock, the hooks or casstore itself. docs/benchmarks.md ("Reading the lock through its
index") has the figures.
"""

from __future__ import annotations

import hashlib
import re
import sys
from array import array
from typing import Any

from ..errors import LockError
from .lock import (
    _BLOCK,
    _HEAD,
    Lock,
    Pin,
    PinTable,
    _parse_lock,
    _pin_of,
    _rules,
)
from .names import MAX_NAME_LENGTH, NAME_PATTERN

__all__ = ["index_bytes", "index_of", "lock_from_index", "MAGIC"]


def _magic(*rules: object) -> bytes:
    """The first line of an index: its format, the byte order of its offsets, and a digest
    of the scan's rules, so that an index written by a casstore that read locks by other
    rules (an upgrade, a downgrade) is another file's, never read as this one's."""
    digest = hashlib.sha256(repr(rules).encode()).hexdigest()[:16]
    return f"casstore.lock-index/1 {sys.byteorder} {digest}\n".encode()


MAGIC = _magic(_HEAD, _BLOCK, MAX_NAME_LENGTH, ".json")
# the names an index may hold: what the scan accepts (its pattern; length and suffix below)
_NAMES_RE = re.compile(rf"(?:{NAME_PATTERN})(?:\n(?:{NAME_PATTERN}))*".encode())
_KEY = 32  # sha256 of the lock's bytes
_SEAL = 32  # sha256 of everything after MAGIC and before the seal


def index_bytes(key: bytes, lock: Lock) -> bytes | None:
    """The index of ``lock`` (scanned from the text whose sha256 is ``key``); None when the
    lock was not read by the scan (the TOML path, or a Lock built in memory)."""
    pins = lock.pins
    if type(pins) is not PinTable:
        return None
    rows = pins._rows
    return index_of(key, list(rows), [m.start() for m in rows.values()])


def index_of(key: bytes, names: list[str], starts: list[int]) -> bytes:
    """The index of the text whose sha256 is ``key``, which the scan reads as the blocks of
    ``names`` starting at ``starts`` (:func:`index_bytes` of its scan, or what
    :func:`~casstore.model.lock.laid_out` knows without one)."""
    joined = "\n".join(names).encode("utf-8")
    body = key + len(names).to_bytes(4, "little") + len(joined).to_bytes(4, "little") + joined + array("q", starts).tobytes()
    return MAGIC + body + hashlib.sha256(body).digest()


def lock_from_index(key: bytes, data: bytes, text: str) -> Lock | None:
    """The Lock of ``text`` (whose sha256 is ``key``) through its index ``data``; None if the
    index is not one, is damaged, belongs to other bytes or fails a check (parse instead)."""
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _KEY + 8 + _SEAL:
        return None
    body = memoryview(data)[len(MAGIC):-_SEAL]
    if hashlib.sha256(body).digest() != data[-_SEAL:] or body[:_KEY] != key:
        return None
    n = int.from_bytes(body[_KEY:_KEY + 4], "little")
    size = int.from_bytes(body[_KEY + 4:_KEY + 8], "little")
    at = _KEY + 8 + size
    if len(body) != at + 8 * n:
        return None
    raw = bytes(body[_KEY + 8:at])
    if n and (_NAMES_RE.fullmatch(raw) is None or b".json\n" in raw + b"\n"):
        return None  # a name the scan refuses (an escape, a quote, a .json suffix): parse instead
    names = raw.decode("ascii").split("\n") if n else []
    if n and max(map(len, names)) > MAX_NAME_LENGTH:
        return None
    starts = array("q")
    starts.frombytes(body[at:])
    head = _rules()[0].match(text)
    if head is None or len(names) != n or (starts[0] if n else len(text)) != head.end():
        return None
    if n and (starts[-1] >= len(text) or not all(map(int.__lt__, starts, starts[1:]))
              or not all(map(str.__lt__, names, names[1:]))):
        return None
    if text.count("\n[cassettes.") != n:  # a block the index leaves out (no string holds a newline)
        return None
    if not all(map(text.startswith, [f'\n[cassettes."{name}"]\n' for name in names], starts)):
        return None
    return Lock(pins=IndexedPinTable(text, names, starts))


class IndexedPinTable(PinTable):
    """A :class:`PinTable` whose blocks are matched when their Pin is first built."""

    __slots__ = ("_text", "_starts")

    def __init__(self, text: str, names: list[str], starts: array[int]) -> None:
        super().__init__(dict(zip(names, range(len(names)), strict=True)))  # type: ignore[arg-type]
        self._text = text
        self._starts = starts

    def _build(self, name: str) -> Pin:
        i: Any = self._rows[name]
        if isinstance(i, int):
            start, end = self._starts[i], self._starts[i + 1] if i + 1 < len(self._starts) else len(self._text)
            m = _rules()[1].match(self._text, start)
            pin = _pin_of(m) if m is not None and m.end() == end and m[1] == name else None
            if pin is not None:
                return pin
            self._parse_all()  # the index does not describe this text
        return self._pins[name]

    def _parse_all(self) -> None:
        lock = _parse_lock(self._text)  # the parser's LockError for a lock it refuses
        if list(lock.pins) != list(self._rows):
            raise LockError("casstore.lock is malformed", ["its index in the user cache names other pins "
                                                            "than the lock holds (delete the cache's locks/ folder)"])
        self._pins = dict(lock.pins.items())
        self._rows = dict.fromkeys(self._rows, None)  # type: ignore[assignment]

    def block(self, name: str) -> str | None:
        # from its header to the next one: the load checked that exactly these headers are
        # there, so equal texts are equal TOML tables (the pin's own check comes when built)
        i: Any = self._rows.get(name)
        if not isinstance(i, int):
            return None
        return self._text[self._starts[i]:self._starts[i + 1] if i + 1 < len(self._starts) else len(self._text)]

    def __getitem__(self, name: str) -> Pin:
        pin = self._pins.get(name)
        if pin is None:
            pin = self._pins[name] = self._build(name)
        return pin

    def _all(self) -> dict[str, Pin]:
        if len(self._pins) != len(self._rows):
            got = self._pins
            self._pins = {name: got.get(name) or self._build(name) for name in list(self._rows)}
        return self._pins
