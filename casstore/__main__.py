"""``python -m casstore``: the ``casstore`` command (as ``python -m casstore.cli``), for an
environment whose scripts folder is not on PATH."""

from .cli import main

main()
