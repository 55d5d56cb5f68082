"""``casstore check`` and the pre-commit hook (``--staged``): what is read (the work tree or the
git index; the pins changed since a base), handed to :class:`~casstore.ops.checker.Checker`."""

from __future__ import annotations

import contextlib
import datetime as _dt
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import CONFIG_FILE, config_of
from ..errors import CasstoreError, ConfigError, UsageError
from ..git.plumbing import GitCommands
from ..model.blob import digest_and_size
from ..model.canonical import loads_bounded
from ..model.cassette import Cassette
from ..model.defaults import LOCK_FILE
from ..model.lock import Lock, parse_lock
from ..project import Project
from ..store.signing import TrustedKeys
from .check_files import CASSETTE_SUFFIXES, Selector, rel_path
from .checker import Checker, CheckReport, changed_pins, finish
from .findings import CheckFinding

if TYPE_CHECKING:
    from ..git.base import Base

__all__ = ["CheckFinding", "CheckReport", "check"]


def check(project: Project, paths: Sequence[Path | str] = (), *, staged: bool = False,
          now: _dt.datetime | None = None, offline: bool = False, since: str | None = None) -> CheckReport:
    """The hygiene checks' report of ``paths`` (the lock only if among them), else the work tree
    and the pins changed since ``since`` / the upstream merge base; ``staged``: the git index."""
    source = _staged_source(project.root.resolve()) if staged else None
    if source is not None:
        project = _as_committed(project, *source)
    base: Base | None = None
    widened: list[str] = []
    if not staged and not paths:
        # the history modules are imported here: the pre-commit hook (--staged) never reads history
        from ..git.base import resolve_base

        base = resolve_base(project, since)
        if base is not None and base.sha is not None:
            project, widened = _judged_by_base(project, base.sha)
    ch = Checker(project, now=now, offline=offline)
    if widened and base is not None:
        ch.add(CheckFinding("warning", "rules", CONFIG_FILE,
                            f"the rules were widened since {base.label}: {'; '.join(widened)}; judged by "
                            f"{base.label}'s rules until the change is merged (merge a rule change on its own)"))
    sel = Selector(project, ch.limits)
    root = sel.root
    for p in paths:
        if not staged and not Path(p).exists():
            raise UsageError(f"{p}: no such file or folder")
    filters = [rel_path(root, Path(p)) for p in paths]

    def under_filters(rel: str) -> bool:
        return not filters or any(rel == f or f in ("", ".") or rel.startswith(f.rstrip("/") + "/") for f in filters)

    if source is not None:  # --staged
        if since is not None:
            raise UsageError("--staged checks the pins the staged lock changes; it takes no --since")
        _check_staged(ch, sel, under_filters, source)
        return finish(ch, staged=True)
    if since is not None and filters:
        raise UsageError("--since scans the pins that changed since REV; it takes no PATH")

    files: list[str]
    if filters:
        files = []
        for f in filters:
            p = root / f
            if p.is_dir():
                files += [x.relative_to(root).as_posix() for x in sorted(p.rglob("*"))
                          if x.is_file() and x.suffix in CASSETTE_SUFFIXES and ".git" not in x.parts]
            else:
                files.append(f)
    else:
        files = sel.walk()
        if project.lock_path.is_file():
            files.append(LOCK_FILE)
    lock_text: bytes | None = None
    for rel in dict.fromkeys(files):
        try:
            data = (root / rel).read_bytes()
        except OSError as exc:
            ch.add(CheckFinding("error", "format", rel, f"cannot read: {exc.strerror or exc}"))
            continue
        if rel == LOCK_FILE:
            lock_text = data
        else:
            ch.file(rel, data)
    lock = ch.parse_lock(lock_text) if lock_text is not None else None
    if lock is not None:
        try:
            trusted: TrustedKeys | Exception = project.trusted_keys()
        except CasstoreError as exc:
            trusted = exc
        ch.lock(lock, lock.pins.values(), trusted)
        if base is not None:
            _since_base(ch, base, lock, trusted)
    return finish(ch, staged=False)


