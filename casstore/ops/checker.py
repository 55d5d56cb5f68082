"""What ``casstore check`` finds, and how: the report, and the checker that judges each file
and pin (secrets, age, size, signatures, objects) for :func:`casstore.ops.check.check`."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import CasstoreError, NotFoundError, RemoteError
from ..model.blob import digest_and_size
from ..model.canonical import canonical_json, loads_bounded
from ..model.cassette import Cassette
from ..model.defaults import LOCK_FILE
from ..model.lock import Lock, Pin, PinTable, parse_lock
from ..model.names import reserved_part
from ..model.numerals import parse_time
from ..model.redaction import RuleSet
from ..project import Project
from ..store.backends import object_key
from ..store.signing import TrustedKeys, verify_pin
from .check_files import Limits, parse_file, timestamps
from .findings import CheckFinding, allowed, secret_findings

if TYPE_CHECKING:
    from ..git.base import Base

__all__ = ["CheckReport", "Checker", "changed_pins", "finish"]


@dataclass
class CheckReport:
    findings: list[CheckFinding] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # files scanned
    pins_checked: int = 0
    staged: bool = False
    redacted: dict[str, int] = field(default_factory=dict)  # hits the recorder redacted, per rule
    secrets: dict[str, int] = field(default_factory=dict)  # secrets still present, per rule
    suppressed: int = 0  # findings dropped by hygiene.allow
    pins_scanned: int = 0  # pins whose content was scanned (add, --since, the staged lock)
    base: str | None = None  # what the scanned pins were compared with

    @property
    def errors(self) -> list[CheckFinding]:
        return [f for f in self.findings if f.level == "error"]

    @property
    def warnings(self) -> list[CheckFinding]:
        return [f for f in self.findings if f.level == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok, "staged": self.staged, "files": self.files, "pins_checked": self.pins_checked,
            "errors": len(self.errors), "warnings": len(self.warnings), "suppressed": self.suppressed,
            "pins_scanned": self.pins_scanned, "base": self.base,
            "redaction": {"redacted": self.redacted, "found": self.secrets},
            "findings": [f.to_dict() for f in self.findings],
        }


class Checker:
    def __init__(self, project: Project, *, now: _dt.datetime | None, offline: bool) -> None:
        self.project = project
        self.limits = Limits.of(project)
        self.rules = RuleSet.from_config(project.config.redaction)
        self.now = now or _dt.datetime.now(_dt.timezone.utc)
        self.offline = offline
        self.report = CheckReport()
        self.scanned_names: set[str] = set()
        self.scanned_digests: set[str] = set()
        self._allow = list(self.limits.allow)
        self.store_failed = False  # the store could not be asked (reported once): ask it no more

    def add(self, finding: CheckFinding) -> None:
        if allowed(finding, self._allow, self.project.config.cassette_dir):
            self.report.suppressed += 1
            return
        if finding.kind == "secret" and finding.rule:
            self.report.secrets[finding.rule] = self.report.secrets.get(finding.rule, 0) + 1
        self.report.findings.append(finding)

    # -- one cassette file ------------------------------------------------------------------
    def file(self, rel: str, data: bytes) -> None:
        self.report.files.append(rel)
        lim = self.limits
        if lim.max_cassette_bytes and len(data) > lim.max_cassette_bytes:
            self.add(CheckFinding("error", "size", rel,
                                  f"{len(data)} bytes, over hygiene.max_cassette_bytes = {lim.max_cassette_bytes}"))
        obj, err = parse_file(rel, data)
        if err is not None:
            self.add(CheckFinding("error", "format", rel, f"{err}; it cannot be checked for secrets"))
            return
        kind, stamps = timestamps(obj)
        name = None
        if kind == "casstore":
            try:
                cas = Cassette.from_dict(obj, source=rel)
                name = cas.name
                self.scanned_names.add(cas.name)
                self.scanned_digests.add(digest_and_size(cas.canonical_bytes())[0])
            except CasstoreError as exc:
                self.add(CheckFinding("error", "format", rel, str(exc).replace(f"{rel} ", "", 1)))
            red = obj.get("redaction") if isinstance(obj, dict) else None
            hits = red.get("hits") if isinstance(red, dict) else None
            if isinstance(hits, dict):
                for r, n in hits.items():
                    if isinstance(r, str) and isinstance(n, int) and not isinstance(n, bool):
                        self.report.redacted[r] = self.report.redacted.get(r, 0) + n
        for finding in secret_findings(self.rules, rel, obj, name):
            self.add(finding)
        self._entry_sizes(rel, obj, kind, len(data))
        self._age(rel, stamps, name)

    # -- pinned content -------------------------------------------------------------------------
    def pin_contents(self, pins: Iterable[Pin]) -> None:
        """Scan what ``pins`` hold (cache, else the store): the lock alone never shows it."""
        unusable: RemoteError | None = None  # the store cannot be asked: said once, not per pin
        unscanned: list[str] = []
        for pin in pins:
            if pin.digest in self.scanned_digests:
                continue  # the same bytes were scanned as a working copy
            self.scanned_digests.add(pin.digest)
            if self.offline and not self.project.cache.has(pin.digest):
                self.add(CheckFinding("warning", "object", LOCK_FILE, f"{pin.name}: content not scanned: "
                                      "not in the local cache (store not asked: --offline)", cassette=pin.name))
                continue
            if (unusable is not None or self.store_failed) and not self.project.cache.has(pin.digest):
                unscanned.append(pin.name)  # the store's problem is said once, not once per pin
                continue
            try:
                obj = loads_bounded(self.project.fetch_verified(pin), what=f"{pin.name} ({pin.digest[:19]})")
            except NotFoundError:
                continue  # reported by the lock check: neither in the cache nor in the store
            except RemoteError as exc:
                unusable = exc
                unscanned.append(pin.name)
                continue
            except (CasstoreError, ValueError) as exc:
                self.add(CheckFinding("error", "object", LOCK_FILE, f"{pin.name}: content not scanned: {exc}",
                                      cassette=pin.name))
                continue
            self.report.pins_scanned += 1
            for finding in secret_findings(self.rules, LOCK_FILE, obj, pin.name, pin=pin):
                self.add(finding)
        if unusable is not None:
            more = f" and {len(unscanned) - 1} more" if len(unscanned) > 1 else ""
            self.add(CheckFinding("error", "object", LOCK_FILE, f"content of {len(unscanned)} pin(s) not scanned "
                                  f"({unscanned[0]}{more}): not in the local cache, and {unusable}",
                                  cassette=unscanned[0]))

    def trust_range(self, base: Base, old: TrustedKeys, new: TrustedKeys) -> None:
        from ..git.trust import trust_changes

        changes = trust_changes(old, new)
        if changes:
            self.add(CheckFinding(
                "warning", "trust", self.project.config.trusted_keys_file,
                f"trusted signers changed since {base.label}: {'; '.join(c.line() for c in changes)}; "
                f"check the pins against the base with `casstore verify --trust-from {base.rev}`"))

    def _entry_sizes(self, rel: str, obj: Any, kind: str, file_size: int) -> None:
        limit = self.limits.max_entry_bytes
        if not limit or file_size <= limit or not isinstance(obj, dict):
            return
        entries = obj.get("entries" if kind == "casstore" else "interactions")
        if not isinstance(entries, list):
            return
        for i, e in enumerate(entries):
            try:
                size = len(canonical_json(e))
            except CasstoreError:
                continue
            if size > limit:
                self.add(CheckFinding("error", "size", rel,
                                      f"entry {i} is {size} bytes, over hygiene.max_entry_bytes = {limit}", entry=i))

    def _age(self, rel: str, stamps: list[tuple[int | None, Any]], name: str | None,
             *, what: str = "entries were recorded") -> None:
        oldest: tuple[_dt.datetime, int | None] | None = None
        for idx, raw in stamps:
            t = parse_time(raw)
            if t is None:
                where = f"entry {idx}" if idx is not None else "meta"
                self.add(CheckFinding("warning", "age", rel, f"{where} has an unreadable recorded_at; age not checked",
                                      entry=idx, cassette=name))
                continue
            if oldest is None or t < oldest[0]:
                oldest = (t, idx)
        if oldest is None:
            return
        t, idx = oldest
        days = max(0, (self.now - t).days)
        lim = self.limits
        at = f" (entry {idx})" if idx is not None else ""
        hint = "re-record it (CASSTORE_MODE=refresh pytest …) or raise hygiene.max_age_days"
        if lim.max_age_days and days > lim.max_age_days:
            self.add(CheckFinding("error", "age", rel,
                                  f"stale: {what} {days} days ago on {t.date()}{at}; "
                                  f"hygiene.max_age_days is {lim.max_age_days}: {hint}", entry=idx, cassette=name))
        elif lim.warn_age_days and days > lim.warn_age_days:
            self.add(CheckFinding("warning", "age", rel,
                                  f"ageing: {what} {days} days ago on {t.date()}{at} "
                                  f"(warn_age_days {lim.warn_age_days}, max_age_days {lim.max_age_days})",
                                  entry=idx, cassette=name))

    # -- the lock -----------------------------------------------------------------------------
    def parse_lock(self, data: bytes) -> Lock | None:
        try:
            return parse_lock(data)
        except CasstoreError as exc:
            self.add(CheckFinding("error", "lock", LOCK_FILE, str(exc)))
            return None

    def lock(self, lock: Lock, pins: Iterable[Pin], trusted: TrustedKeys | Exception) -> None:
        pins = list(pins)
        self.report.pins_checked += len(pins)
        if isinstance(trusted, Exception):
            self.add(CheckFinding("error", "signature", self.project.config.trusted_keys_file, str(trusted)))
            trusted = TrustedKeys()
        required = self.project.signatures_required(trusted)
        lim = self.limits
        missing: list[Pin] = []
        for pin in pins:
            try:
                verify_pin(pin, trusted, required=required)
            except CasstoreError as exc:
                self.add(CheckFinding("error", "signature", LOCK_FILE, str(exc), cassette=pin.name))
            if lim.max_cassette_bytes and pin.size > lim.max_cassette_bytes:
                self.add(CheckFinding("error", "size", LOCK_FILE,
                                      f"{pin.name}: {pin.size} bytes, over hygiene.max_cassette_bytes = "
                                      f"{lim.max_cassette_bytes}", cassette=pin.name))
            device = reserved_part(pin.name)
            if device is not None:  # pinned before the rule: kept, but no Windows checkout can hold it
                self.add(CheckFinding("warning", "name", LOCK_FILE,
                                      f"{pin.name}: {device!r} is a reserved Windows device name; a Windows "
                                      "checkout cannot hold its working copy (pin it again under another name)",
                                      cassette=pin.name))
            if pin.name not in self.scanned_names and pin.recorded_from:
                self._age(LOCK_FILE, [(None, pin.recorded_from)], pin.name,
                          what=f"{pin.name}: its oldest entry was recorded")
            if not self.project.cache.has(pin.digest):
                missing.append(pin)
        if not missing:
            return
        if self.offline:
            for pin in missing:
                self.add(CheckFinding("warning", "object", LOCK_FILE,
                                      f"{pin.name}: {pin.digest[:19]} is not in the local cache (store not asked: --offline)",
                                      cassette=pin.name))
            return
        try:
            found = self.project.store.exists_many(object_key(p.digest) for p in missing)
        except CasstoreError as exc:
            self.add(CheckFinding("error", "store", LOCK_FILE,
                                  f"cannot ask the store {self.project.remote_url} for {len(missing)} pinned "
                                  f"object(s) (their content is not scanned): {exc}"))
            self.store_failed = True
            return
        for pin in missing:
            if object_key(pin.digest) not in found:
                self.add(CheckFinding("error", "object", LOCK_FILE,
                                      f"{pin.name}: {pin.digest[:19]} is neither in the local cache nor in the "
                                      f"store {self.project.remote_url} (run `casstore add` and `casstore push`)",
                                      cassette=pin.name))


def changed_pins(new: Lock, old: Lock | None) -> list[Pin]:
    if old is None:
        return list(new.pins.values())
    names: Iterable[str] = new.pins
    if isinstance(new.pins, PinTable) and isinstance(old.pins, PinTable):
        # a block whose text is the same in both locks holds the same pin (no Pin built)
        same = old.pins.block
        names = [n for n in new.pins if (b := new.pins.block(n)) is None or b != same(n)]
    out = []
    for name in names:
        pin = new.pins[name]
        prev = old.pins.get(name)
        if prev is None or prev.digest != pin.digest or prev.signatures != pin.signatures or prev.size != pin.size:
            out.append(pin)
    return out


def finish(ch: Checker, staged: bool) -> CheckReport:
    rep = ch.report
    rep.staged = staged
    order = {"error": 0, "warning": 1}
    rep.findings.sort(key=lambda f: (order.get(f.level, 2), f.file, f.entry if f.entry is not None else -1, f.kind))
    rep.files.sort()
    rep.redacted = dict(sorted(rep.redacted.items()))
    rep.secrets = dict(sorted(rep.secrets.items()))
    return rep
