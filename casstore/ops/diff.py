"""``casstore diff``: which recorded calls changed between two locks, and who may sign.

Calls are matched by identity (:func:`casstore.model.diff.diff_locks`); cassettes come from
the cache, else the store. Whatever is shown is redacted again with the project's rules.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import UsageError
from ..git import history
from ..git.repo import GitRepo
from ..git.trust import TrustChange, trust_changes, trusted_keys_at
from ..model.cassette import Cassette, load_bytes
from ..model.diff import LockDiff, diff_locks, render_lock_diff
from ..model.lock import Lock, Pin
from ..model.redaction import RuleSet, redact
from ..model.scrub import redact_text
from ..project import Project
from ..store.signing import TrustedKeys

__all__ = ["DiffReport", "diff"]


@dataclass
class DiffReport:
    labels: tuple[str, str]
    result: LockDiff
    trust: list[TrustChange]
    rules: RuleSet
    loaded: dict[str, Cassette] = field(default_factory=dict)  # by digest: the compared cassettes

    def to_json(self) -> Any:
        return redact({"old": self.labels[0], "new": self.labels[1], "unchanged": self.result.unchanged,
                       "cassettes": [asdict(c) for c in self.result.cassettes],
                       "trust": [c.to_dict() for c in self.trust]}, self.rules)[0]

    def text(self) -> str:
        lines = [f"trusted_keys: {c.line()}\n" for c in self.trust]
        lines.append(f"casstore.lock: {self.labels[0]} → {self.labels[1]}\n")
        return "".join(lines) + redact_text(render_lock_diff(self.result), self.rules)

    def review(self, *, html: bool) -> str:
        """The markdown review, or the self-contained HTML page."""
        from .view import diff_data, diff_markdown, render_page

        data = diff_data(self.labels, self.result, [c.to_dict() for c in self.trust],
                         lambda d: self.loaded.get(d) if d else None, self.rules)
        return render_page(data) if html else diff_markdown(data)


def diff(project: Project, revs: tuple[str, ...] = ()) -> DiffReport:
    """No revision: HEAD against the working lock; one: REV against it; two: REV1 against REV2."""
    if len(revs) > 2:
        raise UsageError("casstore diff takes at most two revisions")
    has_head = GitRepo(project.root).head() is not None
    if not revs:
        labels = ("HEAD", "working tree")
        old = history.lock_at(project, "HEAD") if has_head else Lock()  # no commit yet: everything is new
        trust_revs: tuple[str | None, str | None] = ("HEAD" if has_head else "", None)
    else:
        labels = (revs[0], revs[1] if len(revs) == 2 else "working tree")
        old, trust_revs = history.lock_at(project, revs[0]), (revs[0], revs[1] if len(revs) == 2 else None)
    new = history.lock_at(project, trust_revs[1])
    # who may sign is part of what a change changes: listed with the cassettes
    trust = trust_changes(*(trusted_keys_at(project, r) if r != "" else TrustedKeys() for r in trust_revs))
    report = DiffReport(labels, LockDiff(), trust, RuleSet.from_config(project.config.redaction))

    def load(pin: Pin) -> Cassette:
        c = report.loaded[pin.digest] = load_bytes(project.fetch_verified(pin), source=f"{pin.name} ({pin.digest[:19]})")
        return c

    report.result = diff_locks(old, new, load)
    return report
