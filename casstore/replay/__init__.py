"""The replay library: ``casstore.use()`` / ``casstore.tool()`` (:mod:`.api`) and the engine
behind them; names load on first access, so the pytest plugin loads no interception.
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
