"""Moved to :mod:`casstore.replay.pytest_plugin`; ``-p casstore.pytest_plugin`` keeps working.

pytest finds hooks and fixtures by name in the module it registers, so every name of the
plugin (the autouse marker fixture too) is re-exported here, not only ``__all__``.
"""

from .replay import pytest_plugin as _plugin

globals().update({k: v for k, v in vars(_plugin).items() if not k.startswith("__")})
