"""Cassette names of vcrpy / pytest-recording files (pure: paths in, a name out), one rule
for ``casstore import vcr`` and the ``@pytest.mark.vcr`` marker."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path, PurePosixPath

from .names import MAX_NAME_LENGTH, validate_name

__all__ = ["vcr_file_name", "vcr_default_name", "vcr_cassette_path", "clean_parts", "has_vcr_suffix"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")
# characters pytest-recording replaces by "-" in a default cassette name
_FORBIDDEN_IN_FILE_NAME = "<>?%*:|\"'/\\"


def clean_parts(parts: list[str]) -> str:
    """``/``-joined parts, each reduced to letters, digits and ``_ . -`` (a valid name)."""
    cleaned = [_UNSAFE.sub("-", p).strip("-.") or "x" for p in parts]
    name = "/".join(cleaned)
    if len(name) > MAX_NAME_LENGTH:
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]
        name = name[: MAX_NAME_LENGTH - len(digest) - 1].rstrip("/.-") + "-" + digest
    while name.endswith(".json"):
        name = name[: -len(".json")] + "-json"
    return validate_name(name)


_SUFFIXES = ("yaml", "yml", "json")


def _strip_suffix(name: str) -> str:
    if name.lower().endswith(".gz") and has_vcr_suffix(name):
        name = name[: -len(".gz")]
    stem, dot, suffix = name.rpartition(".")
    return stem if dot and stem and suffix.lower() in _SUFFIXES else name


def has_vcr_suffix(file_name: str) -> bool:
    """A vcrpy cassette's file name: ``.yaml``, ``.yml`` or ``.json``, or one of them ``.gz``."""
    lower = file_name.lower()
    lower = lower[: -len(".gz")] if lower.endswith(".gz") else lower
    return any(lower.endswith("." + s) and len(lower) > len(s) + 1 for s in _SUFFIXES)


def _relative(path: Path, base: Path) -> PurePosixPath | None:
    try:
        return PurePosixPath(Path(os.path.abspath(path)).relative_to(Path(os.path.abspath(base))).as_posix())
    except ValueError:
        return None


def vcr_file_name(path: Path, *, cassette_dir: Path, root: Path) -> str | None:
    """The cassette name of vcrpy file ``path``: its path without the suffix, relative to the
    cassette dir when inside it (``test_mod/test_x[a].yaml`` -> ``test_mod/test_x-a``), else to
    the root (``None`` outside it). Paths are made absolute, not resolved (a symlinked dir)."""
    rel = _relative(path, cassette_dir)
    if rel is None:
        rel = _relative(path, root)
    if rel is None or not rel.parts:
        return None
    parts = list(rel.parts)
    parts[-1] = _strip_suffix(parts[-1])
    return clean_parts(parts)


def vcr_default_name(test_class: type | None, test_name: str) -> str:
    """pytest-recording's default cassette name: ``Class.test[ids]`` with unsafe characters as ``-``."""
    name = f"{test_class.__name__}.{test_name}" if test_class else test_name
    for ch in _FORBIDDEN_IN_FILE_NAME:
        name = name.replace(ch, "-")
    return name


def vcr_cassette_path(cassette_dir: str | os.PathLike[str], cassette: str, serializer: str = "yaml") -> Path:
    """The file pytest-recording reads for ``cassette`` in ``cassette_dir``: the serializer
    as the suffix, a name too long for the file system cut and given ``...<md5>``."""
    suffix = f".{serializer}"
    try:
        max_len = os.pathconf(".", "PC_NAME_MAX")
    except (AttributeError, ValueError, OSError):
        max_len = 255
    if len(cassette) + len(suffix) > max_len:
        digest = hashlib.md5(cassette.encode()).hexdigest()  # noqa: S324 - pytest-recording's file naming
        cassette = f"{cassette[: max_len - len(suffix) - len(digest) - 3]}...{digest}"
    path = os.path.join(cassette_dir, cassette)
    if not path.endswith(suffix):
        path += suffix
    return Path(path)
