"""Moved to :mod:`casstore.replay.transport`; this name keeps working (documented, and in users' config)."""

from .replay.transport import *  # noqa: F401,F403
