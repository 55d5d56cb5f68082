"""The ``casstore`` command line (click), a thin layer over :mod:`casstore.ops`.

``python -m casstore.cli`` is written into users' git config and hooks: keep it working.
``casstore --version`` is answered here, before click is imported (click is ~40 % of that
command's start-up), and so are the everyday command lines of :mod:`casstore.cli.fast`
(``add``, ``verify``, ``status``, ``ls``, ``pull``, ``push``, ``check``); everything else goes
to click (:mod:`casstore.cli.main`).
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["cli", "main"]


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from .. import __version__

        print(f"casstore, version {__version__}")  # what click's version_option prints
        sys.exit(0)
    from .fast import run as run_fast

    if run_fast(sys.argv[1:]):
        return
    from .main import main as run

    run()


def __getattr__(name: str) -> Any:  # `from casstore.cli import cli` loads click only then
    if name == "cli":
        from .main import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