def _judged_by_base(project: Project, sha: bytes) -> tuple[Project, list[str]]:
    """``project`` with the base commit's [redaction] and [hygiene] rules, and how the work
    tree's widen them: a branch cannot let its own secret through by allowing it."""
    import dataclasses

    from ..config import widened_rules
    from ..git.trust import config_at

    before = config_at(project, sha)
    if before is None:  # casstore arrives with this range: its own rules are all there is
        return project, []
    widened = widened_rules(before, project.config)
    if not widened:
        return project, []
    judged = dataclasses.replace(project.config, hygiene=before.hygiene, redaction=before.redaction)
    return Project(project.root, judged, None, project._cache), widened


def _since_base(ch: Checker, base: Base, lock: Lock, trusted: TrustedKeys | Exception) -> None:
    """The content of the pins that differ from ``base``, and what the range did to trust."""
    from ..git.history import lock_at
    from ..git.trust import trusted_keys_at

    ch.report.base = base.label
    old = lock_at(ch.project, base.sha.decode()) if base.sha is not None else None
    ch.pin_contents(changed_pins(lock, old))
    if base.sha is not None and isinstance(trusted, TrustedKeys):
        try:
            before = trusted_keys_at(ch.project, base.sha)
        except CasstoreError as exc:
            ch.add(CheckFinding("warning", "trust", ch.project.config.trusted_keys_file, str(exc)))
            return
        ch.trust_range(base, before, trusted)


def _staged_source(root: Path) -> tuple[GitCommands, str, dict[str, bytes | None]]:
    """(git's commands, ``root``'s folder in the work tree: "" or "sub/", staged path -> sha)."""
    cmds = GitCommands.open(root)
    if cmds is None:
        if shutil.which("git") is None:
            raise UsageError("check --staged reads the git index through git: git is not on PATH")
        raise UsageError(f"{root} is not inside a git work tree")
    staged = cmds.staged_shas()
    if staged is None:
        raise UsageError(f"git could not list what is staged in {cmds.root}")
    return cmds, cmds.prefix, staged


def _at_head(path: str) -> bytes:
    return b"HEAD:" + path.encode("utf-8", "surrogateescape")


def _cat(cmds: GitCommands, specs: list[bytes]) -> list[bytes | None]:
    blobs = cmds.cat(specs)
    if blobs is None:
        raise UsageError(f"git could not read the staged files of {cmds.root}")
    return blobs


def _as_committed(project: Project, reader: GitCommands, prefix: str, staged: dict[str, bytes | None]) -> Project:
    """``project`` with the config its commit will hold (casstore.toml, else pyproject.toml:
    staged, else HEAD's; the work tree's when the commit has neither), so that an unstaged
    edit (an allow, a longer max age) lets no staged file through."""
    specs = [staged[p] if p in staged else _at_head(p)
             for p in (prefix + CONFIG_FILE, prefix + "pyproject.toml")]  # None: deleted by the commit
    wanted = [s for s in specs if s is not None]
    got = iter(_cat(reader, wanted))
    try:
        config = config_of(*(None if s is None else next(got) for s in specs))
    except ConfigError as exc:
        raise ConfigError(f"{exc} (as this commit would hold it)") from None
    return project if config is None or config == project.config else Project(project.root, config, None, project._cache)


