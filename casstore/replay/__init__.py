"""The replay library: ``casstore.use()`` / ``casstore.tool()`` (:mod:`.api`), the decision
core (:mod:`.session`, :mod:`.policy`), the context variables (:mod:`.context`), the
cassette writer (:mod:`.writer`), the client adapters (:mod:`.httpx`, :mod:`.requests`)
and their scoped installer (:mod:`.install`), and the pytest plugin.

Names are loaded on first access (PEP 562), so importing a submodule (the pytest plugin
does, in every test process) does not load the interception machinery.
"""

from __future__ import annotations

from typing import Any

_API_NAMES = ("use", "tool", "guard", "Use", "Session", "DriftItem", "DriftWarning", "ReplayedError", "MODES",
              "resolve_mode", "current_session", "set_forced_mode")
__all__ = list(_API_NAMES)


def __getattr__(name: str) -> Any:
    if name in _API_NAMES:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'casstore.replay' has no attribute {name!r}")
