"""Old home of the reliability figures: ``record`` now lives in ``tests/helpers/figures.py``
and the hooks in ``tests/conftest.py``; this re-export keeps old imports working."""

from tests.helpers.figures import FIGURES, record

__all__ = ["FIGURES", "record"]
