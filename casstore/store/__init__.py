"""Storage: the Store interface and its local, memory and fsspec backends, packs, the local
cache, parallel transfers, retries and fsck of a store.
"""
