"""What ``casstore check`` reads: its limits (``[hygiene]``), which files it selects, how it
parses them (JSON or vcrpy YAML) and the recording times they carry."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import ConfigError, UsageError
from ..model.canonical import loads_bounded
from ..model.cassette import FORMAT_V1
from ..model.defaults import HYGIENE, LOCK_FILE
from ..model.yaml_load import load_yaml, yaml_module
from ..project import Project

__all__ = ["CASSETTE_SUFFIXES", "Limits", "Selector", "parse_file", "rel_path", "timestamps"]

CASSETTE_SUFFIXES = (".json", ".yaml", ".yml")


# -- settings --------------------------------------------------------------------------
@dataclass(frozen=True)
class Limits:
    max_age_days: int
    warn_age_days: int
    max_cassette_bytes: int
    max_entry_bytes: int
    globs: tuple[str, ...]
    allow: tuple[str, ...]

    @classmethod
    def of(cls, project: Project) -> Limits:
        h = project.config.hygiene
        vals = {k: int(h.get(k, v)) for k, v in HYGIENE.items()}
        return cls(**vals, globs=tuple(h.get("globs", ())), allow=tuple(h.get("allow", ())))


# -- file selection ----------------------------------------------------------------------
def _glob_re(pattern: str) -> re.Pattern[str]:
    """A gitignore-like glob over posix paths: ``**`` spans folders, ``*`` does not."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        out.append("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c))
        i += 1
    return re.compile("^" + "".join(out) + r"\Z", re.S)  # a path may hold a line break: ".*" and the end take it


class Selector:
    def __init__(self, project: Project, limits: Limits) -> None:
        self.root = project.root.resolve()
        cdir = PurePosixPath(Path(project.config.cassette_dir).as_posix())
        self.cdir = cdir.as_posix().strip("/")
        bad = [g for g in limits.globs if not g.strip() or ".." in PurePosixPath(g).parts or g.startswith(("/", "~"))]
        if bad:
            raise ConfigError(f"'hygiene.globs' must be relative patterns inside the project, got {bad[0]!r}")
        self.sources = list(limits.globs)
        self.globs = [_glob_re(g) for g in self.sources]

    def wanted(self, rel: str) -> bool:
        if rel == LOCK_FILE:
            return True
        if rel.startswith(self.cdir + "/") and rel.endswith(CASSETTE_SUFFIXES):
            return True
        return any(g.match(rel) for g in self.globs)

    def walk(self) -> list[str]:
        found: set[str] = set()
        cdir = self.root / self.cdir
        if cdir.is_dir():
            for p in cdir.rglob("*"):
                if p.suffix in CASSETTE_SUFFIXES and p.is_file():
                    found.add(p.relative_to(self.root).as_posix())
        for g, rx in zip(self.sources, self.globs, strict=True):
            for p in self.root.glob(g):
                rel = p.relative_to(self.root).as_posix()
                if p.is_file() and rx.match(rel) and ".git/" not in rel + "/":
                    found.add(rel)
        return sorted(found)


def rel_path(root: Path, path: Path) -> str:
    real = path.resolve()
    try:
        return real.relative_to(root).as_posix()
    except ValueError:
        raise UsageError(f"{path}: outside the project {root.name}/") from None


# -- parsing ---------------------------------------------------------------------------
def parse_file(rel: str, data: bytes) -> tuple[Any, str | None]:
    """(value, error message). The message never quotes the file's content."""
    if rel.endswith((".yaml", ".yml")):
        yaml = yaml_module()  # a dependency of casstore
        try:
            return load_yaml(data)[0], None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or "invalid YAML"
            return None, f"is not valid YAML{where}: {problem}"
        except RecursionError:
            return None, "is not valid YAML: nested too deeply"
        except ValueError as exc:
            return None, f"is not valid YAML: {exc}"
    try:
        return loads_bounded(data, what="file"), None
    except ValueError as exc:
        return None, str(exc).replace("file is", "is", 1)


def timestamps(obj: Any) -> tuple[str, list[tuple[int | None, Any]]]:
    """(kind, [(entry index, raw timestamp)]) for a casstore or a vcrpy cassette."""
    stamps: list[tuple[int | None, Any]] = []
    if isinstance(obj, dict) and obj.get("format") == FORMAT_V1:
        raw = obj.get("entries")
        entries: list[Any] = raw if isinstance(raw, list) else []
        stamps = [(i, e.get("recorded_at")) for i, e in enumerate(entries)
                  if isinstance(e, dict) and e.get("recorded_at") is not None]
        meta = obj.get("meta")
        if not stamps and isinstance(meta, dict) and meta.get("recorded_at") is not None:
            stamps = [(None, meta["recorded_at"])]
        return "casstore", stamps
    if isinstance(obj, dict) and isinstance(obj.get("interactions"), list):
        for i, it in enumerate(obj["interactions"]):
            if not isinstance(it, dict):
                continue
            if it.get("recorded_at") is not None:
                stamps.append((i, it["recorded_at"]))
                continue
            headers = (it.get("response") or {}).get("headers") if isinstance(it.get("response"), dict) else None
            if isinstance(headers, dict):
                for k, v in headers.items():
                    if isinstance(k, str) and k.lower() == "date":
                        stamps.append((i, v[0] if isinstance(v, list) and v else v))
                        break
        return "vcr", stamps
    return "other", []
