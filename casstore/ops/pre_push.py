"""The pre-push hook's upload: the objects pinned by the pushed commits (read from git's
pre-push lines) that the store lacks, as git-lfs does; a failed upload refuses the push."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CasstoreError
from ..git.history import lock_rel
from ..git.repo import GitRepo
from ..model.defaults import LOCK_FILE
from ..model.lock import Lock, Pin, parse_lock
from ..project import Project
from ..store.transfer import Reporter
from .sync import push_pins

__all__ = ["PrePushReport", "pre_push"]

ZERO_SHA = "0" * 40


@dataclass
class PrePushReport:
    pins: int = 0  # distinct pinned objects new to the remote side
    uploaded: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    store_contacted: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems


def _env_push_lines(cwd: Path) -> list[tuple[str, str, str, str]]:
    """The pushed range as the pre-commit framework passes it (its environment, not stdin); a
    first push sets only PRE_COMMIT_LOCAL_BRANCH: every commit it reaches the remote lacks."""
    to = os.environ.get("PRE_COMMIT_TO_REF")
    local = os.environ.get("PRE_COMMIT_LOCAL_BRANCH")
    remote = os.environ.get("PRE_COMMIT_REMOTE_BRANCH", "")
    if to:
        frm = os.environ.get("PRE_COMMIT_FROM_REF") or ZERO_SHA
        return [(local or "HEAD", to, remote, frm)]
    if local:
        res = subprocess.run(["git", "rev-parse", "--verify", "--quiet", local + "^{commit}"],
                             cwd=cwd, capture_output=True, text=True, timeout=30, check=False)
        sha = res.stdout.strip()
        if res.returncode == 0 and len(sha) >= 40:
            return [(local, sha, remote, ZERO_SHA)]
    return []


def pre_push(project: Project, stdin_text: str, remote_name: str | None = None, *,
             reporter: Reporter | None = None) -> PrePushReport:
    """Upload the objects the store lacks of the pins new to the remote side in the commits
    being pushed, read from git's pre-push lines (``stdin_text``) or the pre-commit framework's
    environment."""
    rep = PrePushReport()
    # '<local ref> <local sha> <remote ref> <remote sha>' per line
    lines = [(p[0], p[1], p[2], p[3]) for p in map(str.split, stdin_text.splitlines())
             if len(p) == 4 and len(p[1]) >= 40 and len(p[3]) >= 40]
    if not lines:
        lines = _env_push_lines(project.root)
        remote_name = remote_name or os.environ.get("PRE_COMMIT_REMOTE_NAME")
    repo = GitRepo(project.root)
    lock_path = lock_rel(project, repo).decode()
    include: list[bytes] = []
    exclude: list[bytes] = []
    need_tracking = False
    for _lref, lsha, _rref, rsha in lines:
        if lsha == ZERO_SHA:
            continue  # a deletion pushes nothing
        c = repo.commit_of(lsha)
        if c is None:
            continue
        include.append(c)
        base = repo.commit_of(rsha) if rsha != ZERO_SHA else None
        if base is not None:
            exclude.append(base)
        else:
            need_tracking = True
    if not include:
        return rep
    if need_tracking and remote_name:
        pref = f"refs/remotes/{remote_name}/"
        exclude.extend(sha for ref, sha in repo.ref_tips().items() if ref.startswith(pref))

    def lock_at(sha: bytes) -> Lock | None:
        data = repo.read_at(sha, lock_path)
        if data is None:
            return None
        try:
            return parse_lock(data)
        except CasstoreError as exc:
            rep.problems.append(f"{LOCK_FILE} in commit {sha.decode()[:10]} does not parse: {exc}")
            return None

    known: set[str] = set()
    for sha in set(exclude):
        lk = lock_at(sha)
        if lk is not None:
            known |= lk.digests()
    wanted: dict[str, Pin] = {}
    for commit in repo.walk(include, lock_path, exclude=exclude):
        lk = lock_at(commit.sha.encode())
        if lk is None:
            continue
        for pin in lk.pins.values():
            if pin.digest not in known and pin.digest not in wanted:
                wanted[pin.digest] = pin
    rep.pins = len(wanted)
    if rep.problems or not wanted:
        return rep
    rep.store_contacted = True
    tr = push_pins(project, [p for _, p in sorted(wanted.items())], reporter=reporter)
    rep.uploaded = tr.done
    rep.already = tr.skipped
    rep.problems.extend(p.line() for p in tr.problems)
    return rep
