"""The function API behind the command line: init, add, push, pull, verify, ls, show, status.

Each function takes a :class:`~casstore.project.Project`, does its work, and returns a plain
result object the CLI renders (as text or ``--json``). Failures of single cassettes are
collected and returned, never lost; the caller decides the exit code.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import signing
from ..config import CONFIG_FILE
from ..errors import CasstoreError, IntegrityError, NotFoundError, UsageError
from ..model.blob import compress, decompress_verified, digest_and_size
from ..model.cassette import load_file
from ..model.lock import Lock, Pin
from ..project import DEFAULT_REMOTE, Project
from ..store.backends import Store, digest_from_key, object_key, signature_key
from ..store.packs import PackedStore, ReadTask, plan_reads
from ..store.transfer import NullReporter, Reporter, run_parallel

__all__ = [
    "Problem",
    "init",
    "add",
    "push",
    "push_pins",
    "pull",
    "verify",
    "ls",
    "show",
    "status",
]


@dataclass
class Problem:
    name: str
    digest: str
    message: str

    def line(self) -> str:
        return self.message if self.name in self.message else f"{self.name}: {self.message}"


def _short(digest: str) -> str:
    return digest[:19]


def _select(lock: Lock, names: Sequence[str]) -> list[Pin]:
    if not names:
        return list(lock.pins.values())
    missing = [n for n in names if n not in lock.pins]
    if missing:
        raise UsageError(f"not pinned in casstore.lock: {', '.join(missing)}")
    return [lock.pins[n] for n in names]


# -- init ------------------------------------------------------------------------
@dataclass
class InitResult:
    root: str
    config_written: bool
    key_created: bool
    keyid: str | None
    trusted: bool
    remote: str


def init(root: Path, remote: str | None = None, *, identity: str | None = None) -> InitResult:
    root = root.resolve()
    cfg = root / CONFIG_FILE
    written = False
    if not cfg.exists():
        lines = [
            "# casstore configuration. See docs/design.md of casstore for every key.",
            'cassette_dir = "tests/cassettes"',
            "",
            "[remote]",
            f"url = {_toml_str(remote or DEFAULT_REMOTE)}",
            "# options = { endpoint_url = \"http://127.0.0.1:9000\" }   # fsspec storage options",
            "",
            "[trust]",
            "require_signatures = true",
            "",
            "[hygiene]",
            "max_age_days = 90",
            "warn_age_days = 60",
            "",
        ]
        cfg.write_text("\n".join(lines), encoding="utf-8")
        written = True
    elif remote is not None:
        raise UsageError(f"{CONFIG_FILE} already exists; edit its [remote] url instead of passing --remote")
    project = Project.discover(root)
    project.cassette_dir.mkdir(parents=True, exist_ok=True)
    (root / ".casstore").mkdir(exist_ok=True)
    _ensure_gitignore(root, [".casstore/store/", ".casstore/lock.guard"])
    key = signing.load_signing_key(required=False)
    created = False
    if key is None:
        key, _ = signing.generate_signing_key(identity)
        created = True
    trusted = trust_key(project, key.public_line())
    return InitResult(
        root=str(root), config_written=written, key_created=created, keyid=key.keyid,
        trusted=trusted, remote=project.remote_url,
    )


def _toml_str(s: str) -> str:
    import json

    return json.dumps(s)


def _ensure_gitignore(root: Path, patterns: list[str]) -> None:
    gi = root / ".gitignore"
    have = gi.read_text(encoding="utf-8").splitlines() if gi.exists() else []
    add = [p for p in patterns if p not in have]
    if add:
        text = "\n".join(have + add) + "\n"
        gi.write_text(text.lstrip("\n"), encoding="utf-8")


def trust_key(project: Project, line_or_text: str) -> bool:
    """Append a public key to trusted_keys unless present. Returns True if added."""
    key = signing.parse_public_key(line_or_text, source="key")
    path = project.trusted_keys_path
    current = project.trusted_keys()
    if key.keyid in current.by_id():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text(encoding="utf-8") if path.exists() else (
        "# casstore trusted signers: <identity> ed25519 <base64 raw public key>\n"
    )
    if text and not text.endswith("\n"):
        text += "\n"
    from ..fsutil import atomic_write

    atomic_write(path, (text + key.line() + "\n").encode("utf-8"))
    return True


# -- add -------------------------------------------------------------------------
@dataclass
class Added:
    name: str
    digest: str
    size: int
    entries: int
    changed: bool
    signed_by: str | None


def _expand(paths: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(sorted(x for x in p.rglob("*.json") if x.is_file()))
        else:
            out.append(p)
    return out


def add(project: Project, paths: Sequence[Path]) -> list[Added]:
    """Validate, canonicalize, hash, sign, cache and pin each cassette file.

    All or nothing: every file is validated first; the lock is written once at the end.
    """
    files = _expand(paths)
    if not files:
        raise UsageError("no cassette files given (pass files or folders of .json cassettes)")
    trusted = project.trusted_keys()
    required = project.signatures_required(trusted)
    key = signing.load_signing_key(required=required)
    if key is not None and required and key.keyid not in trusted.by_id():
        raise UsageError(
            f"your signing key {key.keyid} ({key.identity}) is not in {project.config.trusted_keys_file}; "
            "run `casstore keys trust` with it, or ask a maintainer to"
        )
    prepared = []
    seen: dict[str, Path] = {}
    for f in files:
        project.check_inside(f)  # a symlink (or a path) leading out of the repository is refused
        cas = load_file(f)
        if cas.name in seen:
            raise UsageError(f"{f} and {seen[cas.name]} both hold cassette {cas.name!r}")
        seen[cas.name] = f
        data = cas.canonical_bytes()
        digest, size = digest_and_size(data)
        lo, hi = cas.recorded_range()
        pin = Pin(
            name=cas.name, digest=digest, size=size, entries=len(cas.entries),
            recorded_from=lo, recorded_to=hi, models=tuple(cas.models()),
        )
        prepared.append((pin, data))
    results = []
    with project.locked():
        lock = project.load_lock()
        for pin, data in prepared:
            project.cache.put_frame(pin.digest, pin.size, compress(data, project.config.zstd_level))
            old = lock.pins.get(pin.name)
            sigs = list(old.signatures) if old is not None and old.digest == pin.digest else []
            signer = None
            if key is not None:
                sig = key.sign_pin(pin)
                sigs = signing.merge_signatures(sigs, sig)
                project.cache.put_signature(pin.digest, sig.keyid, signing.make_envelope(pin, key, sig))
                signer = key.identity
            new = pin.with_signatures(sigs)
            if old is not None and old.extra:
                new = Pin(**{**new.__dict__, "extra": dict(old.extra)})
            lock = lock.with_pin(new)
            results.append(
                Added(pin.name, pin.digest, pin.size, pin.entries, old is None or old.digest != pin.digest, signer)
            )
        project.save_lock(lock)
    return results


# -- push ------------------------------------------------------------------------
@dataclass
class TransferReport:
    done: list[str] = field(default_factory=list)  # names transferred
    skipped: list[str] = field(default_factory=list)  # already there
    problems: list[Problem] = field(default_factory=list)
    bytes: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def _envelopes(pin: Pin, trusted: signing.TrustedKeys, project: Project) -> dict[str, bytes]:
    """Envelopes for ``pin``'s signatures: from the cache, else rebuilt from lock + trusted key."""
    cached = project.cache.signatures(pin.digest)
    ids = trusted.by_id()
    out = {}
    for s in pin.signatures:
        if s.keyid in cached:
            out[s.keyid] = cached[s.keyid]
        elif s.keyid in ids:
            out[s.keyid] = signing.canonical_json(
                {
                    "format": signing.ENVELOPE_FORMAT, "keyid": s.keyid, "signer": s.signer,
                    "public_key": signing._b64(ids[s.keyid].public_raw),
                    "statement": {"digest": pin.digest, "format": pin.format, "size": pin.size,
                                  "type": signing.STATEMENT_TYPE},
                    "signature": s.sig,
                }
            )
    return out


