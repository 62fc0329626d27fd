"""Flattening entries into columns, and back.

A ``TypeLayout`` is built once per type by a visitor over its ``PropertySpec`` tree:
fixed ``object`` properties that the ``FlattenFilter`` accepts become one column per
nested property (``address.streetName``); everything else is one column. Keys an entry
carries beyond its declared properties are dynamic and get a column each, named by
their path, the first time they appear.

``unflatten(flatten(data))`` gives ``data`` back in a canonical form: every fixed
property present (``None`` when null), dynamic properties that are null left out, and a
flattened object whose values are all null read back as ``None`` (Cassandra cannot tell
a null column from a missing one).
"""

from __future__ import annotations

import datetime as dt
import uuid
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from gridstream.errors import StoreError
from gridstream.operations import PropertySpec, TypeDescriptor
from gridstream.stores.cassandra.columns import (
    VERSION_COLUMN,
    Column,
    column_name,
    split_column_name,
)

__all__ = [
    "DEFAULT_MAX_NESTING_LEVEL",
    "DefaultFlattenFilter",
    "FieldNode",
    "FlattenFilter",
    "Location",
    "PropertyContext",
    "SpecVisitor",
    "TypeLayout",
    "kind_of",
    "visit_specs",
]

DEFAULT_MAX_NESTING_LEVEL = 10
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PropertyContext:
    """What a ``FlattenFilter`` knows of the property it decides on.

    ``path`` is the column-style path including ``name`` (``address.streetName``);
    top-level properties have ``nesting_level`` 1, their nested properties 2, and so on.
    """

    path: str
    name: str
    kind: str
    is_dynamic: bool
    nesting_level: int


@runtime_checkable
class FlattenFilter(Protocol):
    """Decides whether an object-valued property is split into its nested properties
    (``True``) or stored whole in one blob column (``False``)."""

    def should_flatten(self, ctx: PropertyContext) -> bool: ...


@dataclass(frozen=True, slots=True)
class DefaultFlattenFilter:
    """The seed's rule: flatten fixed properties up to a nesting level (10)."""

    max_nesting_level: int = DEFAULT_MAX_NESTING_LEVEL

    def should_flatten(self, ctx: PropertyContext) -> bool:
        return not ctx.is_dynamic and ctx.nesting_level <= self.max_nesting_level


def kind_of(value: Any) -> str:
    """The ``PropertySpec`` kind a runtime value would have (``any`` if none fits)."""
    kinds: tuple[tuple[type | tuple[type, ...], str], ...] = (
        (bool, "bool"),
        (int, "int"),
        (float, "float"),
        (str, "str"),
        ((bytes, bytearray), "bytes"),
        (dt.datetime, "datetime"),
        (dt.date, "date"),
        (Decimal, "decimal"),
        (uuid.UUID, "uuid"),
        ((list, tuple), "list"),
        ((set, frozenset), "set"),
        (Mapping, "dict"),
    )
    for types, kind in kinds:
        if isinstance(value, types):
            return kind
    return "any"


class SpecVisitor(ABC, Generic[T]):
    """Visits a ``PropertySpec`` tree; ``visit_specs`` decides what is flattened."""

    @abstractmethod
    def leaf(self, spec: PropertySpec, path: tuple[str, ...], ctx: PropertyContext) -> T:
        """A property stored in one column."""

    @abstractmethod
    def flattened(
        self, spec: PropertySpec, path: tuple[str, ...], ctx: PropertyContext, children: list[T]
    ) -> T:
        """An object property split into its (already visited) nested properties."""


def visit_specs(
    specs: Sequence[PropertySpec],
    visitor: SpecVisitor[T],
    flatten_filter: FlattenFilter,
    parent: tuple[str, ...] = (),
) -> list[T]:
    """Visit ``specs`` (children before their parent), asking the filter about objects."""
    level = len(parent) + 1
    results: list[T] = []
    for spec in specs:
        path = (*parent, spec.name)
        ctx = PropertyContext(column_name(path), spec.name, spec.kind, False, level)
        if spec.kind == "object" and spec.nested and flatten_filter.should_flatten(ctx):
            children = visit_specs(spec.nested, visitor, flatten_filter, path)
            results.append(visitor.flattened(spec, path, ctx, children))
        else:
            results.append(visitor.leaf(spec, path, ctx))
    return results


@dataclass(frozen=True, slots=True)
class FieldNode:
    """A fixed property in a layout: a column, or a flattened object's children."""

    name: str
    path: tuple[str, ...]
    column: Column | None
    children: Mapping[str, FieldNode] = field(default_factory=dict)

    @property
    def is_object(self) -> bool:
        return self.column is None

    def leaves(self) -> Iterator[Column]:
        """Every column under this node."""
        if self.column is not None:
            yield self.column
        for child in self.children.values():
            yield from child.leaves()


class _LayoutBuilder(SpecVisitor[FieldNode]):
    def leaf(self, spec: PropertySpec, path: tuple[str, ...], ctx: PropertyContext) -> FieldNode:
        return FieldNode(spec.name, path, Column.fixed(path, spec.kind))

    def flattened(
        self,
        spec: PropertySpec,
        path: tuple[str, ...],
        ctx: PropertyContext,
        children: list[FieldNode],
    ) -> FieldNode:
        return FieldNode(spec.name, path, None, {child.name: child for child in children})


