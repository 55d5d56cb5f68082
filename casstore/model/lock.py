"""The lock file ``casstore.lock`` (cassette name -> digest, size, summary, signatures): a
frozen model and its deterministic TOML text, one block per cassette in name order; unknown
keys are kept, and validation errors name their key path."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from dataclasses import dataclass, field, replace
from json.encoder import encode_basestring
from typing import Any

from ..errors import InvalidName, LockError
from .canonical import DIGEST_RE
from .names import MAX_NAME_LENGTH, NAME_PATTERN, validate_name

__all__ = ["Lock", "Pin", "PinTable", "Signature", "parse_lock", "scan_lock", "format_lock", "format_pin", "shown",
           "LOCK_VERSION"]



def shown(text: str) -> str:
    """A lock's free text (a signer, a model) as printed: no signature covers it, so a line
    break or other unprintable character is escaped (it would start a line of its writer's choosing)."""
    return text if text.isprintable() else repr(text)[1:-1]


LOCK_VERSION = 1
HEADER = (
    "# casstore.lock: cassettes pinned by digest. Written by `casstore add`; review it like code.\n"
    "# One block per cassette, sorted by name, so diffs and merges stay clean.\n"
)


@dataclass(frozen=True)
class Signature:
    keyid: str
    signer: str
    sig: str
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**self.extra, "keyid": self.keyid, "signer": self.signer, "sig": self.sig}


@dataclass(frozen=True)
class Pin:
    name: str
    digest: str
    size: int
    format: str = "casstore.cassette/v1"
    entries: int = 0
    recorded_from: str | None = None
    recorded_to: str | None = None
    models: tuple[str, ...] = ()
    signatures: tuple[Signature, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {**self.extra, "digest": self.digest, "size": self.size, "format": self.format,
                               "entries": self.entries}
        for key in ("recorded_from", "recorded_to"):
            if (value := getattr(self, key)) is not None:
                out[key] = value
        out["models"] = list(self.models)
        out["signatures"] = [s.to_dict() for s in self.signatures]
        return out

    def with_signatures(self, sigs: Iterable[Signature]) -> Pin:
        return replace(self, signatures=tuple(sorted(sigs, key=lambda s: s.keyid)))


@dataclass(frozen=True)
class Lock:
    pins: Mapping[str, Pin] = field(default_factory=dict)
    version: int = LOCK_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)

    # -- model ---------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Any) -> Lock:
        problems: list[str] = []
        if not isinstance(data, Mapping):
            raise LockError("casstore.lock is malformed", ["top level must be a table"])
        version = data.get("version", LOCK_VERSION)
        if isinstance(version, bool) or version != LOCK_VERSION:
            problems.append(f"in 'version': unsupported lock version {version!r} (this casstore reads {LOCK_VERSION})")
        cassettes = data.get("cassettes", {})
        pins: dict[str, Pin] = {}
        if not isinstance(cassettes, Mapping):
            problems.append("in 'cassettes': must be a table")
            cassettes = {}
        for name, body in cassettes.items():
            where = f"cassettes.{json.dumps(name)}"
            try:
                validate_name(name, allow_reserved=True)  # scan_lock's rule too: old pins load
            except InvalidName as exc:
                problems.append(f"in '{where}': {exc}")
                continue
            pin = _pin_from_dict(name, body, where, problems)
            if pin is not None:
                pins[name] = pin
        if problems:
            raise LockError("casstore.lock is malformed", problems)
        extra = {k: v for k, v in data.items() if k not in ("version", "cassettes")}
        return cls(pins=dict(sorted(pins.items())), version=LOCK_VERSION, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.extra)
        out["version"] = self.version
        out["cassettes"] = {name: self.pins[name].to_dict() for name in sorted(self.pins)}
        return out

    def with_pin(self, pin: Pin) -> Lock:
        return self.with_pins((pin,))

    def with_pins(self, pins: Iterable[Pin]) -> Lock:
        """This lock with ``pins`` added or replaced: one copy and one sort for any number."""
        merged = dict(self.pins)
        merged.update((p.name, p) for p in pins)
        return replace(self, pins=dict(sorted(merged.items())))

    def without(self, name: str) -> Lock:
        return replace(self, pins={k: v for k, v in self.pins.items() if k != name})

    def digests(self) -> set[str]:
        return {p.digest for p in self.pins.values()}


