"""Moved: the httpx transports are in :mod:`.httpx`, the requests adapter in :mod:`.requests`,
the installer in :mod:`.install` and the context variables in :mod:`.context`. These names
keep working (``casstore.transport.ReplayTransport`` is documented)."""

from .context import CURRENT, IN_TOOL
from .httpx import AsyncReplayTransport, ReplayTransport
from .install import install, installed, uninstall

__all__ = ["CURRENT", "IN_TOOL", "ReplayTransport", "AsyncReplayTransport", "install", "uninstall", "installed"]
