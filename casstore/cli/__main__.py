"""``python -m casstore.cli``: what installed git hooks and drivers run."""

from . import main

main()