def push(project: Project, names: Sequence[str] = (), *, jobs: int | None = None,
         reporter: Reporter | None = None) -> TransferReport:
    """Upload the objects (and signatures) of the lock's pins that the store lacks."""
    return push_pins(project, _select(project.load_lock(required=True), names), jobs=jobs, reporter=reporter)


def push_pins(project: Project, pins: Sequence[Pin], *, jobs: int | None = None,
              reporter: Reporter | None = None) -> TransferReport:
    """Upload ``pins``' objects and signature envelopes that the store lacks (one listing)."""
    reporter = reporter or NullReporter()
    trusted = project.trusted_keys()
    required = project.signatures_required(trusted)
    report = TransferReport()
    uploads: list[tuple[Pin, str, bytes]] = []
    for pin in pins:
        try:
            if required:
                signing.verify_pin(pin, trusted, required=True)
            frame = project.cache.read_frame(pin.digest)
            decompress_verified(frame, pin.digest, pin.size)
        except NotFoundError:
            report.problems.append(Problem(pin.name, pin.digest,
                f"{pin.name}: {_short(pin.digest)} is not in the local cache; `casstore add` it first"))
            continue
        except CasstoreError as exc:
            report.problems.append(Problem(pin.name, pin.digest, str(exc)))
            continue
        uploads.append((pin, object_key(pin.digest), frame))
        for keyid, env in _envelopes(pin, trusted, project).items():
            uploads.append((pin, signature_key(pin.digest, keyid), env))
    store = project.store
    try:
        existing = store.exists_many([k for _, k, _ in uploads])
    except CasstoreError as exc:
        report.problems.append(Problem("*", "", f"cannot list {project.remote_url}: {exc}"))
        return report
    todo = [(p, k, d) for p, k, d in uploads if existing.get(k) != len(d)]
    report.skipped = sorted({p.name for p, k, _ in uploads if k.startswith("objects/") and existing.get(k) is not None})

    if isinstance(store, PackedStore) and store.should_pack(sum(k.startswith("objects/") for _, k, _ in todo)):
        _push_packs(store, todo, report, jobs=jobs or project.config.jobs, reporter=reporter)
    else:
        _push_loose(store, todo, report, jobs=jobs or project.config.jobs, reporter=reporter)
    report.done.sort()
    return report


