"""The pre-commit and pre-push hooks (the repository's ``hooks/``, written by ``python -m
casstore.git.hooks DIR``): install and uninstall; a hook already there is chained (docs/hooks.md)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError

__all__ = [
    "HOOK_NAMES",
    "SCRIPTS",
    "MARKER",
    "install",
    "uninstall",
    "hooks_dir",
    "installed",
    "render",
    "write_scripts",
]

MARKER = "# casstore-hook: v1"
CHAIN_SUFFIX = ".pre-casstore"
HOOK_NAMES = ("pre-commit", "pre-push")

_RUNNER = r"""INSTALL_PYTHON=''
PROJECT_DIR=''

casstore_run() {
    if [ -n "$PROJECT_DIR" ]; then
        # the project is a folder of the work tree, and git runs hooks at its top: git's own
        # relative paths made absolute first (they name the repository from here), then there
        for v in GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_COMMON_DIR GIT_OBJECT_DIRECTORY; do
            eval "p=\${$v:-}"
            case $p in ''|/*) ;; *) eval "$v=\$PWD/\$p"; export "$v" ;; esac
        done
        cd -- "$PROJECT_DIR" || return 1
    fi
    if [ -n "${CASSTORE_HOOK_CMD:-}" ]; then
        # the variable holds a command and its arguments: split it on purpose
        $CASSTORE_HOOK_CMD "$@"
    elif [ -n "$INSTALL_PYTHON" ] && [ -x "$INSTALL_PYTHON" ]; then
        "$INSTALL_PYTHON" -m casstore.cli "$@"
    elif command -v casstore >/dev/null 2>&1; then
        casstore "$@"
    elif command -v python3 >/dev/null 2>&1 && python3 -c 'import casstore' >/dev/null 2>&1; then
        python3 -m casstore.cli "$@"
    else
        echo "casstore hook: casstore is not installed here (pip install casstore);" >&2
        echo "casstore hook: to skip this hook once, pass --no-verify to git" >&2
        return 1
    fi
}

here=$(dirname -- "$0")
"""

PRE_COMMIT = (
    "#!/bin/sh\n"
    + MARKER + " pre-commit\n"
    + r"""# Installed by `casstore hooks install` (see docs/hooks.md). Runs `casstore check --staged`:
# refuses a commit that stages a cassette holding a secret, a stale recording, or a pin
# without a trusted signature or without its object. Bypass once: git commit --no-verify
# (CI runs `casstore check` anyway). A hook that was here before is kept as
# pre-commit.pre-casstore and runs first.
"""
    + _RUNNER
    + r"""
if [ -x "$here/pre-commit.pre-casstore" ]; then
    "$here/pre-commit.pre-casstore" "$@" || exit $?
fi
casstore_run check --staged
"""
)

PRE_PUSH = (
    "#!/bin/sh\n"
    + MARKER + " pre-push\n"
    + r"""# Installed by `casstore hooks install` (see docs/hooks.md). Uploads to the casstore
# remote every object pinned in the commits being pushed that the store lacks, and refuses
# the push if an upload fails. A push that pins nothing new does not contact the store.
# A hook that was here before is kept as pre-push.pre-casstore and runs first.
"""
    + _RUNNER
    + r"""
input=$(cat)
if [ -x "$here/pre-push.pre-casstore" ]; then
    printf '%s\n' "$input" | "$here/pre-push.pre-casstore" "$@" || exit $?
fi
printf '%s\n' "$input" | casstore_run hooks pre-push "$@"
"""
)

SCRIPTS: dict[str, str] = {"pre-commit": PRE_COMMIT, "pre-push": PRE_PUSH}


def render(name: str, python: str | None = None, project_dir: str = "") -> str:
    """The script for hook ``name`` with ``INSTALL_PYTHON`` (default: this interpreter) and
    ``PROJECT_DIR`` (the project's folder from the top of the work tree) set."""
    python = sys.executable if python is None else python
    text = SCRIPTS[name].replace("INSTALL_PYTHON=''", f"INSTALL_PYTHON={shlex.quote(python)}", 1)
    return text.replace("PROJECT_DIR=''", f"PROJECT_DIR={shlex.quote(project_dir)}", 1) if project_dir else text


def write_scripts(folder: Path) -> list[Path]:
    """Write the template scripts (``INSTALL_PYTHON`` empty) into ``folder``, executable."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, text in SCRIPTS.items():
        p = folder / name
        p.write_text(text, encoding="utf-8")
        p.chmod(0o755)
        out.append(p)
    return out


# -- where hooks live -----------------------------------------------------------------------
def hooks_dir(root: Path) -> Path:
    """The folder git runs hooks from: ``core.hooksPath`` if set, else ``$GIT_DIR/hooks``."""
    try:
        res = subprocess.run(["git", "rev-parse", "--git-path", "hooks"], cwd=root, capture_output=True,
                             text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise UsageError(f"cannot run git to find the hooks folder: {exc}") from None
    if res.returncode != 0:
        raise UsageError(f"{root} is not inside a git repository (git: {res.stderr.strip() or res.returncode})")
    path = Path(res.stdout.strip())
    return path if path.is_absolute() else (root / path)


def _prefix(root: Path) -> str:
    """``root``'s folder from the top of its work tree, without the final slash ("" at the top)."""
    from .plumbing import git_output

    out = git_output(root, ["rev-parse", "--show-prefix"])
    return out.decode("utf-8", "surrogateescape").strip("\n").rstrip("/") if out is not None else ""


def _is_ours(path: Path) -> bool:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            head = fh.read(512)
    except OSError:
        return False
    return MARKER in head


def installed(root: Path, name: str) -> bool:
    """Whether casstore's ``name`` hook is installed in ``root``'s repository."""
    try:
        return _is_ours(hooks_dir(root) / name)
    except UsageError:
        return False


@dataclass
class InstallReport:
    hooks_dir: str
    actions: list[str] = field(default_factory=list)  # one line per hook and per extra step


def install(root: Path, *, python: str | None = None, drivers: bool = True) -> InstallReport:
    """Install (or update) the pre-commit and pre-push hooks, chaining any existing hook."""
    root = Path(root)
    folder = hooks_dir(root)
    folder.mkdir(parents=True, exist_ok=True)
    rep = InstallReport(hooks_dir=str(folder))
    project_dir = _prefix(root)
    for name in HOOK_NAMES:
        target = folder / name
        chained = folder / (name + CHAIN_SUFFIX)
        text = render(name, python, project_dir)
        if target.exists() or target.is_symlink():
            if _is_ours(target):
                if target.read_text(encoding="utf-8", errors="replace") == text and os.access(target, os.X_OK):
                    rep.actions.append(f"{name}: already installed")
                    continue
                _write_hook(target, text)
                rep.actions.append(f"{name}: updated")
                continue
            if chained.exists() or chained.is_symlink():
                raise UsageError(
                    f"{target} exists and so does {chained.name}; refusing to overwrite either "
                    "(merge them by hand, then run `casstore hooks install` again)"
                )
            target.rename(chained)
            _write_hook(target, text)
            rep.actions.append(f"{name}: installed; the existing hook now runs first as {chained.name}")
        else:
            _write_hook(target, text)
            rep.actions.append(f"{name}: installed")
    if drivers:
        from .drivers import register  # the lock's diff and merge drivers

        rep.actions.extend(register(root))
    return rep


def uninstall(root: Path, *, drivers: bool = True) -> InstallReport:
    """Remove our hooks and put back the hooks they chained. Hooks that are not ours stay."""
    folder = hooks_dir(Path(root))
    rep = InstallReport(hooks_dir=str(folder))
    for name in HOOK_NAMES:
        target = folder / name
        chained = folder / (name + CHAIN_SUFFIX)
        if not target.exists() and not target.is_symlink():
            rep.actions.append(f"{name}: not installed")
        elif not _is_ours(target):
            rep.actions.append(f"{name}: not casstore's hook; left alone")
            continue
        else:
            target.unlink()
            rep.actions.append(f"{name}: removed")
        if chained.exists() or chained.is_symlink():
            if target.exists():
                rep.actions.append(f"{name}: {chained.name} kept ({name} exists)")
            else:
                chained.rename(target)
                rep.actions.append(f"{name}: restored the previous hook")
    if drivers:
        from .drivers import unregister

        rep.actions.extend(unregister(Path(root)))
    return rep


def _write_hook(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.casstore-tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o755)
    os.replace(tmp, path)


def _main(argv: Iterable[str]) -> int:
    """``python -m casstore.git.hooks DIR``: write the template scripts into DIR (keeps hooks/ in sync)."""
    args = list(argv)
    if len(args) != 1:
        print("usage: python -m casstore.git.hooks DIR", file=sys.stderr)
        return 2
    for p in write_scripts(Path(args[0])):
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
