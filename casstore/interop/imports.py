"""vcrpy cassettes and JSONL traces into working copies, all or nothing: read and check every
input (a vcrpy import proves every call replays), write every copy, pin them (``--add``)."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CheckFailed, UsageError
from ..model.cassette import Cassette
from ..model.names import validate_name
from ..model.vcr_names import has_vcr_suffix, vcr_file_name
from ..ops.add import add as add_cassettes
from ..project import Project
from .build import build_cassette, display_path, name_from_path
from .jsonl import read_jsonl_files
from .proof import Proof, prove_replay
from .vcr import is_casstore_file, read_vcr_file

__all__ = ["ImportedCassette", "import_vcr", "import_jsonl", "vcr_import_name"]


@dataclass
class ImportedCassette:
    """One working copy an import wrote (and, with ``add``, pinned)."""

    name: str
    sources: list[str]
    path: str
    entries: int
    kinds: dict[str, int]
    redaction_hits: dict[str, int]
    notes: list[str] = field(default_factory=list)
    digest: str | None = None
    signed_by: str | None = None
    interactions: int | None = None  # vcrpy imports: interactions read, and how many replay
    replayed: int | None = None
    misses: list[str] = field(default_factory=list)


def _write_and_pin(
    project: Project,
    planned: list[tuple[Cassette, list[Path], list[str]]],
    *,
    add: bool,
    force: bool,
) -> list[ImportedCassette]:
    """Phase 2 and 3: check destinations, write every working copy, then pin them all."""
    targets: list[Path] = []
    seen: dict[str, str] = {}
    for cassette, sources, _ in planned:
        if cassette.name in seen:
            raise UsageError(
                f"{sources[0].name} and {seen[cassette.name]} would both become cassette {cassette.name!r}; "
                "import them separately with --name"
            )
        seen[cassette.name] = sources[0].name
        target = project.working_copy_path(cassette.name)
        for src in sources:
            if src.resolve() == target.resolve():
                raise UsageError(
                    f"{src}: importing would overwrite the file being imported; pass --name to choose another name"
                )
        if target.exists() and not force:
            raise UsageError(
                f"{display_path(project, target)} already exists; pass --force to replace it, or --name to pick another name"
            )
        targets.append(target)
    created: list[Path] = []
    try:
        for (cassette, _, _), target in zip(planned, targets, strict=True):
            existed = target.exists()
            cassette.write_file(target)
            if not existed:
                created.append(target)
    except BaseException:
        _remove(created)  # a failed write (disk full, ...) leaves no new copies behind
        raise
    results = [
        ImportedCassette(
            name=cassette.name,
            sources=[s.name for s in sources],
            path=display_path(project, target),
            entries=len(cassette.entries),
            kinds=dict(Counter(str(e.get("kind")) for e in cassette.entries)),
            redaction_hits=dict(cassette.redaction.get("hits") or {}),
            notes=notes,
        )
        for (cassette, sources, notes), target in zip(planned, targets, strict=True)
    ]
    if add:
        try:
            pinned = {a.name: a for a in add_cassettes(project, targets)}
        except BaseException:
            _remove(created)  # nothing was pinned (add is all or nothing): no new copies either
            raise
        for r in results:
            if r.name in pinned:
                r.digest, r.signed_by = pinned[r.name].digest, pinned[r.name].signed_by
    return results


def _remove(paths: list[Path]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()


def _expand_vcr(paths: Sequence[Path]) -> list[tuple[Path, Path | None]]:
    out: list[tuple[Path, Path | None]] = []
    for p in paths:
        if p.is_dir():
            found = sorted(
                x for x in p.rglob("*") if x.is_file() and has_vcr_suffix(x.name)
            )
            out.extend((x, p) for x in found)
        elif p.exists():
            out.append((p, None))
        else:
            raise UsageError(f"{p}: no such file or folder")
    return out


def import_vcr(
    project: Project,
    paths: Sequence[Path | str],
    *,
    name: str | None = None,
    add: bool = False,
    force: bool = False,
) -> list[ImportedCassette]:
    """Import vcrpy cassette files (or folders of them), all or nothing; a call that would not
    replay raises :class:`CheckFailed` unless ``force``."""
    given = [Path(p) for p in paths]
    if not given:
        raise UsageError("no vcrpy cassette files given")
    files = _expand_vcr(given)
    if name is not None:
        if len(files) != 1 or files[0][1] is not None:
            raise UsageError("--name needs exactly one cassette file")
        validate_name(name)
    if not files:
        raise UsageError(f"no .yaml, .yml or .json files (or .gz of them) in {', '.join(str(p) for p in given)}")
    planned: list[tuple[Cassette, list[Path], list[str]]] = []
    proofs: list[Proof] = []
    for path, base in files:
        if base is not None and is_casstore_file(path):
            continue  # a folder may hold casstore working copies next to vcrpy files
        parsed = read_vcr_file(path)
        cas_name = name if name is not None else vcr_import_name(project, path, base)
        cassette = build_cassette(
            cas_name,
            parsed.entries,
            recorder=parsed.recorder,
            source=path.name,
            redaction_config=project.config.redaction,
            recorded_at=parsed.fallback_recorded_at,
        )
        proof = prove_replay(cassette, parsed.probes)
        proofs.append(proof)
        planned.append((cassette, [path], parsed.notes + [f"imported anyway (--force): {m}" for m in proof.misses]))
    if not planned:
        raise UsageError(f"no vcrpy cassettes in {', '.join(str(p) for p in given)}")
    misses = [m for p in proofs for m in p.misses]
    if misses and not force:
        total = sum(p.total for p in proofs)
        shown = misses[:20] + ([f"... and {len(misses) - 20} more"] if len(misses) > 20 else [])
        raise CheckFailed(
            f"{total - len(misses)} of {total} interactions replay; nothing was written:\n"
            + "\n".join(f"  {m}" for m in shown)
            + "\n  a replay of these calls would miss; pass --force to import them anyway"
        )
    results = _write_and_pin(project, planned, add=add, force=force)
    for result, proof in zip(results, proofs, strict=True):
        result.interactions, result.replayed, result.misses = proof.total, proof.replayed, proof.misses
    return results


def vcr_import_name(project: Project, path: Path, base: Path | None) -> str:
    """The name of an imported vcrpy file: the one the ``vcr`` marker looks up in the project;
    outside it, :func:`~casstore.interop.build.name_from_path`."""
    inside = vcr_file_name(path, cassette_dir=project.cassette_dir, root=project.root)
    return inside if inside is not None else name_from_path(path, base)


def import_jsonl(
    project: Project,
    paths: Sequence[Path | str],
    *,
    name: str,
    mapping: Mapping[str, str] | None = None,
    base_urls: Mapping[str, str] | None = None,
    add: bool = False,
    force: bool = False,
) -> ImportedCassette:
    """Import JSONL call logs as one working copy ``name``: ``mapping`` maps fields to
    dot-paths in each record, ``base_urls`` a provider to its SDK base URL."""
    validate_name(name)
    files = [Path(p) for p in paths]
    if not files:
        raise UsageError("no JSONL files given")
    for f in files:
        if not f.is_file():
            raise UsageError(f"{f}: no such file")
    entries, notes = read_jsonl_files(files, mapping=mapping or {}, base_urls=base_urls or {})
    if not entries:
        raise UsageError(f"no call records in {', '.join(str(f) for f in files)}")
    cassette = build_cassette(
        name,
        entries,
        recorder="jsonl trace",
        source=", ".join(f.name for f in files),
        redaction_config=project.config.redaction,
    )
    return _write_and_pin(project, [(cassette, files, notes)], add=add, force=force)[0]
