"""casstore.model.record: the plain classes that replaced the dataclasses every command
imports behave as those dataclasses did (repr, equality, hashing, frozen-ness, pickling, and
the dataclasses module's own functions), each compared with a real dataclass."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from casstore.config import Config
from casstore.git.trust import Policy, TrustChange
from casstore.model.cassette import Cassette
from casstore.model.lock import Lock, Pin, Signature
from casstore.model.record import FrozenRecord, Record, fill
from casstore.model.redaction import Finding
from casstore.model.redaction_rules import KeyRule, RuleSet, ValueRule, _ConfigKey
from casstore.ops.check import CheckReport
from casstore.ops.check_files import _Limits
from casstore.ops.findings import CheckFinding
from casstore.ops.results import Problem
from casstore.ops.verify import VerifyReport
from casstore.project import Project
from casstore.signing import SigningKey, TrustedKey, TrustedKeys
from casstore.store.base import ObjectInfo
from casstore.store.cache_packs import MergeReport
from casstore.store.keys import StoreKey
from casstore.store.liveness import Markers, SweepResult
from casstore.store.packs import Catalog, ReadTask


class Point(FrozenRecord):
    x: int
    y: int
    tags: Mapping[str, Any]

    def __init__(self, x: int, y: int = 0, tags: Mapping[str, Any] | None = None) -> None:
        fill(self, x=x, y=y, tags={} if tags is None else tags)


@dataclasses.dataclass(frozen=True)
class DataPoint:
    x: int
    y: int = 0
    tags: Mapping[str, Any] = dataclasses.field(default_factory=dict)


class Pair(FrozenRecord):
    a: str
    b: tuple[int, ...]

    def __init__(self, a: str, b: tuple[int, ...] = ()) -> None:
        fill(self, a=a, b=b)


class Box(Record):
    items: list[int]

    def __init__(self, items: list[int] | None = None) -> None:
        self.items = [] if items is None else items


@dataclasses.dataclass
class DataBox:
    items: list[int] = dataclasses.field(default_factory=list)


def _same_repr(record: object, data: object) -> bool:
    return repr(record).split("(", 1)[1] == repr(data).split("(", 1)[1]


def test_a_frozen_record_behaves_as_a_frozen_dataclass() -> None:
    for args in [(1,), (1, 2), (1, 2, {"a": [1]})]:
        p, d = Point(*args), DataPoint(*args)  # type: ignore[arg-type]
        assert _same_repr(p, d) and repr(p).startswith("Point(")
        assert p == Point(*args) and not p != Point(*args)  # type: ignore[arg-type]
        assert (p == d) is False and p.__eq__(d) is NotImplemented  # another class is never equal
        assert p != Point(args[0] + 1)
        assert p.__match_args__ == DataPoint.__match_args__ == ("x", "y", "tags")
        match p:
            case Point(x, y):
                assert (x, y) == (d.x, d.y)
        for obj in (p, d):  # a field or a new attribute: both refused (an AttributeError)
            for act in (lambda o: setattr(o, "x", 5), lambda o: setattr(o, "new", 5), lambda o: delattr(o, "x")):
                with pytest.raises(dataclasses.FrozenInstanceError):
                    act(obj)
        assert p.x == args[0] and not hasattr(p, "new")
        assert copy.deepcopy(p) == p and pickle.loads(pickle.dumps(p)) == p
    assert hash(Pair("x", (1,))) == hash(Pair("x", (1,))) and len({Pair("x"), Pair("x"), Pair("y")}) == 2
    assert hash(Pair("x", (1,))) == hash(("x", (1,)))  # the hash of its fields, as @dataclass(frozen=True)
    with pytest.raises(TypeError, match="unhashable type: 'dict'"):  # as the dataclass: its dict field
        hash(DataPoint(1))
    with pytest.raises(TypeError, match="unhashable type: 'dict'"):
        hash(Point(1))
    assert Point(1).tags is not Point(1).tags  # a fresh default each time (default_factory)


def test_the_frozen_errors_name_the_field_as_dataclasses_do() -> None:
    for act in (lambda o: setattr(o, "y", 1), lambda o: delattr(o, "y")):
        with pytest.raises(dataclasses.FrozenInstanceError) as want:
            act(DataPoint(1))
        with pytest.raises(dataclasses.FrozenInstanceError) as got:
            act(Point(1))
        assert str(got.value) == str(want.value)


def test_a_mutable_record_behaves_as_a_dataclass() -> None:
    b, d = Box([1, 2]), DataBox([1, 2])
    assert _same_repr(b, d) and b == Box([1, 2]) and b != Box()
    b.items.append(3)
    b.items = [4]  # assignable
    assert b == Box([4])
    with pytest.raises(TypeError, match="unhashable type"):
        hash(b)
    with pytest.raises(TypeError, match="unhashable type"):
        hash(d)
    assert Box().items is not Box().items


def test_the_dataclasses_functions_take_records() -> None:
    p = Point(1, 2, {"k": (1, 2)})
    assert dataclasses.is_dataclass(p) and dataclasses.is_dataclass(Point)
    assert not dataclasses.is_dataclass(Record) and not dataclasses.is_dataclass(FrozenRecord)
    assert [f.name for f in dataclasses.fields(p)] == [f.name for f in dataclasses.fields(DataPoint)]
    assert dataclasses.replace(p, y=5) == Point(1, 5, {"k": (1, 2)})
    assert dataclasses.asdict(p) == dataclasses.asdict(DataPoint(1, 2, {"k": (1, 2)}))
    assert dataclasses.asdict(Box([1])) == {"items": [1]}
    assert Point.__dataclass_params__.frozen and not Box.__dataclass_params__.frozen
    nested = Lock(pins={"a": Pin("a", "sha256:" + "0" * 64, 3, signatures=(Signature("k", "s", "sig"),))})
    assert dataclasses.asdict(nested)["pins"]["a"]["signatures"][0] == {
        "keyid": "k", "signer": "s", "sig": "sig", "extra": {}}


def test_internal_fields_stay_out_of_repr_and_equality_as_repr_false_compare_false() -> None:
    a, b = RuleSet(), RuleSet()
    a._key_cache["authorization"] = ("authorization", False, 1)  # a cache filled by use
    assert a == b and hash(a) == hash(b) and repr(a) == repr(b) and "_key_cache" not in repr(a)
    fields = {f.name: f for f in dataclasses.fields(a)}
    assert list(fields)[-2:] == ["_key_cache", "_clean_keys"]
    assert not fields["_key_cache"].compare and not fields["_key_cache"].repr and fields["placeholder"].compare
    # replace passes every field, the caches too; a RuleSet keeps its own (what one learnt may
    # be false under another's rules: tests/test_redaction_cache.py)
    c = dataclasses.replace(a, placeholder="[{rule}]")
    assert c.placeholder == "[{rule}]" and c._key_cache == {} and a._key_cache != {}


# every class that was a dataclass, with the arguments of one instance
RECORDS: list[tuple[type, tuple[Any, ...], bool]] = [
    (Signature, ("k", "s", "sig"), True),
    (Pin, ("a", "sha256:" + "0" * 64, 3), True),
    (Lock, (), True),
    (Config, (), True),
    (TrustedKey, ("me", b"\x00" * 32), True),
    (TrustedKeys, (), True),
    (TrustChange, ("added", "0123", "me"), True),
    (Policy, (TrustedKeys(), True), True),
    (ObjectInfo, ("objects/x", 1, None), True),
    (StoreKey, ("object", "sha256:" + "0" * 64), True),
    (Project, (Path("."),), False),
    (Catalog, (), False),
    (ReadTask, (["k"], dict), False),
    (MergeReport, (), False),
    (Problem, ("a", "sha256:", "bad"), False),
    (VerifyReport, (), False),
    (SigningKey, ("me", None), True),
    (Cassette, ("suite/a",), True),
    (KeyRule, ("token", bool), True),
    (ValueRule, ("jwt", None, ("eyJ",)), True),
    (_ConfigKey, ("X-Key", "xkey"), True),
    (RuleSet, (), True),
    (Finding, ("jwt", "$.a", "eyJ…"), True),
    (CheckFinding, ("error", "secret", "a.json", "found"), False),
    (_Limits, (1, 2, 3, 4, (), ()), True),
    (CheckReport, (), False),
    (Markers, (), False),
    (SweepResult, (), False),
]


@pytest.mark.parametrize(("cls", "args", "frozen"), RECORDS, ids=[c.__name__ for c, _, _ in RECORDS])
def test_each_record_class_keeps_its_dataclass_shape(cls: type, args: tuple[Any, ...], frozen: bool) -> None:
    assert issubclass(cls, FrozenRecord) is frozen
    params = list(inspect.signature(cls).parameters)
    assert tuple(params) == cls._fields == cls.__match_args__  # type: ignore[attr-defined]
    obj = cls(*args)
    assert dataclasses.replace(obj) == obj and copy.copy(obj) == obj
    assert [f.name for f in dataclasses.fields(obj)] == params
    if frozen:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, params[0], None)
    # a mutable default is made for each instance, as default_factory did
    for name in params[len(args):]:
        value = getattr(obj, name)
        if isinstance(value, (dict, list)):
            assert getattr(cls(*args), name) is not value


class SubPoint(Point):  # a plain subclass, as a user's subclass of Pin or Config
    def norm(self) -> int:
        return abs(self.x) + abs(self.y)


class DataSubPoint(DataPoint):
    def norm(self) -> int:
        return abs(self.x) + abs(self.y)


class SubPair(Pair):
    pass


class LabelledPin(Pin):
    pass


def test_a_plain_subclass_keeps_its_base_fields_as_with_a_dataclass() -> None:
    s, d = SubPoint(1, 2), DataSubPoint(1, 2)
    assert _same_repr(s, d) and repr(s).startswith("SubPoint(x=1")
    assert s == SubPoint(1, 2) and s != SubPoint(3, 4)  # not every instance equal
    assert d == DataSubPoint(1, 2) and d != DataSubPoint(3, 4)
    assert hash(SubPair("a", (1,))) == hash(SubPair("a", (1,))) == hash(Pair("a", (1,)))
    assert hash(SubPair("a", (1,))) != hash(SubPair("b", (2,)))
    assert s != Point(1, 2) and d != DataPoint(1, 2)  # another class, as @dataclass's __eq__
    assert [f.name for f in dataclasses.fields(SubPoint)] == [f.name for f in dataclasses.fields(d)]
    assert dataclasses.asdict(s) == dataclasses.asdict(d)
    assert dataclasses.replace(s, y=5) == SubPoint(1, 5) and s.norm() == 3
    assert SubPoint.__match_args__ == DataSubPoint.__match_args__  # type: ignore[attr-defined]
    # frozen dataclass semantics: a field of a subclass instance is frozen, another name is not
    for obj in (s, d):
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.x = 9  # type: ignore[misc]
        obj.note = "free"  # type: ignore[attr-defined]
        assert obj.note == "free"  # type: ignore[attr-defined]
    a, b = LabelledPin("a", "sha256:" + "0" * 64, 1), LabelledPin("b", "sha256:" + "1" * 64, 2)
    assert a != b and "name='a'" in repr(a) and [f.name for f in dataclasses.fields(a)] == list(Pin._fields)
