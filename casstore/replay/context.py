"""The context variables every part of replay reads: which session sees a call."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .session import Session

__all__ = ["CURRENT", "IN_TOOL", "BYPASS", "active"]

# The session of the innermost active use() block in this context.
CURRENT: ContextVar[Session | None] = ContextVar("casstore_session", default=None)
# Set while a tool function runs live: its own HTTP calls are not recorded (replay
# returns the tool's result without running it), but CASSTORE_OFFLINE still applies.
IN_TOOL: ContextVar[Session | None] = ContextVar("casstore_in_tool", default=None)
# Set while an adapter makes the real call, so a patched inner transport passes it on.
BYPASS: ContextVar[bool] = ContextVar("casstore_bypass", default=False)


def active(var: ContextVar[Session | None] = CURRENT) -> Session | None:
    """The session ``var`` holds in this context, or ``None`` once its block has ended."""
    session = var.get()
    return None if session is None or session.closed else session
