"""Configuration: ``casstore.toml`` or ``[tool.casstore]`` in ``pyproject.toml``; an unknown
key is an error that names it (a typo must not silently disable a rule)."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError, UsageError
from .model import defaults
from .model.defaults import LOCK_FILE
from .model.urls import mask_options

__all__ = ["Config", "load_config", "widened_rules", "config_of", "CONFIG_FILE", "MODES", "read_toml", "locate"]

CONFIG_FILE = "casstore.toml"
_PYPROJECT = "pyproject.toml [tool.casstore]"  # the source a config of pyproject.toml is named by
MODES = ("live", "record", "replay", "auto", "record-new", "refresh", "drift")

# Keys each section accepts. Sections owned by other modules list their keys here too,
# so that one place answers "is this a typo?".
TOP_KEYS = {"remote", "cassette_dir", "mode", "zstd_level", "jobs", "trust", "hygiene", "redaction", "replay"}
REMOTE_KEYS = {"url", "options", "pack_threshold"}
TRUST_KEYS = {"require_signatures", "trusted_keys"}
HYGIENE_KEYS = {
    "max_age_days",
    "warn_age_days",
    "max_cassette_bytes",
    "max_entry_bytes",
    "globs",
    "allow",
}
REDACTION_KEYS = {"paths", "patterns", "keys", "allow", "placeholder"}
REPLAY_KEYS = {"allowed_hosts", "timing", "pin"}


@dataclass(frozen=True)
class Config:
    remote_url: str | None = None
    remote_options: dict[str, Any] = field(default_factory=dict)
    cassette_dir: str = defaults.CASSETTE_DIR
    mode: str | None = None
    zstd_level: int = defaults.ZSTD_LEVEL
    jobs: int = defaults.JOBS
    pack_threshold: int = defaults.PACK_THRESHOLD  # a push of this many objects or more writes packs (0: never)
    require_signatures: bool | None = None  # None: required when trusted_keys has keys
    trusted_keys_file: str = ".casstore/trusted_keys"
    hygiene: dict[str, Any] = field(default_factory=dict)
    redaction: dict[str, Any] = field(default_factory=dict)
    allowed_hosts: tuple[str, ...] = ()  # [replay] allowed_hosts: live calls offline mode lets through
    replay: dict[str, Any] = field(default_factory=dict)
    source: str = "defaults"

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "config") -> Config:
        problems: list[str] = []
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a table")

        def unknown(section: str, got: dict, allowed: set[str]) -> None:
            extra = sorted(set(got) - allowed)
            if extra:
                where = f"[{section}]" if section else "top level"
                problems.append(
                    f"unknown key{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))} in {where} "
                    f"(allowed: {', '.join(sorted(allowed))})"
                )

        unknown("", data, TOP_KEYS)
        kw: dict[str, Any] = {"source": source}

        remote = data.get("remote")
        if isinstance(remote, str):
            kw["remote_url"] = remote
        elif isinstance(remote, dict):
            unknown("remote", remote, REMOTE_KEYS)
            url = remote.get("url")
            if url is not None and not isinstance(url, str):
                problems.append("'remote.url' must be a string")
            else:
                kw["remote_url"] = url
            opts = remote.get("options", {})
            if not isinstance(opts, dict):
                problems.append("'remote.options' must be a table")
            else:
                mask_options(opts)  # credential values never reach a message
                kw["remote_options"] = opts
            pt = remote.get("pack_threshold")
            if pt is not None:
                if isinstance(pt, bool) or not isinstance(pt, int) or not 0 <= pt <= 1_000_000:
                    problems.append(f"'remote.pack_threshold' must be an integer from 0 (never pack) "
                                    f"to 1000000, got {pt!r}")
                else:
                    kw["pack_threshold"] = pt
        elif remote is not None:
            problems.append("'remote' must be a URL string or a table with 'url' and 'options'")

        def typed(key: str, types: tuple[type, ...], label: str, sub: dict | None = None, prefix: str = "") -> Any:
            src = data if sub is None else sub
            if key not in src:
                return None
            val = src[key]
            if isinstance(val, bool) and bool not in types or not isinstance(val, types):
                problems.append(f"'{prefix}{key}' must be {label}, got {val!r}")
                return None
            return val

        cdir = typed("cassette_dir", (str,), "a path string")
        if cdir is not None:
            if Path(cdir).is_absolute() or ".." in Path(cdir).parts:
                problems.append(f"'cassette_dir' must be a relative path inside the repository, got {cdir!r}")
            else:
                kw["cassette_dir"] = cdir
        mode = typed("mode", (str,), "a string")
        if mode is not None:
            if mode not in MODES:
                problems.append(f"'mode' must be one of {', '.join(MODES)}, got {mode!r}")
            else:
                kw["mode"] = mode
        for key, top in (("zstd_level", 22), ("jobs", 256)):
            number = typed(key, (int,), "an integer")
            if number is not None:
                if not 1 <= number <= top:
                    problems.append(f"'{key}' must be between 1 and {top}, got {number}")
                else:
                    kw[key] = number

        trust = data.get("trust", {})
        if not isinstance(trust, dict):
            problems.append("'trust' must be a table")
        else:
            unknown("trust", trust, TRUST_KEYS)
            req = typed("require_signatures", (bool,), "true or false", trust, "trust.")
            if req is not None:
                kw["require_signatures"] = req
            tk = typed("trusted_keys", (str,), "a path string", trust, "trust.")
            if tk is not None:
                kw["trusted_keys_file"] = tk

        replay = data.get("replay", {})
        if not isinstance(replay, dict):
            problems.append("'replay' must be a table")
        else:
            unknown("replay", replay, REPLAY_KEYS)
            hosts = replay.get("allowed_hosts")
            if isinstance(hosts, str):
                hosts = [h for h in hosts.split(",") if h.strip()]
            if hosts is not None:
                if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
                    problems.append("'replay.allowed_hosts' must be a list of host names or IPs "
                                    "(or one comma-separated string)")
                else:
                    kw["allowed_hosts"] = tuple(h.strip() for h in hosts if h.strip())
            kw["replay"] = dict(replay)

        for section, allowed in (("hygiene", HYGIENE_KEYS), ("redaction", REDACTION_KEYS)):
            sec = data.get(section, {})
            if not isinstance(sec, dict):
                problems.append(f"'{section}' must be a table")
                continue
            unknown(section, sec, allowed)
            kw[section] = dict(sec)
        hyg = kw.get("hygiene", {})
        for key in ("max_age_days", "warn_age_days", "max_cassette_bytes", "max_entry_bytes"):
            if key in hyg and (isinstance(hyg[key], bool) or not isinstance(hyg[key], int) or hyg[key] < 0):
                problems.append(f"'hygiene.{key}' must be a non-negative integer, got {hyg[key]!r}")
        for section in ("hygiene", "redaction"):
            sec = kw.get(section, {})
            for key in ("globs", "allow", "paths", "patterns", "keys"):
                if key in sec and (
                    not isinstance(sec[key], list) or not all(isinstance(x, str) for x in sec[key])
                ):
                    problems.append(f"'{section}.{key}' must be a list of strings")

        timing = kw.get("replay", {}).get("timing")
        if timing is not None and (isinstance(timing, bool) or not isinstance(timing, (str, int, float))):
            problems.append(f"'replay.timing' must be \"collapsed\", \"realtime\" or a number, got {timing!r}")
        pin = kw.get("replay", {}).get("pin")
        if pin is not None and not isinstance(pin, bool):
            problems.append(f"'replay.pin' must be true or false, got {pin!r}")
        if problems:
            raise ConfigError(f"{source}: " + "; ".join(problems))
        return cls(**kw)


def read_toml(path: Path) -> dict[str, Any]:
    try:
        return _toml(path.name, path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"{path.name}: cannot read ({exc.strerror or exc})") from None


def _toml(name: str, data: bytes) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        table: dict[str, Any] = tomllib.loads(data.decode("utf-8"))
        return table
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{name}: not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{name}: not valid UTF-8") from None
    except RecursionError:
        raise ConfigError(f"{name}: nested too deeply") from None


def _tool_table(pyproject: dict[str, Any]) -> Any:
    tool = pyproject.get("tool", {})
    return tool.get("casstore") if isinstance(tool, dict) else None


def config_of(casstore_toml: bytes | None, pyproject: bytes | None) -> Config | None:
    """The Config these bytes of casstore.toml, else pyproject.toml, hold (a commit's); None: neither has one."""
    if casstore_toml is not None:
        return Config.from_dict(_toml(CONFIG_FILE, casstore_toml), source=CONFIG_FILE)
    table = _tool_table(_toml("pyproject.toml", pyproject)) if pyproject is not None else None
    return None if table is None else Config.from_dict(table, source=_PYPROJECT)


def find_config(root: Path) -> tuple[str, dict[str, Any]] | None:
    cfg = root / CONFIG_FILE
    if cfg.is_file():
        return CONFIG_FILE, read_toml(cfg)
    pyproject = root / "pyproject.toml"
    table = _tool_table(read_toml(pyproject)) if pyproject.is_file() else None
    return None if table is None else (_PYPROJECT, table)


def load_config(root: Path) -> Config:
    found = find_config(root)
    return Config() if found is None else Config.from_dict(found[1], source=found[0])


def find_root(start: Path) -> Path:
    """The nearest folder with casstore.toml, casstore.lock or [tool.casstore]; else the git root; else start."""
    start = start.resolve()
    for d in (start, *start.parents):
        if (d / CONFIG_FILE).is_file() or (d / LOCK_FILE).is_file():
            return d
        pp = d / "pyproject.toml"
        if pp.is_file():
            with contextlib.suppress(Exception):
                if find_config(d) is not None:
                    return d
    for d in (start, *start.parents):
        if (d / ".git").exists():
            return d
    return start


def locate(start: Path | str | None = None, *, required: bool = False) -> tuple[Path, Config]:
    """The project root for ``start`` (default: the working directory) and its config;
    ``required`` refuses a folder with no casstore configuration here or above (a command would
    otherwise run on silent defaults and report nothing wrong)."""
    here = Path(start) if start is not None else Path.cwd()
    root = find_root(here)
    config = load_config(root)
    if required and config.source == "defaults" and not (root / CONFIG_FILE).is_file():
        raise UsageError(f"no casstore project in {here.resolve()} or its parents (no {CONFIG_FILE}): "
                         "run `casstore init`")
    return root, config


def widened_rules(old: Config, new: Config) -> list[str]:
    """How ``new`` lets more through ``casstore check`` than ``old``, one phrase per rule: an
    allow entry added, a redaction rule or a hygiene glob removed, a size or age limit raised
    (0 is off). A change that only narrows says nothing."""
    out: list[str] = []
    for section, key, widens in (("redaction", "allow", "adds"), ("hygiene", "allow", "adds"),
                                 ("redaction", "paths", "drops"), ("redaction", "patterns", "drops"),
                                 ("redaction", "keys", "drops"), ("hygiene", "globs", "drops")):
        was, now = (set(getattr(c, section).get(key) or []) for c in (old, new))
        diff = sorted(now - was if widens == "adds" else was - now)
        if diff:
            out.append(f"{section}.{key} {widens} {', '.join(map(repr, diff))}")
    for key in ("max_age_days", "max_cassette_bytes", "max_entry_bytes"):
        limit, raised = (int(c.hygiene.get(key, defaults.HYGIENE[key])) for c in (old, new))
        if limit and (raised == 0 or raised > limit):
            out.append(f"hygiene.{key} {limit} -> {raised}" + (" (off)" if raised == 0 else ""))
    return out

