"""The project's file name and every default value of casstore in one place (pure constants, no imports)."""

from __future__ import annotations

__all__ = ["LOCK_FILE", "CASSETTE_DIR", "ZSTD_LEVEL", "PACK_THRESHOLD", "JOBS", "HYGIENE"]

LOCK_FILE = "casstore.lock"  # the pins, at the project root, committed to git
CASSETTE_DIR = "tests/cassettes"  # where recordings (working copies) are written, from the project root
ZSTD_LEVEL = 9  # zstd level of stored objects (1..22)
PACK_THRESHOLD = 64  # a push of this many objects or more to a remote store writes packs (0: never)
JOBS = 16  # parallel transfers

# [hygiene]: what `casstore check` enforces when the table leaves a key out
HYGIENE: dict[str, int] = {
    "max_age_days": 90,
    "warn_age_days": 0,  # 0: no warning stage unless configured
    "max_cassette_bytes": 50 * 1024 * 1024,
    "max_entry_bytes": 10 * 1024 * 1024,
}
