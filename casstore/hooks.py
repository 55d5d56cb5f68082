"""Moved to :mod:`casstore.git.hooks`; ``python -m casstore.hooks DIR`` keeps working."""

import sys

from .git.hooks import *  # noqa: F401,F403
from .git.hooks import _main

if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
