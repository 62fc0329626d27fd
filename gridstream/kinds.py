"""The declared kinds' one visitor, and checking values against them.

``KindVisitor`` has one method per ``Kind``; ``visit`` dispatches to it and
``kind_table`` maps every kind through a visitor at once. Each target mapping (Avro
types, Spark SQL types, CQL types, the value checks below) is a visitor, so a new kind
fails type checking in every one of them until each maps it.

Checking values against the declared kinds of a type's fixed properties:

A declared property (``PropertySpec.kind``) accepts ``None`` and values of its kind, in
the stored form ``gridstream.model.normalize_value`` gives (enums as their values,
dataclasses as maps). Two coercions are accepted because they lose nothing and every
codec carries them: an ``int`` for a ``float`` property (when the float holds it
exactly: |n| ≤ 2**53) and an ``int`` for a ``decimal``
property. A ``bool`` is not a number, a ``datetime`` is not a ``date``, a ``list`` is
not a ``set`` (its duplicates would be lost). ``list``/``dict``/``any`` and ``object``
without declared nested properties do not look inside; a declared nested object's
declared properties are checked at any depth.
"""

from __future__ import annotations

import datetime as dt
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Generic, TypeVar, assert_never

from gridstream.errors import InvalidEntryError
from gridstream.operations import Kind, PropertySpec, TypeDescriptor

__all__ = ["KindVisitor", "check_data", "check_path_value", "kind_accepts", "kind_table",
           "visit"]

T = TypeVar("T")


class KindVisitor(ABC, Generic[T]):
    """What one target makes of each kind (pyiceberg's schema visitors are the model)."""

    @abstractmethod
    def str_(self) -> T: ...
    @abstractmethod
    def int_(self) -> T: ...
    @abstractmethod
    def float_(self) -> T: ...
    @abstractmethod
    def bool_(self) -> T: ...
    @abstractmethod
    def bytes_(self) -> T: ...
    @abstractmethod
    def datetime(self) -> T: ...
    @abstractmethod
    def date(self) -> T: ...
    @abstractmethod
    def decimal(self) -> T: ...
    @abstractmethod
    def uuid(self) -> T: ...
    @abstractmethod
    def list_(self) -> T: ...
    @abstractmethod
    def set_(self) -> T: ...
    @abstractmethod
    def dict_(self) -> T: ...
    @abstractmethod
    def object_(self) -> T: ...
    @abstractmethod
    def any_(self) -> T: ...


def visit(kind: Kind, visitor: KindVisitor[T]) -> T:  # noqa: PLR0911 - one case a kind
    """``visitor``'s answer for ``kind``."""
    match kind:
        case Kind.STR:
            return visitor.str_()
        case Kind.INT:
            return visitor.int_()
        case Kind.FLOAT:
            return visitor.float_()
        case Kind.BOOL:
            return visitor.bool_()
        case Kind.BYTES:
            return visitor.bytes_()
        case Kind.DATETIME:
            return visitor.datetime()
        case Kind.DATE:
            return visitor.date()
        case Kind.DECIMAL:
            return visitor.decimal()
        case Kind.UUID:
            return visitor.uuid()
        case Kind.LIST:
            return visitor.list_()
        case Kind.SET:
            return visitor.set_()
        case Kind.DICT:
            return visitor.dict_()
        case Kind.OBJECT:
            return visitor.object_()
        case Kind.ANY:
            return visitor.any_()
        case _:
            assert_never(kind)


def kind_table(visitor: KindVisitor[T]) -> dict[Kind, T]:
    """Every kind's answer: the lookup table of one target."""
    return {kind: visit(kind, visitor) for kind in Kind}


_EXACT = 2**53
"""Every int up to this magnitude is exactly a float."""


def _float_ok(value: Any) -> bool:
    return type(value) is float or (type(value) is int and -_EXACT <= value <= _EXACT)


Check = Callable[[Any], bool]


