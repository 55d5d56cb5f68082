"""The one git boundary: repositories, lock history, what it pins, drivers and hooks."""