def _push_loose(store: Store, todo: list[tuple[Pin, str, bytes]], report: TransferReport, *, jobs: int,
                reporter: Reporter) -> None:
    def put(item: tuple[Pin, str, bytes]) -> bool:
        # existence was settled by the one listing above: a single PUT per object
        return store.write_once(item[1], item[2], checked=True)

    def describe(item, res, err):  # type: ignore[no-untyped-def]
        pin, key, data = item
        what = "object" if key.startswith("objects/") else "signature"
        return f"{'FAILED ' if err else ''}{what} {pin.name} {_short(pin.digest)} ({len(data)} B)" + (f": {err}" if err else "")

    # objects first, then signatures: a signature never points at a missing object
    failed: set[str] = set()
    for phase in ("objects/", "signatures/"):
        batch = [t for t in todo if t[1].startswith(phase) and t[0].digest not in failed]
        for (pin, key, data), _res, err in run_parallel(
            batch, put, jobs=jobs, describe=describe, reporter=reporter, label=f"push {phase.rstrip('/')}",
        ):
            if err is not None:
                failed.add(pin.digest)  # its signatures wait for the object's next push
                report.problems.append(Problem(pin.name, pin.digest, f"{pin.name}: upload of {key} failed: {err}"))
            elif phase == "objects/":
                report.done.append(pin.name)
                report.bytes += len(data)


