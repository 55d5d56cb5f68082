"""Moved to :mod:`casstore.git.history` (gc: :mod:`casstore.git.gc`); this name keeps working (documented,
and in users' config)."""

from .git.gc import *  # noqa: F401,F403
from .git.history import *  # noqa: F401,F403
