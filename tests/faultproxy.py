"""Moved to ``tests/helpers/faultproxy.py``; this re-export keeps old imports working."""

from tests.helpers.faultproxy import KINDS, FaultPlan, FaultProxy

__all__ = ["FaultPlan", "FaultProxy", "KINDS"]