def _check_staged(ch: Checker, sel: Selector, under_filters: Callable[[str], bool],
                  source: tuple[GitCommands, str, dict[str, bytes | None]]) -> None:
    reader, prefix, staged = source
    trusted_rel = Path(ch.project.config.trusted_keys_file).as_posix()
    files: list[tuple[str, bytes]] = []  # (rel, staged sha) to read, in path order
    trusted_sha: bytes | None = None
    trusted_staged = False
    for gpath in sorted(staged):
        if not gpath.startswith(prefix):
            continue
        rel = gpath[len(prefix):]
        sha = staged[gpath]
        if rel == trusted_rel:
            trusted_staged, trusted_sha = True, sha
        if sha is None or not sel.wanted(rel) or not under_filters(rel):
            continue  # deleted, or not a file this check looks at
        files.append((rel, sha))
    lock_staged = any(rel == LOCK_FILE for rel, _ in files)
    specs = [sha for _, sha in files]
    # the trusted keys the commit will hold: the staged copy, else (not staged) HEAD's, never
    # an unstaged edit of the work tree's (a key added there would vouch for the pins)
    trusted_spec = trusted_sha if trusted_staged else _at_head(prefix + trusted_rel)
    if trusted_spec is not None and lock_staged:
        specs.append(trusted_spec)
    if lock_staged:
        specs.append(_at_head(prefix + LOCK_FILE))
    blobs = _cat(reader, specs)
    lock_bytes: bytes | None = None
    for (rel, _sha), data in zip(files, blobs, strict=False):
        if data is None:
            ch.add(CheckFinding("error", "format", rel, "cannot read the staged file from git"))
        elif rel == LOCK_FILE:
            lock_bytes = data
        else:
            ch.file(rel, data)
    trusted_bytes = blobs[len(files)] if trusted_spec is not None and lock_staged else None  # None: the work tree's
    tests = [gpath for gpath, sha in staged.items() if sha is not None and gpath.startswith(prefix)
             and gpath.endswith(".py") and under_filters(gpath[len(prefix):])]
    if lock_bytes is None:
        if tests:  # the lock this commit holds: HEAD's
            head = _cat(reader, [_at_head(prefix + LOCK_FILE)])[0]
            with contextlib.suppress(CasstoreError):
                _recordings_pinned(ch, tests, prefix, parse_lock(head) if head is not None else None)
        return
    lock = ch.parse_lock(lock_bytes)
    if lock is None:
        return
    if tests:
        _recordings_pinned(ch, tests, prefix, lock)
    old: Lock | None = None
    prev = blobs[-1]
    if prev is not None:
        try:
            old = parse_lock(prev)
        except CasstoreError:
            old = None
    changed = changed_pins(lock, old)
    if not changed:
        return
    try:
        trusted: TrustedKeys | Exception = (
            TrustedKeys.parse(trusted_bytes.decode("utf-8"), source=trusted_rel)
            if trusted_bytes is not None else ch.project.trusted_keys()
        )
    except (CasstoreError, UnicodeDecodeError) as exc:
        trusted = exc if isinstance(exc, CasstoreError) else UsageError(f"{trusted_rel}: not valid UTF-8")
    ch.lock(lock, changed, trusted)
    ch.pin_contents(changed)


def _recordings_pinned(ch: Checker, tests: list[str], prefix: str, lock: Lock | None) -> None:
    """An error for each working copy a staged test file recorded (``meta.test_file``, else
    a name derived from the file's test ids) that the commit's ``lock`` does not pin, or pins
    with other content: CI would miss what the commit's tests call."""
    staged_tests = set(tests) | {t[len(prefix):] for t in tests}
    stems = {t.rsplit("/", 1)[-1][:-3] for t in tests}
    project = ch.project
    cdir = project.cassette_dir
    pins = lock.pins if lock is not None else {}
    work_pins: Any = None  # the work tree's lock, read once when needed
    for path in sorted(cdir.rglob("*.json")):
        try:
            data = path.read_bytes()
            if b'"casstore.cassette/v1"' not in data:
                continue  # not a casstore working copy
            obj = loads_bounded(data, what=str(path))
            if not isinstance(obj, dict):
                continue
            meta = obj.get("meta")
            test_file = meta.get("test_file") if isinstance(meta, dict) else None
            name = obj.get("name")
            used = test_file in staged_tests if isinstance(test_file, str) else (
                isinstance(name, str) and "/" in name and name.split("/", 1)[0] in stems)
            if not used or not isinstance(name, str):
                continue
            pin = pins.get(name)
            digest = digest_and_size(Cassette.from_dict(obj, source=str(path)).canonical_bytes())[0]
        except (OSError, ValueError, CasstoreError):
            continue  # a working copy that cannot be read is the recording's problem, not this commit's
        if pin is not None and pin.digest == digest:
            continue
        rel = path.relative_to(project.root).as_posix()
        if work_pins is None:
            try:
                work_pins = project.load_lock().pins
            except CasstoreError:
                work_pins = {}
        wpin = work_pins.get(name)
        if wpin is not None and wpin.digest == digest:
            how = f"pinned in {LOCK_FILE}, which is not staged: run `git add {LOCK_FILE}`"
        else:
            what = "recorded but not pinned" if pin is None else f"differs from its pin in {LOCK_FILE}"
            how = f"{what}: run `casstore add {rel}`, then `git add {LOCK_FILE}`"
        test = test_file if isinstance(test_file, str) else next(
            t for t in tests if t.rsplit("/", 1)[-1][:-3] == name.split("/", 1)[0])
        ch.add(CheckFinding("error", "pin", rel, f"{how} (used by the staged {test})", cassette=name))