def _pin_from_dict(name: str, body: Any, where: str, problems: list[str]) -> Pin | None:
    if not isinstance(body, Mapping):
        problems.append(f"in '{where}': must be a table")
        return None
    start = len(problems)
    digest = body.get("digest")
    if not isinstance(digest, str) or not DIGEST_RE.match(digest):
        problems.append(f"in '{where}.digest': must be 'sha256:' followed by 64 lowercase hex digits")
    size = body.get("size")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        problems.append(f"in '{where}.size': must be a non-negative integer")
    fmt = body.get("format", "casstore.cassette/v1")
    if not isinstance(fmt, str):
        problems.append(f"in '{where}.format': must be a string")
    entries = body.get("entries", 0)
    if isinstance(entries, bool) or not isinstance(entries, int) or entries < 0:
        problems.append(f"in '{where}.entries': must be a non-negative integer")
    rng = {}
    for key in ("recorded_from", "recorded_to"):
        val = body.get(key)
        if val is not None and not isinstance(val, str):
            problems.append(f"in '{where}.{key}': must be a string timestamp")
        rng[key] = val
    models = body.get("models", [])
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        problems.append(f"in '{where}.models': must be a list of strings")
        models = []
    sigs_raw = body.get("signatures", [])
    sigs: list[Signature] = []
    if not isinstance(sigs_raw, list):
        problems.append(f"in '{where}.signatures': must be a list")
        sigs_raw = []
    for i, s in enumerate(sigs_raw):
        sw = f"{where}.signatures[{i}]"
        if not isinstance(s, Mapping):
            problems.append(f"in '{sw}': must be a table")
            continue
        bad = [k for k in ("keyid", "signer", "sig") if not isinstance(s.get(k), str) or not s.get(k)]
        if bad:
            problems.append(f"in '{sw}': missing or empty {', '.join(bad)}")
            continue
        sigs.append(Signature(keyid=s["keyid"], signer=s["signer"], sig=s["sig"],
                              extra={k: v for k, v in s.items() if k not in ("keyid", "signer", "sig")}))
    if len(problems) > start or not isinstance(digest, str) or not isinstance(size, int):
        return None
    known = {"digest", "size", "format", "entries", "recorded_from", "recorded_to", "models", "signatures"}
    return Pin(name=name, digest=digest, size=size, format=fmt, entries=entries,
               recorded_from=rng["recorded_from"], recorded_to=rng["recorded_to"], models=tuple(models),
               signatures=tuple(sorted(sigs, key=lambda s: s.keyid)),
               extra={k: v for k, v in body.items() if k not in known})


# -- text form ------------------------------------------------------------------
_PARSED: OrderedDict[bytes, Lock] = OrderedDict()  # sha256 of the text -> its Lock (a few, LRU)
_PARSED_GUARD = threading.Lock()
_PARSED_KEEP = 4


