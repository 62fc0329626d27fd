"""Columns of a Cassandra table: names from property paths, CQL types from kinds.

A column is named by its property path, segments joined with ``.``
(``address.streetName``); a ``.`` or ``\\`` inside a property name is escaped with
``\\`` so that a dynamic property literally named ``kafka.topic`` (column
``kafka\\.topic``) never collides with the nested path ``kafka`` → ``topic``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gridstream.errors import StoreError
from gridstream.kinds import KindVisitor, kind_table

__all__ = [
    "ID_KINDS",
    "NATIVE_CQL_TYPES",
    "VERSION_COLUMN",
    "Column",
    "Encoding",
    "column_name",
    "split_column_name",
]

VERSION_COLUMN = "_version"
"""Every table's column holding the version (log sequence number) of the last write."""



class _CqlTypes(KindVisitor[str | None]):
    """A kind's native CQL type; ``None``: a blob from the fixed-property serializer."""

    def str_(self) -> str:
        return "text"

    def int_(self) -> str:
        return "bigint"

    def float_(self) -> str:
        return "double"

    def bool_(self) -> str:
        return "boolean"

    def bytes_(self) -> str:
        return "blob"

    def datetime(self) -> str:
        return "timestamp"

    def date(self) -> str:
        return "date"

    def decimal(self) -> str:
        return "decimal"

    def uuid(self) -> str:
        return "uuid"

    def list_(self) -> None:
        return None

    set_ = dict_ = object_ = any_ = list_


NATIVE_CQL_TYPES: dict[str, str] = {
    k.value: t for k, t in kind_table(_CqlTypes()).items() if t is not None}
"""Property kinds with a native CQL type; every other kind is stored as a blob."""

ID_KINDS: dict[str, str] = {"int": "bigint", "uuid": "uuid", "str": "text"}
"""CQL types of the partition key by the id property's kind (anything else: text)."""


class Encoding(StrEnum):
    """How a column's value is stored."""

    NATIVE = "native"
    """The CQL type's own encoding (fixed properties of a native kind)."""
    FIXED = "fixed"
    """A blob from the fixed-property serializer (collections, maps, other kinds)."""
    DYNAMIC = "dynamic"
    """A blob from the dynamic-property serializer (type-tagged)."""


@dataclass(frozen=True, slots=True)
class Column:
    """One non-key column of a type's table."""

    name: str
    path: tuple[str, ...]
    kind: str
    encoding: Encoding

    @property
    def cql_type(self) -> str:
        if self.encoding is Encoding.NATIVE:
            return NATIVE_CQL_TYPES[self.kind]
        return "blob"

    @classmethod
    def fixed(cls, path: tuple[str, ...], kind: str) -> Column:
        encoding = Encoding.NATIVE if kind in NATIVE_CQL_TYPES else Encoding.FIXED
        return cls(column_name(path), path, kind, encoding)

    @classmethod
    def dynamic(cls, path: tuple[str, ...]) -> Column:
        return cls(column_name(path), path, "any", Encoding.DYNAMIC)


def _escape(segment: str) -> str:
    if not segment:
        raise StoreError("an empty property name cannot be stored as a column")
    return segment.replace("\\", "\\\\").replace(".", "\\.")


def column_name(path: tuple[str, ...]) -> str:
    """The column name of a property path (segments escaped, joined with ``.``)."""
    if not path:
        raise StoreError("an empty property path cannot be stored as a column")
    return ".".join(_escape(segment) for segment in path)


def split_column_name(name: str) -> tuple[str, ...]:
    """The property path of a column name; inverse of ``column_name``."""
    segments: list[str] = []
    current: list[str] = []
    chars = iter(name)
    for char in chars:
        if char == "\\":
            current.append(next(chars, "\\"))
        elif char == ".":
            segments.append("".join(current))
            current = []
        else:
            current.append(char)
    segments.append("".join(current))
    return tuple(segments)
