"""The ``casstore`` command line (click), a thin layer over :mod:`casstore.ops`.

``python -m casstore.cli`` is written into users' git config and hooks: keep it working.
"""

from .main import cli, main

__all__ = ["cli", "main"]
