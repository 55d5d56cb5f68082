"""Interop: importers (vcrpy cassettes, JSONL traces) and exporters of readable copies.

:mod:`.imports` is the import front (read, write working copies, pin); :mod:`.vcr` and
:mod:`.jsonl` are its readers, built on the shared entry and cassette builders of
:mod:`.build`; :mod:`.export` writes readable copies.
"""
