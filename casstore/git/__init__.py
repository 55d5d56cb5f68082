"""The one git boundary: reading repositories (:mod:`.repo`), lock history and what it pins
(:mod:`.history`, :mod:`.pinned`), git's diff/merge drivers (:mod:`.drivers`) and the hooks (:mod:`.hooks`).
"""
