"""Moved to :mod:`casstore.git.history`; this name keeps working (documented, and in users' config)."""

from .git.history import *  # noqa: F401,F403
