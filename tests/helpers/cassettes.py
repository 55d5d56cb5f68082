"""Small valid format-v1 cassettes, and writing them where ``casstore add`` finds them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from casstore.model.blob import compress, digest_and_size
from casstore.model.canonical import canonical_json
from casstore.model.lock import Pin
from casstore.project import Project
from casstore.store import signing
from tests.helpers.fakes import ago

__all__ = ["make_cassette", "write_cassette", "leaky", "leaky_doc", "smuggle", "damage_cached"]


def make_cassette(name: str, *, n: int = 2, recorded_at: str = "2026-11-20T10:00:00Z",
                  body: dict | None = None) -> dict:
    """A small valid format-v1 cassette (for store/lock/CLI tests)."""
    entries = []
    for i in range(n):
        req = {"method": "POST", "url": "http://127.0.0.1/v1/chat/completions",
               "headers": {"content-type": "application/json"},
               "body": {"model": "gpt-test", "messages": [{"role": "user", "content": f"{name} #{i}"}]}}
        entries.append({
            "identity": hashlib.sha256(json.dumps(req, sort_keys=True).encode()).hexdigest(),
            "seq": i, "kind": "llm", "target": "POST http://127.0.0.1/v1/chat/completions",
            "request": req,
            "response": {"status": 200, "headers": {"content-type": "application/json"},
                         "body": body or {"choices": [{"message": {"content": f"answer {i}"}}]}},
            "recorded_at": recorded_at, "duration_ms": 12,
        })
    return {"format": "casstore.cassette/v1", "name": name,
            "meta": {"recorded_at": recorded_at, "recorder": "tests", "models": ["gpt-test"]},
            "entries": entries, "redaction": {"rules": [], "hits": {}}}


def write_cassette(repo: Path, name: str, **kw) -> Path:  # type: ignore[no-untyped-def]
    """``make_cassette(name, **kw)`` written as the working copy ``tests/cassettes/<name>.json``."""
    path = repo / "tests" / "cassettes" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(make_cassette(name, **kw), indent=2))
    return path


def leaky(repo: Path, name: str, secret: str, **kw) -> Path:  # type: ignore[no-untyped-def]
    """A working copy whose answers carry ``secret`` (what the hygiene check must refuse)."""
    return write_cassette(repo, name, body={"choices": [{"message": {"content": f"your key is {secret}"}}]}, **kw)


def leaky_doc(name: str, secret: str, *, where: str = "target") -> dict:
    """A cassette with ``secret`` in its second entry's target (or, ``where="body"``, its answer)."""
    doc = make_cassette(name, n=2, recorded_at=ago(1))
    e = doc["entries"][1]
    if where == "target":
        e["target"] = f"GET http://127.0.0.1/v1/search?q={secret}"
        e["request"]["url"] = "http://127.0.0.1/v1/search?q=[REDACTED:openai-key]"
    else:
        e["response"]["body"] = {"choices": [{"message": {"content": f"the key is {secret}"}}]}
    return doc


def smuggle(repo: Path, doc: dict) -> str:
    """Pin ``doc`` as-is (signed by the user's trusted key), bypassing `casstore add`."""
    project = Project.discover(repo)
    data = canonical_json(doc)
    digest, size = digest_and_size(data)
    project.cache.put_frame(digest, size, compress(data))
    key = signing.load_signing_key()
    pin = Pin(name=doc["name"], digest=digest, size=size, entries=len(doc["entries"]),
              recorded_from=doc["entries"][0]["recorded_at"], recorded_to=doc["entries"][-1]["recorded_at"],
              models=("gpt-test",))
    sig = key.sign_pin(pin)
    project.cache.put_signature(digest, sig.keyid, signing.make_envelope(pin, key, sig))
    with project.locked():
        project.save_lock(project.load_lock().with_pin(pin.with_signatures([sig])))
    return digest


def damage_cached(cache_root: Path, digest: str) -> str:
    """Overwrite the last 4 bytes of ``digest``'s cached frame with zeros, in its loose file
    or in the pack that holds it (as bit rot would). Returns "loose" or "packed"."""
    loose = cache_root / "objects" / "sha256" / digest[7:9] / digest[9:]
    if loose.is_file():
        loose.chmod(0o644)
        loose.write_bytes(loose.read_bytes()[:-4] + b"\0\0\0\0")
        return "loose"
    key = f"objects/sha256/{digest[7:9]}/{digest[9:]}"
    for idx in sorted((cache_root / "packs").glob("*.idx")):
        for member, offset, length in json.loads(idx.read_text())["members"]:
            if member == key:
                pack = idx.with_suffix(".pack")
                pack.chmod(0o644)
                data = bytearray(pack.read_bytes())
                data[offset + length - 4 : offset + length] = b"\0\0\0\0"
                pack.write_bytes(bytes(data))
                return "packed"
    raise AssertionError(f"{digest} is not in the cache {cache_root}")