class _Accepts(KindVisitor[Check | None]):
    """The values a kind accepts, in stored form (``None``: anything)."""

    def str_(self) -> Check:
        return lambda v: type(v) is str

    def int_(self) -> Check:
        return lambda v: type(v) is int

    def float_(self) -> Check:
        return _float_ok

    def bool_(self) -> Check:
        return lambda v: type(v) is bool

    def bytes_(self) -> Check:
        return lambda v: type(v) is bytes

    def datetime(self) -> Check:
        return lambda v: isinstance(v, dt.datetime)

    def date(self) -> Check:
        return lambda v: isinstance(v, dt.date) and not isinstance(v, dt.datetime)

    def decimal(self) -> Check:
        return lambda v: type(v) is Decimal or type(v) is int

    def uuid(self) -> Check:
        return lambda v: isinstance(v, uuid.UUID)

    def list_(self) -> Check:
        return lambda v: type(v) is list or type(v) is tuple

    def set_(self) -> Check:
        return lambda v: type(v) is set or type(v) is frozenset

    def dict_(self) -> Check:
        return lambda v: isinstance(v, Mapping)

    def object_(self) -> Check:
        return lambda v: isinstance(v, Mapping)

    def any_(self) -> None:
        return None


_ACCEPTS: dict[str, Check | None] = {k.value: c for k, c in kind_table(_Accepts()).items()}


class _HoldsPaths(KindVisitor[bool]):
    """Whether a property of the kind may hold a path (``address.city``) inside."""

    def str_(self) -> bool:
        return False

    int_ = float_ = bool_ = bytes_ = datetime = date = decimal = uuid = list_ = set_ = str_

    def dict_(self) -> bool:
        return True

    object_ = any_ = dict_


_NOT_MAPS = frozenset(k for k, holds in kind_table(_HoldsPaths()).items() if not holds)


def kind_accepts(kind: str, value: Any) -> bool:
    """Whether a property declared ``kind`` accepts ``value`` (in its stored form)."""
    if value is None:
        return True
    accepts = _ACCEPTS.get(kind)
    return accepts is None or accepts(value)  # "any" and unknown kinds accept anything


def _check(type_name: str, spec: PropertySpec, value: Any, path: str) -> None:
    if not kind_accepts(spec.kind, value):
        raise InvalidEntryError(
            f"{type_name}: property {path!r} is declared {spec.kind}; "
            f"a value of type {type(value).__qualname__} does not fit it")
    if spec.kind == "object" and spec.nested and value is not None:
        _check_nested(type_name, spec.nested, value, path)


def _check_nested(type_name: str, specs: tuple[PropertySpec, ...], data: Mapping[str, Any],
                  prefix: str) -> None:
    for spec in specs:
        if spec.name in data:
            _check(type_name, spec, data[spec.name], f"{prefix}.{spec.name}" if prefix
                   else spec.name)


def check_data(descriptor: TypeDescriptor, data: Mapping[str, Any]) -> None:
    """``InvalidEntryError`` if a declared property of ``data`` has a value of another
    kind (naming the type, the property path, its kind and the value's type)."""
    _check_nested(descriptor.name, descriptor.fixed, data, "")


def check_path_value(descriptor: TypeDescriptor, path: str, value: Any,
                     top_level: bool) -> None:
    """Check the value a change sets at ``path`` (``top_level``: the path is one
    top-level name, dots included). A path below a declared property that is not a map
    (``tags.x`` for a set) is refused; below a map of undeclared shape, nothing is
    checked."""
    segments = [path] if top_level else path.split(".")
    specs = descriptor.fixed
    for i, segment in enumerate(segments):
        spec = next((s for s in specs if s.name == segment), None)
        if spec is None:
            return  # a dynamic property, or an undeclared key of a map
        where = ".".join(segments[: i + 1])
        if i == len(segments) - 1:
            _check(descriptor.name, spec, value, where)
            return
        if spec.kind in _NOT_MAPS:
            raise InvalidEntryError(
                f"{descriptor.name}: property {where!r} is declared {spec.kind}; "
                f"{path!r} cannot be set inside it")
        if spec.kind != "object" or not spec.nested:
            return
        specs = spec.nested
