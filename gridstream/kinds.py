"""Checking values against the declared kinds of a type's fixed properties.

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
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from gridstream.errors import InvalidEntryError
from gridstream.operations import PropertySpec, TypeDescriptor

__all__ = ["check_data", "check_path_value", "kind_accepts"]

_EXACT = 2**53
"""Every int up to this magnitude is exactly a float."""
_NOT_MAPS = frozenset({"str", "int", "float", "bool", "bytes", "datetime", "date",
                       "decimal", "uuid", "list", "set"})


def _float_ok(value: Any) -> bool:
    return type(value) is float or (type(value) is int and -_EXACT <= value <= _EXACT)


_ACCEPTS: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: type(v) is str,
    "int": lambda v: type(v) is int,
    "float": _float_ok,
    "bool": lambda v: type(v) is bool,
    "bytes": lambda v: type(v) is bytes,
    "datetime": lambda v: isinstance(v, dt.datetime),
    "date": lambda v: isinstance(v, dt.date) and not isinstance(v, dt.datetime),
    "decimal": lambda v: type(v) is Decimal or type(v) is int,
    "uuid": lambda v: isinstance(v, uuid.UUID),
    "list": lambda v: type(v) is list or type(v) is tuple,
    "set": lambda v: type(v) is set or type(v) is frozenset,
    "dict": lambda v: isinstance(v, Mapping),
    "object": lambda v: isinstance(v, Mapping),
}


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
