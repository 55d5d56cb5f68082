"""``casstore diff``: which recorded calls changed between two locks, and who may sign; as text,
JSON, or a review (markdown, or a page). What is shown is redacted again by the project's rules."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..git import history
from ..git.repo import GitRepo
from ..git.trust import TrustChange, trust_changes, trusted_keys_at
from ..model.cassette import Cassette, load_bytes
from ..model.diff import LockDiff, diff_locks, entry_field_pairs, render_lock_diff
from ..model.fielddiff import ABSENT
from ..model.lock import Lock, Pin
from ..model.redaction import RuleSet, redact
from ..model.scrub import redact_text
from ..project import Project
from ..store.signing import TrustedKeys
from .view_page import render_page

__all__ = ["DiffReport", "diff", "diff_data", "diff_markdown", "MARKDOWN_CAP"]

MARKDOWN_CAP = 60_000  # characters: under GitHub's 65,536 for a comment (the step summary takes 1 MiB)
VALUE_CAP = 4_000  # characters of one side of a field diff shown in a page


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
        data = diff_data(self)
        return render_page(data) if html else diff_markdown(data)


def diff(project: Project, revs: tuple[str, ...] = ()) -> DiffReport:
    """No revision: HEAD against the working lock; one: REV against it; two: REV1 against REV2."""
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


# -- the review: a page or markdown --------------------------------------------------------
def _side(value: Any) -> str | None:
    if value is ABSENT:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= VALUE_CAP else text[: VALUE_CAP - 1] + "…"


def diff_data(report: DiffReport) -> dict[str, Any]:
    """The data of a review page: the report's :class:`LockDiff` with, per changed call, its
    fields side by side (from the cassettes the diff loaded)."""
    out = []
    for c in report.result.cassettes:
        old = report.loaded.get(c.old_digest) if c.old_digest else None
        new = report.loaded.get(c.new_digest) if c.new_digest else None
        old_by = {e.get("seq", i): e for i, e in enumerate(old.entries)} if old else {}
        new_by = {e.get("seq", i): e for i, e in enumerate(new.entries)} if new else {}
        calls = []
        for x in c.changes:
            call: dict[str, Any] = {"change": x.change, "seq": x.new_seq if x.new_seq is not None else x.old_seq,
                                    "kind": x.kind, "target": x.target, "identity": x.identity[:12],
                                    "summary": x.summary, "fields": list(x.fields), "more_fields": x.more_fields}
            if x.change == "changed" and x.old_seq in old_by and x.new_seq in new_by:
                call["pairs"] = [{"path": p, "old": _side(a), "new": _side(b)}
                                 for p, a, b in entry_field_pairs(old_by[x.old_seq], new_by[x.new_seq])]
            calls.append(call)
        models = (old.models() if old else [], new.models() if new else [])
        out.append({"name": c.name, "status": c.status, "old_digest": c.old_digest, "new_digest": c.new_digest,
                    "old_entries": c.old_entries, "new_entries": c.new_entries, "unchanged": c.unchanged,
                    "old_signers": c.old_signers, "new_signers": c.new_signers, "error": c.error,
                    "old_models": models[0], "new_models": models[1], "calls": calls})
    data, _hits = redact({"page": "diff", "old": report.labels[0], "new": report.labels[1],
                          "unchanged": report.result.unchanged, "trust": [t.to_dict() for t in report.trust],
                          "cassettes": out}, report.rules)
    return dict(data)


def _md(text: Any) -> str:
    """Text safe in a markdown table cell or line: no HTML, no table break, no code-span break."""
    s = "" if text is None else str(text)
    s = s.replace("\\", "\\\\").replace("`", "\\`").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    s = s.replace("*", "\\*").replace("_", "\\_").replace("[", "\\[").replace("]", "\\]")
    return " ".join(s.split())


def _cell(value: str | None, width: int = 120) -> str:
    if value is None:
        return "*(absent)*"
    return _md(value if len(value) <= width else value[: width - 1] + "…")


def diff_markdown(data: Mapping[str, Any], *, cap: int = MARKDOWN_CAP) -> str:
    """A review of :func:`diff_data` in GitHub markdown, at most ``cap`` characters; what does
    not fit is counted on a last line."""
    mark = {"added": "➕", "removed": "➖", "changed": "✏️", "re-signed": "🔏"}
    head = [f"### casstore: recorded calls, {_md(data['old'])} → {_md(data['new'])}", ""]
    cassettes = data.get("cassettes") or []
    if not cassettes:
        head.append(f"No cassette changed ({data.get('unchanged', 0)} unchanged).")
    else:
        head.append(f"{len(cassettes)} cassette(s) changed, {data.get('unchanged', 0)} unchanged.")
    for t in data.get("trust") or []:
        head.append(f"- **trusted keys**: {_md(t.get('change'))} {_md(t.get('keyid'))} {_md(t.get('identity'))}")
    blocks: list[list[str]] = []
    for c in cassettes:
        counts = {k: sum(1 for x in c["calls"] if x["change"] == k) for k in ("added", "removed", "changed")}
        lines = ["", f"#### {mark.get(c['status'], '')} {_md(c['name'])} ({c['status']})", ""]
        lines.append(f"- entries: {c['old_entries'] if c['old_entries'] is not None else '-'} → "
                     f"{c['new_entries'] if c['new_entries'] is not None else '-'}; calls: +{counts['added']} "
                     f"-{counts['removed']} ~{counts['changed']} ={c['unchanged']}")
        if c["old_models"] != c["new_models"]:
            lines.append(f"- models: {_md(', '.join(c['old_models']) or '-')} → {_md(', '.join(c['new_models']) or '-')}")
        if c["old_signers"] != c["new_signers"]:
            lines.append(f"- signers: {_md(', '.join(c['old_signers']) or '-')} → {_md(', '.join(c['new_signers']) or '-')}")
        if c.get("error"):
            lines.append(f"- calls not compared: {_md(c['error'])}")
        for x in c["calls"]:
            lines.append(f"- {mark.get(x['change'], '')} #{x['seq']} {_md(x['summary'])}")
            if x.get("pairs"):
                lines += ["", "  | field | before | after |", "  |---|---|---|"]
                lines += [f"  | {_md(p['path'])} | {_cell(p['old'])} | {_cell(p['new'])} |" for p in x["pairs"]]
                lines.append("")
            else:
                lines += [f"  - {_md(f)}" for f in x["fields"]]
        blocks.append(lines)
    out = "\n".join(head) + "\n"
    room = cap - len(out) - 200  # kept for the closing line
    for n, lines in enumerate(blocks):
        for k, line in enumerate(lines):
            if len(line) + 1 > room:
                rest = len(lines) - k + sum(len(b) for b in blocks[n + 1:])
                return out + (f"\n*Left out to fit: {rest} line(s), {len(blocks) - n - (k == 0)} cassette(s) not "
                              f"shown in full; run `casstore diff --html -o review.html` for the whole review.*\n")
            out += line + "\n"
            room -= len(line) + 1
    return out
