"""Obviously fake credentials and times, built at run time (never a literal in the repository).

The credentials are random-looking on purpose: real keys are random, and redaction leaves
``xxxx…``-style placeholders alone. The generator is seeded, so a run is reproducible.
"""

from __future__ import annotations

import datetime as dt
import random
import string

__all__ = ["ALNUM", "rnd", "upper", "ago", "aws_key", "openai_key"]

ALNUM = string.ascii_letters + string.digits
_rng = random.Random(20261121)


def rnd(n: int, alphabet: str = ALNUM) -> str:
    """Random text of ``n`` characters holding every class (digit, upper, lower) ``alphabet`` has."""
    want = [cls for cls in (str.isdigit, str.isupper, str.islower) if any(cls(c) for c in alphabet)]
    while True:
        s = "".join(_rng.choice(alphabet) for _ in range(n))
        if all(any(cls(c) for c in s) for cls in want):
            return s


def upper(n: int) -> str:
    return "".join(_rng.choice(string.ascii_uppercase + "234567") for _ in range(n))


def ago(days: float) -> str:
    """An ISO 8601 UTC timestamp ``days`` before now (a recording's ``recorded_at``)."""
    t = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=days)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def aws_key() -> str:
    return "AKIA" + upper(16)


def openai_key() -> str:
    return "sk-" + "proj-" + rnd(60, "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789_-")
