"""The function API behind the command line, in one namespace (``api.push(...)``).

A front only: each verb group lives in its own module, which new code imports directly —
:mod:`.init` (init, keys), :mod:`.add`, :mod:`.sync` (push, pull), :mod:`.pre_push`,
:mod:`.verify`, :mod:`.inspect` (ls, show, status) and :mod:`.results` (what they share).
"""

from __future__ import annotations

from .add import Added, add
from .init import InitResult, KeyGenerated, generate_key, init, list_keys, trust_key
from .inspect import ls, show, status
from .pre_push import pre_push
from .results import Problem, TransferReport, as_json
from .sync import pull, push, push_pins
from .verify import VerifyReport, verify

__all__ = [
    "Problem",
    "as_json",
    "InitResult",
    "KeyGenerated",
    "init",
    "trust_key",
    "generate_key",
    "list_keys",
    "Added",
    "add",
    "TransferReport",
    "push",
    "push_pins",
    "pull",
    "pre_push",
    "VerifyReport",
    "verify",
    "ls",
    "show",
    "status",
]
