"""The Cassandra mapping: everything writers and readers must agree on, in one object.

A ``CassandraMapping`` holds the table-name converter, the flatten filter and the two
value serializers, builds (and caches) each type's ``TypeLayout``, and encodes or
decodes column values. The mirror endpoint, the Spark store feed and the reader all
build their mapping from the same settings, so they read what the others wrote.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from gridstream.errors import StoreError
from gridstream.operations import TypeDescriptor
from gridstream.stores.cassandra.columns import ID_KINDS, Column, Encoding
from gridstream.stores.cassandra.flatten import DefaultFlattenFilter, FlattenFilter, TypeLayout
from gridstream.stores.cassandra.naming import DefaultTableNameConverter, TableNameConverter
from gridstream.stores.cassandra.serializers import PropertyValueSerializer, resolve_serializer

__all__ = ["CassandraMapping"]


class CassandraMapping:
    """Names, layouts and value encodings for every type written to one keyspace."""

    def __init__(
        self,
        *,
        name_converter: TableNameConverter | None = None,
        flatten_filter: FlattenFilter | None = None,
        fixed_serializer: str | PropertyValueSerializer = "msgpack",
        dynamic_serializer: str | PropertyValueSerializer = "msgpack",
    ) -> None:
        self.name_converter = name_converter or DefaultTableNameConverter()
        self.flatten_filter = flatten_filter or DefaultFlattenFilter()
        self.fixed_serializer = resolve_serializer(fixed_serializer)
        self.dynamic_serializer = resolve_serializer(dynamic_serializer)
        self._layouts: dict[TypeDescriptor, TypeLayout] = {}

    def seed_table_name(self, type_name: str) -> str:
        """The converter's name for ``type_name``: its table unless another type holds
        that name (writers and readers ask ``cassandra_table_names`` for the table)."""
        return self.name_converter.to_table_name(type_name)

    def layout(self, descriptor: TypeDescriptor) -> TypeLayout:
        """The (cached) layout of ``descriptor``; a changed descriptor gets a new one."""
        layout = self._layouts.get(descriptor)
        if layout is None:
            layout = TypeLayout(descriptor, self.flatten_filter)
            self._layouts[descriptor] = layout
        return layout

    @staticmethod
    def id_cql_type(descriptor: TypeDescriptor, sample_id: object = None) -> str:
        """The partition key's CQL type: from the id property's declared kind, else
        from the type of an id seen (integers → bigint, anything else → text)."""
        for spec in descriptor.fixed:
            if spec.name == descriptor.id_property:
                return ID_KINDS.get(spec.kind, "text")
        is_int = isinstance(sample_id, int) and not isinstance(sample_id, bool)
        return "bigint" if is_int else "text"

    def encode(self, column: Column, value: Any) -> Any:
        """The value to bind for ``column`` (blobs serialized, ``None`` kept)."""
        if value is None or column.encoding is Encoding.NATIVE:
            return value
        serializer = self._serializer(column)
        try:
            return serializer.to_bytes(value)
        except Exception as exc:  # custom serializers may raise anything
            raise StoreError(f"column {column.name!r}: {exc}") from exc

    def decode(self, column: Column, value: Any) -> Any:
        """The property value of a column value read back (inverse of ``encode``)."""
        if value is None:
            return None
        if column.encoding is Encoding.NATIVE:
            return _native_value(column.kind, value)
        serializer = self._serializer(column)
        try:
            return serializer.from_bytes(bytes(value))
        except Exception as exc:  # custom serializers may raise anything
            raise StoreError(f"column {column.name!r}: {exc}") from exc

    def _serializer(self, column: Column) -> PropertyValueSerializer:
        if column.encoding is Encoding.DYNAMIC:
            return self.dynamic_serializer
        return self.fixed_serializer

    def encode_row(self, layout: TypeLayout, flat: Mapping[str, Any]) -> dict[str, Any]:
        """Encode every value of a flattened entry."""
        return {name: self.encode(layout.column(name), value) for name, value in flat.items()}


def _native_value(kind: str, value: Any) -> Any:
    """Driver values to property values (the driver's ``Date`` to ``datetime.date``)."""
    if kind == "date" and not isinstance(value, dt.date):
        to_date = getattr(value, "date", None)
        if callable(to_date):
            return to_date()
    return value
