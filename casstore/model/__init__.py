"""The pure model: names, canonical JSON, blobs, the cassette format, the lock, call identity,
redaction rules, HTTP records and diffs. No I/O and no third-party HTTP imports here.
"""