class TypeLayout:
    """How one type's entries map to columns of its table."""

    def __init__(self, descriptor: TypeDescriptor, flatten_filter: FlattenFilter) -> None:
        self.type_name = descriptor.name
        self.id_property = descriptor.id_property
        self.id_column = column_name((descriptor.id_property,))
        self.declared_paths = descriptor.declared_paths()
        self.flatten_filter = flatten_filter
        specs = [s for s in descriptor.fixed if s.name != descriptor.id_property]
        nodes = visit_specs(specs, _LayoutBuilder(), flatten_filter)
        self.fields: dict[str, FieldNode] = {node.name: node for node in nodes}
        self.columns: dict[str, Column] = {col.name: col for node in nodes for col in node.leaves()}
        if VERSION_COLUMN in self.columns or self.id_column == VERSION_COLUMN:
            raise StoreError(f"type {self.type_name!r} declares the reserved {VERSION_COLUMN!r}")

    def column(self, name: str) -> Column:
        """The fixed column ``name``, or the dynamic column of that name."""
        fixed = self.columns.get(name)
        return fixed if fixed is not None else Column.dynamic(split_column_name(name))

    def locate(self, key: str, known: Collection[str]) -> Location:
        """Where a property path of a change (``address.city``, ``kafka.topic``) is
        stored, given the table's ``known`` columns. A top-level name wins over a path
        (as in the space); a path ending inside one column's value (a map, a blob, an
        object past the depth limit) says so in ``inner``."""
        if key in self.fields or "." not in key or _has_prefix(known, column_name((key,))):
            return Location((key,))
        segments = tuple(key.split("."))
        children: Mapping[str, FieldNode] = self.fields
        for i, segment in enumerate(segments):
            node = children.get(segment)
            if node is None:
                return _dynamic_location(segments, i, known)
            if node.column is not None:
                return Location(segments[: i + 1], segments[i + 1 :])
            children = node.children
        return Location(segments)

    def flatten_at(self, path: tuple[str, ...], value: Any) -> dict[str, Any]:
        """The columns of one property (at any depth) holding ``value``, as ``flatten``."""
        out: dict[str, Any] = {}
        node = self._node_at(path)
        if node is not None:
            self._flatten_node(node, value, out)
        else:
            self._flatten_dynamic(path, value, out)
        return out

    def _node_at(self, path: tuple[str, ...]) -> FieldNode | None:
        children: Mapping[str, FieldNode] = self.fields
        node = None
        for segment in path:
            node = children.get(segment)
            if node is None:
                return None
            children = node.children
        return node

    def flatten(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Column name → value (not yet encoded; ``None`` where a value is null)."""
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key == self.id_property:
                continue
            node = self.fields.get(key)
            if node is None:
                self._flatten_dynamic((key,), value, out)
            else:
                self._flatten_node(node, value, out)
        return out

    def _flatten_node(self, node: FieldNode, value: Any, out: dict[str, Any]) -> None:
        if node.column is not None:
            out[node.column.name] = value
            return
        if value is None:
            out.update((col.name, None) for col in node.leaves())
            return
        if not isinstance(value, Mapping):
            raise StoreError(
                f"{self.type_name}.{column_name(node.path)} is declared as an object "
                f"but holds a {type(value).__name__}"
            )
        for name, child in node.children.items():
            self._flatten_node(child, value.get(name), out)
        for key, item in value.items():
            if key not in node.children:
                self._flatten_dynamic((*node.path, key), item, out)

    def _flatten_dynamic(self, path: tuple[str, ...], value: Any, out: dict[str, Any]) -> None:
        if not isinstance(path[-1], str):
            raise StoreError(f"{self.type_name}: property names must be strings, not {path!r}")
        if path == (VERSION_COLUMN,):
            raise StoreError(f"{self.type_name}: {VERSION_COLUMN!r} is a reserved column")
        if isinstance(value, Mapping) and value and all(isinstance(k, str) for k in value):
            ctx = PropertyContext(column_name(path), path[-1], "dict", True, len(path))
            if self.flatten_filter.should_flatten(ctx):
                for key, item in value.items():
                    self._flatten_dynamic((*path, key), item, out)
                return
        out[column_name(path)] = value

    def unflatten(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """Nested data from decoded column values (inverse of ``flatten``)."""
        result: dict[str, Any] = {name: _build(node, row) for name, node in self.fields.items()}
        for name, value in row.items():
            if value is None or name in self.columns or name in (self.id_column, VERSION_COLUMN):
                continue
            _insert(result, split_column_name(name), value)
        for name, node in self.fields.items():
            if node.is_object:
                result[name] = _collapse(node, result[name])
        return result


@dataclass(frozen=True, slots=True)
class Location:
    """Where a changed property lives: the columns at or under ``path``, or, when
    ``inner`` is not empty, the part ``inner`` of the value of column ``path``."""

    path: tuple[str, ...]
    inner: tuple[str, ...] = ()


def _has_prefix(known: Collection[str], prefix: str) -> bool:
    return prefix in known or any(name.startswith(prefix + ".") for name in known)


def _dynamic_location(segments: tuple[str, ...], start: int, known: Collection[str]) -> Location:
    """A path leaving the declared properties at ``segments[start]``: the longest prefix
    that is a column already, else a (new) dynamic column at ``start``."""
    if _has_prefix(known, column_name(segments)):
        return Location(segments)
    for end in range(len(segments) - 1, start, -1):
        if column_name(segments[:end]) in known:
            return Location(segments[:end], segments[end:])
    return Location(segments[: start + 1], segments[start + 1 :])


def _build(node: FieldNode, row: Mapping[str, Any]) -> Any:
    if node.column is not None:
        return row.get(node.column.name)
    return {name: _build(child, row) for name, child in node.children.items()}


def _insert(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for segment in path[:-1]:
        nested = target.get(segment)
        if not isinstance(nested, dict):
            nested = {}
            target[segment] = nested
        target = nested
    target[path[-1]] = value


def _collapse(node: FieldNode, value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    for name, child in node.children.items():
        if child.is_object:
            value[name] = _collapse(child, value.get(name))
    return None if all(v is None for v in value.values()) else value
