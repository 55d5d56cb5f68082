"""pytest plugin (entry point ``pytest11``). Filled in by the replay library."""