def _push_packs(store: PackedStore, todo: list[tuple[Pin, str, bytes]], report: TransferReport, *, jobs: int,
                reporter: Reporter) -> None:
    """Objects and their envelopes in packs: two PUTs per pack instead of one per key."""
    by_key: dict[str, list[tuple[Pin, bytes]]] = {}
    for pin, key, data in todo:
        by_key.setdefault(key, []).append((pin, data))
    packs = store.write_packs([(k, v[0][1]) for k, v in by_key.items()])

    def describe(item, res, err):  # type: ignore[no-untyped-def]
        keys, _ = item
        n = sum(k.startswith("objects/") for k in keys)
        return f"{'FAILED ' if err else ''}pack of {n} object(s)" + (f": {err}" if err else f" {str(res)[:12]}")

    for (keys, _write), _res, err in run_parallel(packs, lambda p: p[1](), jobs=jobs, describe=describe,
                                                 reporter=reporter, label="push packs"):
        for key in keys:
            if not key.startswith("objects/"):
                continue
            for pin, data in by_key[key]:
                if err is not None:
                    report.problems.append(Problem(pin.name, pin.digest, f"{pin.name}: upload of the pack "
                                                                         f"holding {key} failed: {err}"))
                else:
                    report.done.append(pin.name)
                    report.bytes += len(data)


# -- pull ------------------------------------------------------------------------
def pull(project: Project, names: Sequence[str] = (), *, frozen: bool = False, jobs: int | None = None,
         reporter: Reporter | None = None) -> TransferReport:
    reporter = reporter or NullReporter()
    lock = project.load_lock(required=frozen)
    pins = _select(lock, names)
    trusted = project.trusted_keys()
    required = project.signatures_required(trusted)
    report = TransferReport()
    wanted: list[Pin] = []
    for pin in pins:
        try:
            signing.verify_pin(pin, trusted, required=required)
        except CasstoreError as exc:
            report.problems.append(Problem(pin.name, pin.digest, str(exc)))
            continue
        if project.cache.has(pin.digest):
            report.skipped.append(pin.name)
        else:
            wanted.append(pin)
    store = project.store
    by_key: dict[str, list[Pin]] = {}
    for pin in wanted:
        by_key.setdefault(object_key(pin.digest), []).append(pin)
    try:
        tasks = plan_reads(store, by_key)
    except CasstoreError as exc:
        for pin in wanted:
            report.problems.append(Problem(pin.name, pin.digest, f"{pin.name}: cannot list {project.remote_url}: {exc}"))
        return report

    def fetch(task: ReadTask) -> dict[str, int | BaseException]:
        out: dict[str, int | BaseException] = {}
        for key, got in task.run().items():
            pin = by_key[key][0]
            if isinstance(got, NotFoundError):
                out[key] = NotFoundError(f"{_short(pin.digest)} is missing from {project.remote_url} (was it pushed?)")
            elif isinstance(got, BaseException):
                out[key] = got
            else:
                try:
                    project.cache.put_frame(pin.digest, pin.size, got)
                    out[key] = len(got)
                except IntegrityError as exc:
                    out[key] = IntegrityError(f"refused object from {project.remote_url}: {exc}")
                except CasstoreError as exc:
                    out[key] = exc
        return out

    def describe(task, res, err):  # type: ignore[no-untyped-def]
        lines = []
        for key in task.keys:
            got = err if err is not None else (res or {}).get(key)
            for pin in by_key[key]:
                lines.append(f"FAILED {pin.name}: {got}" if isinstance(got, BaseException)
                             else f"{pin.name} {_short(pin.digest)} ({got} B)")
        return "\n".join(lines)

    for task, res, err in run_parallel(tasks, fetch, jobs=jobs or project.config.jobs,
                                       describe=describe, reporter=reporter, label="pull"):
        for key in task.keys:
            got = err if err is not None else (res or {}).get(key)
            for pin in by_key[key]:
                if isinstance(got, BaseException) or got is None:
                    msg = str(got) if isinstance(got, CasstoreError) else f"{type(got).__name__}: {got}"
                    report.problems.append(Problem(pin.name, pin.digest, f"{pin.name}: {msg}"))
                else:
                    report.done.append(pin.name)
                    report.bytes += got
    report.done.sort()
    report.skipped.sort()
    return report


