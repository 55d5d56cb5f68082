"""Moved to :mod:`casstore.git.drivers`; this name keeps working (documented, and in users' config)."""

from .git.drivers import *  # noqa: F401,F403
