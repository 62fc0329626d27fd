"""The unit every part of gridstream moves: one committed grid operation.

The space writes operations into its durable log; the mirror reads them back in bulks
(one bulk = one transaction or one single operation) and hands them to sync endpoints;
the protocol turns them into Kafka records; stores apply them. Nothing downstream
depends on how the space is implemented, only on these records.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["Bulk", "EntityId", "Kind", "OpType", "Operation", "PropertySpec", "TypeDescriptor"]

EntityId = str | int
"""An entry's id: a string or an integer (other id types are converted to str)."""


class OpType(StrEnum):
    """What happened to an entry. Names follow the seed protocol."""

    WRITE = "WRITE"
    """The entry was inserted, or overwritten whole (``data`` is the full entry)."""
    UPDATE = "UPDATE"
    """An existing entry was replaced whole (``data`` is the full entry)."""
    PARTIAL_UPDATE = "PARTIAL_UPDATE"
    """Only the non-null properties in ``data`` were written."""
    CHANGE = "CHANGE"
    """A change set was applied; ``data`` holds the resulting values of changed
    properties and ``removed`` the properties that were removed."""
    REMOVE = "REMOVE"
    """The entry was removed (``data`` is its last state, for stores that need it)."""
    TAKE = "TAKE"
    """The entry was taken (read and removed); same effect as REMOVE."""

    @property
    def is_delete(self) -> bool:
        return self in (OpType.REMOVE, OpType.TAKE)

    @property
    def is_partial(self) -> bool:
        return self in (OpType.PARTIAL_UPDATE, OpType.CHANGE)


@dataclass(frozen=True, slots=True)
class Operation:
    """One committed operation on one entry.

    ``version`` is space-wide and strictly increasing (the operation's log sequence
    number): it only grows, across removes and re-creates, so idempotent sinks can use it
    as a write timestamp or a ``WHERE version < new`` guard.
    """

    op: OpType
    type_name: str
    id: EntityId
    version: int
    data: Mapping[str, Any] | None
    partition: int
    timestamp_ms: int
    txn_id: str | None = None
    removed: tuple[str, ...] = ()
    routing: Any = None


@dataclass(frozen=True, slots=True)
class Bulk:
    """Operations committed together: a transaction, or a single operation.

    A bulk is the unit of atomicity from the space to every sink: it is never split.
    ``first_seq`` is the sequence number of its first operation; the bulk covers
    ``first_seq .. first_seq + len(operations) - 1`` without gaps, so a reader can tell
    that nothing is missing between two bulks.
    """

    first_seq: int
    operations: Sequence[Operation] = field(default_factory=tuple)
    txn_id: str | None = None
    timestamp_ms: int = 0

    @property
    def next_seq(self) -> int:
        return self.first_seq + len(self.operations)


class Kind(StrEnum):
    """The kind of a declared property. Each target (Avro, Spark SQL, CQL, the value
    checks) maps every kind through one ``gridstream.kinds.KindVisitor``: a new kind
    fails type checking in each until it is mapped there."""

    STR = "str"
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    BYTES = "bytes"
    DATETIME = "datetime"
    DATE = "date"
    DECIMAL = "decimal"
    UUID = "uuid"
    LIST = "list"
    SET = "set"
    DICT = "dict"
    OBJECT = "object"
    """A nested declared type (a dataclass field of a dataclass type)."""
    ANY = "any"
    """Anything the operation log stores; nothing is checked."""

    @classmethod
    def of(cls, text: str, where: str) -> Kind:
        """The kind named ``text``; a ``ValueError`` naming ``where`` and the kinds."""
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"{where}: unknown kind {text!r}; one of "
                             f"{', '.join(cls)}") from None


@dataclass(frozen=True, slots=True)
class PropertySpec:
    """A fixed (declared) property of a type.

    ``kind`` is a ``Kind`` (its text, ``"str"``, is accepted and converted; an unknown
    one is a ``ValueError``). For ``object`` ``nested`` lists the nested type's own fixed
    properties, so stores can flatten ``address.streetName``-style columns.
    """

    name: str
    kind: Kind
    nested: tuple[PropertySpec, ...] = ()
    nested_type: str | None = None

    def __post_init__(self) -> None:
        if type(self.kind) is not Kind:  # its text: from a file, a log, a schema
            object.__setattr__(self, "kind", Kind.of(self.kind, f"property {self.name!r}"))


@dataclass(frozen=True, slots=True)
class TypeDescriptor:
    """What the space knows of an entry type; persisted in the log so that a mirror in
    another process, and every store, sees the same description.

    Properties not listed in ``fixed`` are dynamic (documents may carry them when
    ``dynamic_properties`` is true).
    """

    name: str
    id_property: str
    routing_property: str | None = None
    fixed: tuple[PropertySpec, ...] = ()
    indexes: tuple[str, ...] = ()
    topic: str | None = None
    dynamic_properties: bool = True

    def fixed_names(self) -> frozenset[str]:
        return frozenset(p.name for p in self.fixed)

    def declared_paths(self) -> frozenset[str]:
        """The dotted paths of every declared property, those of declared nested objects
        included (``address``, ``address.city``): unsetting one makes it null."""
        return _declared_paths(self.fixed)


@functools.lru_cache(maxsize=1024)
def _declared_paths(fixed: tuple[PropertySpec, ...]) -> frozenset[str]:
    out: set[str] = set()
    stack = [("", spec) for spec in fixed]
    while stack:
        prefix, spec = stack.pop()
        path = prefix + spec.name
        out.add(path)
        stack.extend((path + ".", child) for child in spec.nested)
    return frozenset(out)