# -- verify ----------------------------------------------------------------------
@dataclass
class VerifyReport:
    checked: int = 0
    ok: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    bytes: int = 0
    fsck: Any = None  # casstore.fsck.StoreFsck with --remote: the whole store checked


def verify(project: Project, names: Sequence[str] = (), *, remote: bool = False,
           jobs: int | None = None) -> VerifyReport:
    lock = project.load_lock(required=True)
    pins = _select(lock, names)
    trusted = project.trusted_keys()
    required = project.signatures_required(trusted)
    rep = VerifyReport()
    store = project.store if remote else None
    jobs = jobs or min(4, project.config.jobs)

    def record(pin: Pin, size: int | None, err: BaseException | None) -> None:
        rep.checked += 1
        if err is None:
            rep.ok.append(pin.name)
            rep.bytes += size or 0
        else:
            msg = str(err) if isinstance(err, CasstoreError) else f"{type(err).__name__}: {err}"
            rep.problems.append(Problem(pin.name, pin.digest, f"{pin.name}: {msg}"))

    if store is None:
        def check(pin: Pin) -> int:
            signing.verify_pin(pin, trusted, required=required)
            try:
                frame = project.cache.read_frame(pin.digest)
            except NotFoundError:
                raise NotFoundError(f"{_short(pin.digest)} is not in the local cache (run `casstore pull`)") from None
            decompress_verified(frame, pin.digest, pin.size)
            return pin.size

        for pin, size, err in run_parallel(pins, check, jobs=jobs, describe=lambda *a: "",
                                           reporter=NullReporter(), label="verify"):
            record(pin, size, err)
    else:
        # the store: signatures first (no request), then the objects in batched reads
        # (neighbours in a pack come in one ranged GET) and the envelopes in one listing
        by_key: dict[str, list[Pin]] = {}
        for pin in pins:
            try:
                signing.verify_pin(pin, trusted, required=required)
            except CasstoreError as exc:
                record(pin, None, exc)
                continue
            by_key.setdefault(object_key(pin.digest), []).append(pin)
        envelopes = {signature_key(p.digest, s.keyid) for ps in by_key.values() for p in ps for s in p.signatures}
        present = store.exists_many(envelopes) if envelopes else {}

        def check_task(task: ReadTask) -> dict[str, BaseException | None]:
            out: dict[str, BaseException | None] = {}
            for key, got in task.run().items():
                digest, size = by_key[key][0].digest, by_key[key][0].size
                if isinstance(got, NotFoundError):
                    out[key] = NotFoundError(f"{_short(digest)} is missing from {project.remote_url}")
                    continue
                if isinstance(got, BaseException):
                    out[key] = got
                    continue
                try:
                    decompress_verified(got, digest, size)
                    out[key] = None
                except CasstoreError as exc:
                    out[key] = exc
            return out

        for task, res, err in run_parallel(plan_reads(store, by_key), check_task, jobs=jobs,
                                           describe=lambda *a: "", reporter=NullReporter(), label="verify"):
            for key in task.keys:
                for pin in by_key[key]:
                    problem = err if err is not None else (res or {}).get(key)
                    if problem is None:
                        missing = [s.keyid for s in pin.signatures if signature_key(pin.digest, s.keyid) not in present]
                        if missing:
                            problem = NotFoundError(f"signature envelope {missing[0]} of {_short(pin.digest)} "
                                                    "is missing from the store")
                    record(pin, pin.size, problem)
    if store is not None:
        from ..store.fsck import fsck_store

        pinned = lock.digests()
        fs = rep.fsck = fsck_store(store, trusted=trusted, skip_content={p.digest for p in pins},
                                   jobs=jobs or min(4, project.config.jobs))
        for inf in store.list("objects/"):
            d = digest_from_key(inf.key)
            if d is None or d not in pinned:
                rep.orphans.append(d or inf.key)
        for line in fs.corrupt:
            rep.problems.append(Problem("store", line[:71], f"corrupt object {line}"))
        for line in fs.bad_signatures:
            rep.problems.append(Problem("store", "", f"bad signature envelope {line}"))
        if required:
            for d in fs.unsigned:
                if d not in pinned:  # a pinned one is reported by its pin above
                    rep.problems.append(Problem("store", d, f"object {d} has no signature envelope"))
    rep.ok.sort()
    rep.problems.sort(key=lambda p: p.name)
    return rep


