"""Cassette names: what is allowed, so that a name can never escape its directory."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from ..errors import InvalidName

__all__ = ["validate_name", "reserved_part", "name_from_test_id", "secrets_in_name", "mask_name", "not_pinned",
           "MAX_NAME_LENGTH"]

MAX_NAME_LENGTH = 200
_PART = r"[A-Za-z0-9_][A-Za-z0-9_.\-]*"
_SEGMENT = re.compile(rf"^{_PART}\Z")  # \Z: "$" would take a trailing newline
# the characters and parts validate_name allows, as a pattern (length and suffix apart)
NAME_PATTERN = rf"{_PART}(?:/{_PART})*"
# device names Windows reserves in every folder, with any extension and in any case
WINDOWS_RESERVED = frozenset(
    ["CON", "PRN", "AUX", "NUL"] + [f"COM{i}" for i in range(1, 10)] + [f"LPT{i}" for i in range(1, 10)]
)


def _reserved(segment: str) -> bool:
    return segment.split(".", 1)[0].upper() in WINDOWS_RESERVED


def reserved_part(name: str) -> str | None:
    """The first part of ``name`` that is a reserved Windows device name, if any."""
    for seg in name.split("/"):
        if _reserved(seg):
            return seg.split(".", 1)[0]
    return None


def validate_name(name: object, *, allow_reserved: bool = False) -> str:
    """Return ``name`` if it is a safe cassette name, else raise :class:`InvalidName`: one
    or more ``/``-separated segments of letters, digits, ``_ . -``, none starting with a dot,
    at most 200 characters, no Windows device name (unless ``allow_reserved``: a lock
    written before that rule still loads)."""
    if not isinstance(name, str) or not name:
        raise InvalidName(f"invalid cassette name {name!r}: must be a non-empty string")
    shown = name if len(name) <= 80 else name[:77] + "..."
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidName(f"invalid cassette name {shown!r}: longer than {MAX_NAME_LENGTH} characters")
    if name.endswith(".json"):
        raise InvalidName(f"invalid cassette name {shown!r}: drop the .json suffix")
    for seg in name.split("/"):
        if not _SEGMENT.match(seg):
            raise InvalidName(
                f"invalid cassette name {shown!r}: use letters, digits, '_', '.', '-' and '/' "
                "between parts; no part may be empty or start with '.'"
            )
        if _reserved(seg) and not allow_reserved:
            raise InvalidName(
                f"invalid cassette name {shown!r}: {seg.split('.', 1)[0]!r} is a reserved Windows device name "
                "(CON, PRN, AUX, NUL, COM1-9, LPT1-9, in any case and with any extension)"
            )
    return name


_SEPARATORS = frozenset("-_./[]")


def secrets_in_name(name: str, rules: Any = None) -> list[tuple[str, str]]:
    """``(rule, secret)`` for each credential shape (the value rules) inside ``name``; the
    text after every separator is searched too (the rules read ``-`` and ``_`` as part of a
    token). ``rules``: a :class:`~casstore.model.redaction.RuleSet`, else the built-in ones."""
    from .redaction import secrets_in  # lazy: `status` and the lock reader never load the rules

    found: list[tuple[str, str]] = []
    for text in [" " + name[i:] for i in [0] + [i + 1 for i, c in enumerate(name) if c in _SEPARATORS]]:
        for rule, secret in secrets_in(text, rules):
            if secret in name and (rule, secret) not in found and not any(secret in s for _r, s in found):
                found.append((rule, secret))
    return found


def mask_name(name: str, found: list[tuple[str, str]] | None = None, rules: Any = None) -> str:
    """``name`` with every secret in it shown as its masked preview (for messages)."""
    from .redaction_rules import mask

    for _rule, secret in secrets_in_name(name, rules) if found is None else found:
        name = name.replace(secret, mask(secret))
    return name


def _redact_part(part: str) -> str:
    """A test id part with each secret replaced by ``redacted-<rule>-<8 hex of its sha256>``:
    the parameters ``[sk-…a]`` and ``[sk-…b]`` stay two cassettes, and no name holds a key."""
    for rule, secret in secrets_in_name(part):
        part = part.replace(secret, f"redacted-{rule}-{hashlib.sha256(secret.encode()).hexdigest()[:8]}")
    return part


def name_from_test_id(nodeid: str) -> str:
    """``tests/test_agent.py::test_triage[gpt]`` -> ``test_agent/test_triage-gpt``; a
    credential in a test id never reaches the name (:func:`_redact_part`)."""
    path, _, rest = nodeid.partition("::")
    stem = path.rsplit("/", 1)[-1]
    if stem.endswith(".py"):
        stem = stem[:-3]
    parts = [stem] + [p for p in rest.split("::") if p]
    cleaned = []
    for part in parts:
        part = _redact_part(part)
        s = re.sub(r"[^A-Za-z0-9_.\-]+", "-", part).strip("-.") or "x"
        cleaned.append(s + "_" if _reserved(s) else s)
    name = "/".join(cleaned)[:MAX_NAME_LENGTH].rstrip("/")
    while name.endswith(".json"):  # a test id like test[x.json] must not look like a file name
        name = name[: -len(".json")].rstrip("/")
    return validate_name(name or "x")


def not_pinned(names: Iterable[str], known: Iterable[str], where: str = "casstore.lock") -> str:
    """The message for names that are not in ``known``, each with its closest known names."""
    import difflib  # only for an unknown name (every command imports this module)

    pool = sorted(set(known))
    wanted = list(names)

    def closest(name: str) -> list[str]:
        return difflib.get_close_matches(name, pool, n=3, cutoff=0.6)

    if len(wanted) == 1:
        close = closest(wanted[0])
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        return f"{wanted[0]!r} is not pinned in {where}{hint} (see `casstore ls`)"
    parts = [f"{n!r}" + (f" (did you mean {' or '.join(c)}?)" if (c := closest(n)) else "") for n in wanted]
    return f"not pinned in {where}: {', '.join(parts)} (see `casstore ls`)"
