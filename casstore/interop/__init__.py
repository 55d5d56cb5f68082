"""Interop: importers (vcrpy cassettes, JSONL traces) and exporters of readable copies."""
