"""Moved to :mod:`casstore.store.retry`; this name keeps working (documented, and in users' config)."""

from .store.retry import *  # noqa: F401,F403