# -- ls / show / status ---------------------------------------------------------------
def ls(project: Project, *, remote: bool = False) -> list[dict[str, Any]]:
    lock = project.load_lock()
    if remote:
        by_digest: dict[str, list[str]] = {}
        for p in lock.pins.values():
            by_digest.setdefault(p.digest, []).append(p.name)
        rows = []
        for inf in project.store.list("objects/"):
            d = digest_from_key(inf.key)
            if d is None:
                continue
            rows.append({"digest": d, "stored_bytes": inf.size, "pinned_as": sorted(by_digest.get(d, []))})
        return rows
    return [
        {
            "name": p.name, "digest": p.digest, "size": p.size, "entries": p.entries,
            "models": list(p.models), "recorded_from": p.recorded_from, "recorded_to": p.recorded_to,
            "signers": [s.signer for s in p.signatures], "cached": project.cache.has(p.digest),
        }
        for p in lock.pins.values()
    ]


def show(project: Project, name: str) -> dict[str, Any]:
    lock = project.load_lock()
    pin = lock.pins.get(name)
    if pin is None:
        raise NotFoundError(f"{name!r} is not pinned in casstore.lock (see `casstore ls`)")
    trusted = project.trusted_keys()
    info: dict[str, Any] = {"name": name, **pin.to_dict()}
    try:
        info["verified_signers"] = signing.verify_pin(pin, trusted, required=project.signatures_required(trusted))
    except CasstoreError as exc:
        info["signature_error"] = str(exc)
    try:
        cas = project.load_pinned(pin, trusted) if "signature_error" not in info else None
    except CasstoreError as exc:
        info["object_error"] = str(exc)
        cas = None
    if cas is not None:
        info["meta"] = cas.meta
        info["redaction"] = cas.redaction
        info["calls"] = [
            {"seq": e.get("seq", i), "kind": e.get("kind"), "target": e.get("target"), "identity": e.get("identity")}
            for i, e in enumerate(cas.entries)
        ]
    return info


def status(project: Project, *, remote: bool = True) -> dict[str, Any]:
    lock = project.load_lock()
    rows = []
    pushed: dict[str, int] = {}
    remote_error = None
    if remote and lock.pins:
        try:
            pushed = project.store.exists_many(object_key(p.digest) for p in lock.pins.values())
        except CasstoreError as exc:
            remote_error = str(exc)
    pinned_names = set(lock.pins)
    for p in lock.pins.values():
        wc = project.working_copy_path(p.name)
        state = "missing"
        if wc.is_file():
            try:
                state = "same" if digest_and_size(load_file(wc).canonical_bytes())[0] == p.digest else "modified"
            except CasstoreError:
                state = "invalid"
        rows.append({
            "name": p.name, "digest": p.digest, "cached": project.cache.has(p.digest),
            "pushed": None if remote_error or not remote else object_key(p.digest) in pushed,
            "working_copy": state,
        })
    untracked = []
    if project.cassette_dir.is_dir():
        for f in sorted(project.cassette_dir.rglob("*.json")):
            name = f.relative_to(project.cassette_dir).with_suffix("").as_posix()
            if name not in pinned_names:
                untracked.append(name)
    return {"remote": project.remote_url, "remote_error": remote_error, "pins": rows, "unpinned": untracked}


def as_json(obj: Any) -> Any:
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    if isinstance(obj, list):
        return [as_json(x) for x in obj]
    return obj