def parse_lock(text: str | bytes) -> Lock:
    """Parse ``casstore.lock`` (:func:`scan_lock`, else tomllib), remembered by the text's sha256:
    a test suite enters ``casstore.use()`` once per test, and a Lock is never changed in place."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    key = hashlib.sha256(raw).digest()
    with _PARSED_GUARD:
        lock = _PARSED.get(key)
        if lock is not None:
            _PARSED.move_to_end(key)
            return lock
    decoded = _decode(text)
    lock = scan_lock(decoded)
    lock = lock if lock is not None else _parse_toml(decoded)
    with _PARSED_GUARD:
        _PARSED[key] = lock
        while len(_PARSED) > _PARSED_KEEP:
            _PARSED.popitem(last=False)
    return lock


def _decode(text: str | bytes) -> str:
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LockError("casstore.lock is malformed", [f"not valid UTF-8 at byte {exc.start}"]) from None
    if "\x00" in text:
        raise LockError("casstore.lock is malformed", ["contains a NUL byte"])
    return text


def _parse_toml(text: str) -> Lock:
    if sys.version_info >= (3, 11):  # imported here: a lock casstore wrote never needs it
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LockError("casstore.lock is malformed", [f"not valid TOML: {exc}"]) from None
    except RecursionError:
        raise LockError("casstore.lock is malformed", ["nested too deeply"]) from None
    return Lock.from_dict(data)


# -- the layout format_lock writes, one regular expression per pin ----------------------
# Only what format_lock writes, every value of the type and shape from_dict demands:
# strings without escapes, canonical integers, valid names in sorted order, signatures
# sorted by keyid. Anything else returns None and takes the TOML path.
_S = r'[^"\\\x00-\x1f\x7f]'  # a character of a string as format_lock writes it (no escape)
_INT = r"(0|[1-9][0-9]{0,17})"  # canonical, far below 2**63, so TOML and Python agree
_SIG = rf'  \{{ keyid = "({_S}+)", signer = "({_S}+)", sig = "({_S}+)" \}},\n'
_HEAD = r"(?:#[^\x00-\x08\x0a-\x1f\x7f]*\n)*version = 1\n"
_BLOCK = (
    rf'\n\[cassettes\."({NAME_PATTERN})"\]\n'
    r'digest = "(sha256:[0-9a-f]{64})"\n'
    rf"size = {_INT}\n"
    rf'format = "({_S}*)"\n'
    rf"entries = {_INT}\n"
    rf'(?:recorded_from = "({_S}*)"\n)?'
    rf'(?:recorded_to = "({_S}*)"\n)?'
    rf'models = \[((?:"{_S}*"(?:, "{_S}*")*)?)\]\n'
    rf'signatures = (?:\[\]\n|\[\n{_SIG}((?:{_SIG.replace("(", "(?:")})*)\]\n)'  # the first, then the others
)
_new = object.__new__


@functools.cache
def _rules() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    return re.compile(_HEAD), re.compile(_BLOCK), re.compile(_SIG)


def scan_lock(text: str) -> Lock | None:
    """The Lock of ``text`` if it is exactly in format_lock's layout, else None. Every
    block is checked here; its Pin is built when first asked for (:class:`PinTable`)."""
    head_re, block_re, _ = _rules()
    head = head_re.match(text)
    if head is None:
        return None
    pos = head.end()
    rows: dict[str, re.Match[str]] = {}
    last = ""
    for m in block_re.finditer(text, pos):
        if m.start() != pos:
            return None
        pos = m.end()
        name = m[1]
        # out of order or a duplicate table (TOML refuses it); the rest of validate_name
        if name <= last or len(name) > MAX_NAME_LENGTH or name.endswith(".json"):
            return None
        last = name
        rows[name] = m
        if m[12] and _pin_of(m) is None:  # more than one signature: their order is checked now
            return None
    # a Windows device name (CON, aux.txt) loads, as in the general path (allow_reserved)
    if pos != len(text):
        return None
    return Lock(pins=PinTable(rows))


def _pin_of(m: re.Match[str]) -> Pin | None:
    """The Pin of one matched block; None if its signatures are out of order."""
    name, digest, size, fmt, entries, lo, hi, models, keyid, signer, sig, more = m.groups()
    signatures: tuple[Signature, ...] = ()
    rows = [(keyid, signer, sig), *(_rules()[2].findall(more) if more else ())] if keyid is not None else []
    for keyid, signer, sig in rows:
        if signatures and keyid < signatures[-1].keyid:
            return None
        s = _new(Signature)  # past __init__: the fields are checked
        s.__dict__.update(keyid=keyid, signer=signer, sig=sig, extra={})
        signatures += (s,)
    pin = _new(Pin)
    pin.__dict__.update(name=name, digest=digest, size=int(size), format=fmt, entries=int(entries),
                        recorded_from=lo, recorded_to=hi, signatures=signatures, extra={},
                        models=tuple(models[1:-1].split('", "')) if models else ())
    return pin


class PinTable(Mapping[str, Pin]):
    """The pins of a scanned lock, by name in sorted order: a read-only mapping that builds
    each Pin from its checked block on first use. Equal to the dict of the same pins."""

    __slots__ = ("_rows", "_pins")

    def __init__(self, rows: dict[str, re.Match[str]]) -> None:
        self._rows = rows
        self._pins: dict[str, Pin] = {}

    def __getitem__(self, name: str) -> Pin:
        pin = self._pins.get(name)
        if pin is None:
            pin = self._pins[name] = _pin_of(self._rows[name])  # type: ignore[assignment]  # checked by the scan
        return pin  # type: ignore[return-value]

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self._rows else default

    def __contains__(self, name: object) -> bool:
        return name in self._rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def keys(self) -> KeysView[str]:
        return self._rows.keys()

    def values(self) -> ValuesView[Pin]:
        return self._all().values()

    def items(self) -> ItemsView[str, Pin]:
        return self._all().items()

    def _all(self) -> dict[str, Pin]:
        if len(self._pins) != len(self._rows):
            got = self._pins
            self._pins = {name: got.get(name) or _pin_of(m) for name, m in self._rows.items()}  # type: ignore[misc]
        return self._pins

    def block(self, name: str) -> str | None:
        """The text of ``name``'s block as the lock holds it (None: not known here); two
        equal blocks hold equal pins."""
        row = self._rows.get(name)
        return row[0] if isinstance(row, re.Match) else None

    def __repr__(self) -> str:
        return repr(self._all())

    def __reduce__(self) -> tuple[Any, ...]:  # pickled (or deep-copied) as the plain dict
        return (dict, (self._all(),))


def format_lock(lock: Lock, blocks: Mapping[str, str] | None = None) -> str:
    """The text of ``lock``: the header, then each pin's block (:func:`format_pin`) in name
    order. ``blocks``: blocks already written (by ``casstore add``'s workers), each in place
    of the pin of its name in ``lock`` or beside its pins."""
    pins = lock.pins
    known = blocks or {}
    names = sorted(pins.keys() | known.keys()) if known else sorted(pins)
    return _head(lock) + "".join(known.get(name) or format_pin(pins[name]) for name in names)


def _head(lock: Lock) -> str:
    extra = lock.extra
    lines = [HEADER.rstrip("\n")]
    for key in sorted(k for k in extra if k not in ("version", "cassettes")):
        lines.append(f"{_key(key)} = {_value(extra[key])}")
    lines.append(f"version = {lock.version}\n")
    return "\n".join(lines)


_ORDER = ("digest", "size", "format", "entries", "recorded_from", "recorded_to", "models")


def format_pin(pin: Pin) -> str:
    body = pin.to_dict()
    lines = ["", f"[cassettes.{_str(pin.name)}]"]
    keys = [k for k in _ORDER if k in body] + sorted(k for k in body if k not in _ORDER and k != "signatures")
    for k in keys:
        lines.append(f"{_key(k)} = {_value(body[k])}")
    sigs = body.get("signatures", [])
    lines.append("signatures = [\n" + "".join(f"  {_value(s)},\n" for s in sigs) + "]\n" if sigs else "signatures = []\n")
    return "\n".join(lines)


def _str(s: str) -> str:
    out = encode_basestring(s)  # what json.dumps(s, ensure_ascii=False) writes, without its wrapper
    # TOML basic strings forbid raw DEL too; JSON escapes every other control character.
    return out.replace("\x7f", "\\u007f") if "\x7f" in out else out


@functools.lru_cache(maxsize=256)  # the same dozen keys on every pin
def _key(k: str) -> str:
    if k and all(c.isalnum() and c.isascii() or c in "_-" for c in k):
        return k
    return _str(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _str(v)
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }" if v else "{}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    import datetime as _dt  # only for a TOML date kept from a hand-edited lock

    if isinstance(v, (_dt.datetime, _dt.date, _dt.time)):
        return v.isoformat()
    raise TypeError(f"cannot write {type(v).__name__} to the lock")
