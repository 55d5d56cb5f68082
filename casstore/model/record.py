"""Plain classes that behave as the dataclasses they were, for what every command imports.

``import dataclasses`` imports ``inspect`` (with ``ast``, ``dis`` and ``tokenize``: ~40M
instructions, ~13 ms), and Python 3.11 compiles each method ``@dataclass`` generates
separately (~3-6M instructions a class): together about a third of a fresh `casstore verify`
at a thousand pins before its first check (docs/benchmarks.md, issue #19). The lock, the
keys, the config, the project and the store's small records are these classes instead.

A class lists its fields as annotations (in order, no defaults) and writes its
``__init__``; :class:`Record` gives it what ``@dataclass`` gave: ``__repr__``
(``Name(field=value, ...)``), ``__eq__`` (an instance of the same class, fields in order),
``__match_args__``, no ``__hash__``; :class:`FrozenRecord` adds ``__hash__`` of the fields
and ``dataclasses.FrozenInstanceError`` on assignment or deletion, as
``@dataclass(frozen=True)`` (``__init__`` sets the fields with :func:`fill`). Fields named in
a class's ``_internal`` are left out of ``__repr__``, ``==`` and the hash, as
``field(repr=False, compare=False)``. ``dataclasses.fields``, ``replace``,
``asdict`` and ``is_dataclass`` still take them: ``__dataclass_fields__`` is made on first
use (``dataclasses`` is imported then), its fields without their defaults (``replace``
passes every field to ``__init__``). tests/test_record.py compares each with a dataclass.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, ClassVar

__all__ = ["Record", "FrozenRecord", "fill"]


class _DataclassFields:
    """``__dataclass_fields__`` (and ``__dataclass_params__``) of a record class, made from a
    dataclass of the same fields when ``dataclasses`` first asks, then kept on the class."""

    def __init__(self, params: bool = False) -> None:
        self.params = params

    def __get__(self, obj: object, owner: type[Record]) -> Any:
        if owner in (Record, FrozenRecord):
            raise AttributeError("__dataclass_fields__")  # the bases themselves are no dataclass
        if not owner.__dict__.get("_declares"):  # a plain subclass of a record class: its base's
            base = next(c for c in owner.__mro__ if c.__dict__.get("_declares"))
            return getattr(base, "__dataclass_params__" if self.params else "__dataclass_fields__")
        import dataclasses

        hints = owner.__dict__["__annotations__"]
        shadow = dataclasses.make_dataclass(
            owner.__name__, [(f, hints[f], dataclasses.field(repr=False, compare=False)) if f in owner._internal
                             else (f, hints[f]) for f in owner._fields], frozen=issubclass(owner, FrozenRecord))
        fields, params = shadow.__dataclass_fields__, shadow.__dataclass_params__  # type: ignore[attr-defined]
        owner.__dataclass_fields__, owner.__dataclass_params__ = fields, params
        return params if self.params else fields


class Record:
    """A mutable record: ``@dataclass``'s ``__repr__`` and ``__eq__``, unhashable."""

    _declares: ClassVar[bool] = False  # the class declares the fields (not a plain subclass of one)
    _fields: ClassVar[tuple[str, ...]] = ()
    _internal: ClassVar[tuple[str, ...]] = ()  # fields left out of repr, == and hash (field(repr=False, compare=False))
    _shown: ClassVar[tuple[str, ...]] = ()  # the others
    _values: ClassVar[Any] = None  # self -> the tuple of the shown fields (operator.attrgetter)
    __dataclass_fields__: ClassVar[Any] = _DataclassFields()
    __dataclass_params__: ClassVar[Any] = _DataclassFields(params=True)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if Record not in cls.__bases__ and FrozenRecord not in cls.__bases__:
            cls._declares = False  # a plain subclass of a record class keeps its fields, repr, == and
            return  # hash, and (frozen) may set other names: as a plain subclass of a dataclass
        cls._declares = True
        cls._fields = tuple(cls.__dict__.get("__annotations__", {}))
        cls._shown = tuple(f for f in cls._fields if f not in cls._internal)
        setattr(cls, "__match_args__", cls._fields)  # noqa: B010 - mypy refuses the assignment
        if not cls._shown:
            cls._values = staticmethod(lambda obj: ())
        elif len(cls._shown) == 1:
            one = attrgetter(cls._shown[0])
            cls._values = staticmethod(lambda obj: (one(obj),))
        else:
            cls._values = attrgetter(*cls._shown)  # not a descriptor: called as self._values(self)

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}({', '.join(f'{f}={v!r}' for f, v in zip(self._shown, self._values(self), strict=True))})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return bool(self._values(self) == self._values(other))
        return NotImplemented

    # no __hash__: with __eq__ defined here, Python sets it to None (as @dataclass(eq=True) does)


class FrozenRecord(Record):
    """An immutable record: ``@dataclass(frozen=True)``'s ``__hash__`` and assignment errors."""

    def __hash__(self) -> int:
        return hash(self._values(self))

    def __setattr__(self, name: str, value: Any) -> None:
        if self._declares or name in self._fields:  # as @dataclass(frozen=True): a subclass's own names are free
            from dataclasses import FrozenInstanceError

            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if self._declares or name in self._fields:
            from dataclasses import FrozenInstanceError

            raise FrozenInstanceError(f"cannot delete field {name!r}")
        object.__delattr__(self, name)


def fill(obj: Record, **fields: Any) -> None:
    """Set the fields of a new record (a frozen one too: past its ``__setattr__``)."""
    obj.__dict__.update(fields)
