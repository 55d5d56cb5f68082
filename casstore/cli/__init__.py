"""The ``casstore`` command line (click), a thin layer over :mod:`casstore.ops`.

``python -m casstore.cli`` is written into users' git config and hooks: keep it working.
"""

from __future__ import annotations

from typing import Any

__all__ = ["cli", "main"]


def main() -> None:
    from .main import main as run

    run()


def __getattr__(name: str) -> Any:  # `from casstore.cli import cli` loads click only then
    if name == "cli":
        from .main import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
