"""Storage: the Store interface, its backends, packs, the local cache, transfers and fsck."""
