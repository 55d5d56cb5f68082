"""Check findings (a masked preview, never the secret) and the secret scan ``check`` and ``add``
share (apart from :mod:`.check`, so that ``add`` does not import git)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..model.defaults import LOCK_FILE
from ..model.lock import Pin
from ..model.names import mask_name, secrets_in_name
from ..model.redaction import RuleSet, mask, scan
from ..project import Project

__all__ = ["CheckFinding", "SecretScanner", "allowed", "secret_findings"]

_ENTRY = re.compile(r"^\$\.(?:entries|interactions)\[(\d+)\]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _escaped(m: re.Match[str]) -> str:
    return f"\\x{ord(m[0]):02x}"


@dataclass
class CheckFinding:
    level: str  # "error" fails the check, "warning" does not
    kind: str  # secret | age | size | format | signature | object | lock | store | trust
    file: str  # path relative to the project root (posix)
    message: str  # one line, never a secret
    rule: str | None = None
    entry: int | None = None
    path: str | None = None
    preview: str | None = None
    cassette: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        # one line on a terminal, whatever the path holds: its control characters shown as
        # escapes (a staged file named "x\ncommitted 0 error(s)\r.json" printed a forged line)
        return _CONTROL.sub(_escaped, f"{self.file}: {self.message}")


def allowed(finding: CheckFinding, patterns: Sequence[str], cassette_dir: str) -> bool:
    """True when a ``hygiene.allow`` pattern matches the finding's file, kind or rule."""
    if not patterns:
        return False
    files = [finding.file]
    if finding.file == LOCK_FILE and finding.cassette and finding.kind == "secret":
        files.append(f"{Path(cassette_dir).as_posix().strip('/')}/{finding.cassette}.json")
    keys = [k for f in files for k in (f, f"{f}:{finding.kind}")]
    if finding.rule:
        keys += [f"{f}:{finding.rule}" for f in files]
    return any(fnmatch.fnmatchcase(k, pat) for pat in patterns for k in keys)


def secret_findings(rules: RuleSet, rel: str, obj: Any, name: str | None, *,
                    pin: Pin | None = None) -> list[CheckFinding]:
    """One error per secret in ``obj`` (a parsed cassette read from ``rel``, or pinned as ``pin``)."""
    label = name if name is not None else (obj.get("name") if isinstance(obj, dict) else None)
    in_name = secrets_in_name(label, rules) if isinstance(label, str) else []
    if in_name:  # the file's path and the pin's name hold it too: print them masked
        rel = mask_name(rel, in_name)
    head = f"{mask_name(pin.name, in_name)} (pinned {pin.digest[:19]}): " if pin is not None else ""
    out = [CheckFinding("error", "secret", rel, f"{head}secret ({rule}) in the cassette name: {mask(secret)}",
                        rule=rule, path="$.name", preview=mask(secret), cassette=name)
           for rule, secret in in_name]
    for f in scan(obj, rules):
        m = _ENTRY.match(f.path)
        entry = int(m.group(1)) if m else None
        where = f"in entry {entry} " if entry is not None else ""
        out.append(CheckFinding(
            "error", "secret", rel, f"{head}secret ({f.rule}) {where}at {f.path}: {f.preview}",
            rule=f.rule, entry=entry, path=f.path, preview=f.preview, cassette=name,
        ))
    return out


class SecretScanner:
    """What ``check`` would report as secrets in one cassette, for ``add``: the project's
    redaction rules, ``[redaction] allow`` and ``hygiene.allow`` (built once per add)."""

    def __init__(self, project: Project) -> None:
        self.rules = RuleSet.from_config(project.config.redaction)
        self.patterns = tuple(project.config.hygiene.get("allow", ()))
        self.cassette_dir = project.config.cassette_dir

    def __call__(self, rel: Callable[[], str], obj: Any, name: str | None) -> list[CheckFinding]:
        """``rel()`` names the file in findings (only called when there is one)."""
        if not scan(obj, self.rules) and not (name and secrets_in_name(name, self.rules)):
            return []
        return [f for f in secret_findings(self.rules, rel(), obj, name)
                if not allowed(f, self.patterns, self.cassette_dir)]
