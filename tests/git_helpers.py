"""Moved to ``tests/helpers/gitrepo.py``; this re-export keeps old imports working."""

from tests.helpers.gitrepo import age_tree, commit, hexpath, pin, setup_drivers
from tests.helpers.s3 import age_s3_bucket

__all__ = ["age_s3_bucket", "age_tree", "commit", "hexpath", "pin", "setup_drivers"]
