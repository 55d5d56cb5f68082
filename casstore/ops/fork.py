"""``casstore fork NAME --at K --set PATH=VALUE --as NEW``: a working copy of the parent's calls
before ``K`` and call ``K`` with a changed response (``json`` in PATH: the parsed body; VALUE: JSON, else text)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..model.canonical import sha256_digest
from ..model.cassette import Cassette
from ..model.names import validate_name
from ..model.numerals import ascii_int
from ..model.redaction import RuleSet, redact
from ..model.scrub import redact_entry, redact_text
from ..project import Project

__all__ = ["ForkResult", "fork", "fork_cassette", "parse_set"]


@dataclass(frozen=True)
class ForkResult:
    name: str
    parent: str
    at: int
    path: str
    entries: int
    changes: tuple[str, ...]


def parse_set(text: str, rules: RuleSet | None = None) -> tuple[list[str], Any]:
    """``"response.status=429"`` -> ``(["response", "status"], 429)``."""
    path, sep, raw = text.partition("=")
    parts = [p for p in path.strip().split(".") if p]
    if not sep or len(parts) < 2 or parts[0] != "response":
        raise UsageError(f"--set {redact_text(text, rules)!r}: expected PATH=VALUE with PATH under 'response.' "
                         "(e.g. response.status=429, response.json.choices.0.message.content=hi)")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return parts, value


def _json_body(response: dict[str, Any], where: str) -> Any:
    if "body_text" in response:
        try:
            return json.loads(response["body_text"])
        except ValueError:
            raise UsageError(f"{where}: the response body is not JSON") from None
    body = response.get("body")
    if not isinstance(body, (dict, list)):
        raise UsageError(f"{where}: the response has no JSON body")
    return body


def _set_in(container: Any, keys: list[str], value: Any, where: str) -> None:
    for i, key in enumerate(keys):
        last = i == len(keys) - 1
        if isinstance(container, list):
            index: Any = ascii_int(key)  # not "²", "٠", 5000 digits
            if index is None or index >= len(container):
                raise UsageError(f"{where}: no item {key!r} in a list of {len(container)}")
        elif isinstance(container, dict):
            if not last and key not in container:
                raise UsageError(f"{where}: no field {key!r}")
            index = key
        else:
            raise UsageError(f"{where}: {keys[i - 1]!r} is not an object or a list")
        if last:
            container[index] = value
        else:
            container = container[index]


def _apply(entry: dict[str, Any], parts: list[str], value: Any, where: str) -> None:
    response = entry.setdefault("response", {})
    if parts[1] == "json":
        body = copy.deepcopy(_json_body(response, where))
        if len(parts) == 2:
            body = value
        else:
            _set_in(body, parts[2:], value, where)
        response.pop("body_text", None)
        response.pop("body_format", None)
        response.pop("body_base64", None)
        response["body"] = body
        return
    _set_in(response, parts[1:], value, where)


def fork_cassette(parent: Cassette, at: int, sets: list[str], new_name: str, rules: RuleSet | None = None) -> Cassette:
    """The fork of ``parent`` at call ``at`` (pure); the changed call and ``meta.fork.set``
    are redacted like a recorded call (a credential given to --set is never written)."""
    rules = rules or RuleSet()
    validate_name(new_name)
    entries = sorted(parent.entries, key=lambda e: int(e.get("seq", 0)))
    seqs = [int(e.get("seq", 0)) for e in entries]
    if at not in seqs:
        have = f"calls {seqs[0]}..{seqs[-1]}" if seqs else "no calls"
        raise UsageError(f"--at {at}: cassette {parent.name!r} has {have}")
    if not sets:
        raise UsageError("casstore fork: give at least one --set PATH=VALUE")
    kept = [copy.deepcopy(e) for e in entries if int(e.get("seq", 0)) <= at]
    for text in sets:
        parts, value = parse_set(text, rules)
        _apply(kept[-1], parts, value, f"--set {redact_text(text, rules)!r} (call {at})")
    kept[-1], hits = redact_entry(kept[-1], rules)
    shown, set_hits = redact(list(sets), rules)
    meta = {k: v for k, v in parent.meta.items() if k != "fingerprint"}
    meta["fork"] = {"parent": parent.name, "parent_digest": sha256_digest(parent.canonical_bytes()),
                    "at": at, "set": shown}
    redaction = copy.deepcopy(parent.redaction)
    if hits or set_hits:
        total = dict(redaction.get("hits") or {})
        for rule, n in [*hits.items(), *set_hits.items()]:
            total[rule] = total.get(rule, 0) + n
        redaction = {**redaction, "hits": dict(sorted(total.items()))}
    return Cassette(name=new_name, entries=tuple(kept), meta=meta, redaction=redaction)


def fork(project: Project, name: str, at: int, sets: list[str], new_name: str, *, force: bool = False) -> ForkResult:
    validate_name(name)
    parent = project.resolve_cassette(name)
    if parent is None:
        raise UsageError(f"casstore fork: no cassette {name!r} (not in casstore.lock, no working copy "
                         f"at {project.working_copy_path(name).relative_to(project.root)})")
    forked = fork_cassette(parent, at, sets, new_name, RuleSet.from_config(project.config.redaction))
    path: Path = project.working_copy_path(new_name)
    if path.exists() and not force:
        raise UsageError(f"casstore fork: {path.relative_to(project.root)} exists (pick another --as, or --force)")
    path.parent.mkdir(parents=True, exist_ok=True)
    forked.write_file(path)
    return ForkResult(new_name, name, at, str(path.relative_to(project.root)), len(forked.entries),
                      tuple(forked.meta["fork"]["set"]))  # as written: redacted
