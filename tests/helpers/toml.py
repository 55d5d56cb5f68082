"""The tests' own TOML reader (a referee beside casstore's): tomllib, or on Python 3.10,
where the standard library has none, tomli (the backport casstore itself reads with there)."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["tomllib"]
