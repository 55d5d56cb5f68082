"""The one git boundary: reading repositories (:mod:`.repo`), lock history and gc
(:mod:`.history`, :mod:`.gc`), git's diff/merge drivers (:mod:`.drivers`) and the hooks (:mod:`.hooks`).
"""
