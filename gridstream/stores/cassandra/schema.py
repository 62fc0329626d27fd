"""Keyspace, tables, columns and indexes, created as types appear and evolve.

A type's table is created the first time the type is seen: the id property as partition
key, a ``_version bigint`` column, and a column per fixed (flattened) property. Columns
for dynamic properties are added with ``ALTER TABLE ... ADD`` when they first appear. A
column that already exists with another type is a ``StoreError`` (never a silent
re-interpretation). Declared indexes become storage-attached indexes (SAI, Cassandra 5)
where SAI allows (native types, plain column names), legacy secondary indexes elsewhere
(flattened ``address.city`` columns, blobs).

Schema changes are checked by reading ``system_schema`` again, never by matching error
text, so writers racing to add the same column both succeed.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gridstream.errors import StoreError
from gridstream.stores.cassandra._driver import row_values
from gridstream.stores.cassandra.columns import VERSION_COLUMN, Column, column_name
from gridstream.stores.cassandra.flatten import TypeLayout
from gridstream.stores.cassandra.naming import (
    index_name,
    qualified_table,
    quote_identifier,
    validate_keyspace,
)

__all__ = ["SAI_TYPES", "CassandraSchema", "SchemaCounters", "TableState"]

log = logging.getLogger(__name__)

SAI_TYPES = frozenset(
    {"text", "bigint", "double", "boolean", "timestamp", "date", "decimal", "uuid"}
)
"""Column types a storage-attached index can cover (not blob)."""
_SAI_NAME = re.compile(r"[A-Za-z0-9_]+")
"""SAI refuses other column names (``address.city``): those get a legacy index."""

_COLUMNS_QUERY = (
    "SELECT column_name, type, kind FROM system_schema.columns "
    "WHERE keyspace_name = %s AND table_name = %s"
)
_INDEXES_QUERY = (
    "SELECT index_name, options FROM system_schema.indexes "
    "WHERE keyspace_name = %s AND table_name = %s"
)


@dataclass
class TableState:
    """What is known of one table: its key and every column's CQL type."""

    name: str
    id_column: str
    id_type: str
    columns: dict[str, str]
    indexed: set[str] = field(default_factory=set)
    pending_indexes: set[str] = field(default_factory=set)
    layouts: set[TypeLayout] = field(default_factory=set)
    """Layouts (type descriptors) already checked against this table."""

    def key(self, entity_id: Any) -> Any:
        """The partition key value of ``entity_id`` for this table's key type."""
        try:
            if self.id_type == "bigint" and not isinstance(entity_id, bool):
                return int(entity_id)
            if self.id_type == "text":
                return str(entity_id)
            if self.id_type == "uuid":
                return entity_id if isinstance(entity_id, uuid.UUID) else uuid.UUID(str(entity_id))
        except (TypeError, ValueError) as exc:
            raise StoreError(f"id {entity_id!r} does not fit the {self.id_type} key") from exc
        raise StoreError(f"id {entity_id!r} does not fit the {self.id_type} key of {self.name}")


@dataclass
class SchemaCounters:
    """Schema changes made by this process."""

    tables_created: int = 0
    columns_added: int = 0
    indexes_created: int = 0
    indexes_skipped: int = 0


class CassandraSchema:
    """Creates and evolves the keyspace's tables; caches what it has seen.

    Not thread-safe: one instance per writer thread (DDL is rare and synchronous).
    """

    def __init__(self, session: Any, keyspace: str, *, replication_factor: int = 1) -> None:
        self.session = session
        self.keyspace = validate_keyspace(keyspace)
        self.replication_factor = replication_factor
        self.counters = SchemaCounters()
        self._tables: dict[str, TableState] = {}

    def ensure_keyspace(self) -> None:
        """Create the keyspace (SimpleStrategy) if it does not exist."""
        self._ddl(
            f"CREATE KEYSPACE IF NOT EXISTS {quote_identifier(self.keyspace)} WITH replication = "
            f"{{'class': 'SimpleStrategy', 'replication_factor': {int(self.replication_factor)}}}"
        )

    def forget(self) -> None:
        """Drop every cached table state; they are read again on next use."""
        self._tables.clear()

    def ensure_table(
        self, table: str, layout: TypeLayout, id_type: str, indexes: Sequence[str] = ()
    ) -> TableState:
        """The table of ``layout``, created or completed as needed (cached)."""
        state = self._tables.get(table)
        if state is not None and layout in state.layouts:
            return state
        if state is None:
            state = self.load(table)
        if state is None:
            self._create(table, layout, id_type)
            state = self.load(table)
            if state is None:
                raise StoreError(f"table {table!r} is missing right after its creation")
        self._check_key(state, layout, id_type)
        self.ensure_columns(state, list(layout.columns.values()))
        self._declare_indexes(state, layout, indexes)
        state.layouts.add(layout)
        self._tables[table] = state
        return state

    def load(self, table: str) -> TableState | None:
        """Read the table's columns from ``system_schema`` (``None`` if it has none)."""
        names = ("column_name", "type", "kind")
        rows = [row_values(r, names) for r in self._query(_COLUMNS_QUERY, (self.keyspace, table))]
        columns = {str(r[0]): str(r[1]) for r in rows}
        if not columns:
            return None
        keys = [(str(r[0]), str(r[1])) for r in rows if str(r[2]) == "partition_key"]
        if len(keys) != 1:
            raise StoreError(f"table {table!r} does not have a single-column partition key")
        state = TableState(table, keys[0][0], keys[0][1], columns)
        state.indexed = self._indexed_columns(table)
        return state

    def refresh(self, state: TableState) -> None:
        """Re-read the table's columns (another writer may have added some)."""
        fresh = self.load(state.name)
        if fresh is not None:
            state.columns = fresh.columns
            state.indexed = fresh.indexed

    def ensure_columns(self, state: TableState, columns: Iterable[Column]) -> None:
        """Add the columns the table lacks; a column of another type is an error."""
        missing = self._missing(state, columns)
        if not missing:
            return
        added = ", ".join(f"{quote_identifier(c.name)} {c.cql_type}" for c in missing)
        try:
            self._ddl(f"ALTER TABLE {qualified_table(self.keyspace, state.name)} ADD ({added})")
        except StoreError:
            self.refresh(state)
            if self._missing(state, missing):
                raise
        else:
            self.counters.columns_added += len(missing)
            self.refresh(state)
        self._create_pending_indexes(state)

    def _missing(self, state: TableState, columns: Iterable[Column]) -> list[Column]:
        missing: dict[str, Column] = {}
        for col in columns:
            existing = state.columns.get(col.name)
            if existing is None:
                missing[col.name] = col
            elif existing != col.cql_type:
                raise StoreError(
                    f"column {col.name!r} of table {state.name!r} is {existing}, "
                    f"but the mapping needs {col.cql_type}: the type's property changed kind"
                )
        return list(missing.values())

    def _create(self, table: str, layout: TypeLayout, id_type: str) -> None:
        columns = [f"{quote_identifier(layout.id_column)} {id_type} PRIMARY KEY"]
        columns.append(f"{quote_identifier(VERSION_COLUMN)} bigint")
        columns += [f"{quote_identifier(c.name)} {c.cql_type}" for c in layout.columns.values()]
        self._ddl(
            f"CREATE TABLE IF NOT EXISTS {qualified_table(self.keyspace, table)} "
            f"({', '.join(columns)})"
        )
        self.counters.tables_created += 1
        log.info("created table %s.%s for type %s", self.keyspace, table, layout.type_name)

    def _check_key(self, state: TableState, layout: TypeLayout, id_type: str) -> None:
        if (state.id_column, state.id_type) != (layout.id_column, id_type):
            raise StoreError(
                f"table {state.name!r} is keyed by {state.id_column!r} {state.id_type}, but "
                f"type {layout.type_name!r} needs {layout.id_column!r} {id_type}"
            )
        version_type = state.columns.get(VERSION_COLUMN)
        if version_type not in (None, "bigint"):
            raise StoreError(
                f"table {state.name!r} has a {VERSION_COLUMN!r} of type {version_type}"
            )

    def _declare_indexes(
        self, state: TableState, layout: TypeLayout, indexes: Sequence[str]
    ) -> None:
        for path in indexes:
            if path == layout.id_property:
                continue
            if path in layout.fields and layout.fields[path].is_object:
                log.warning("index on %s.%s skipped: it is a flattened object", state.name, path)
                self.counters.indexes_skipped += 1
                continue
            top_level = column_name((path,))
            state.pending_indexes.add(
                top_level if top_level in layout.columns else column_name(tuple(path.split(".")))
            )
        self._create_pending_indexes(state)

    def _create_pending_indexes(self, state: TableState) -> None:
        for col in sorted(state.pending_indexes):
            cql_type = state.columns.get(col)
            if cql_type is None:
                continue
            state.pending_indexes.discard(col)
            if col in state.indexed:
                continue
            sai = cql_type in SAI_TYPES and _SAI_NAME.fullmatch(col) is not None
            self._ddl(
                f"CREATE INDEX IF NOT EXISTS {quote_identifier(index_name(state.name, col))} "
                f"ON {qualified_table(self.keyspace, state.name)} ({quote_identifier(col)})"
                + (" USING 'sai'" if sai else "")
            )
            state.indexed.add(col)
            self.counters.indexes_created += 1

    def _indexed_columns(self, table: str) -> set[str]:
        indexed: set[str] = set()
        for row in self._query(_INDEXES_QUERY, (self.keyspace, table)):
            options = row_values(row, ("index_name", "options"))[1]
            target = str(dict(options or {}).get("target", ""))
            if len(target) >= 2 and target.startswith('"') and target.endswith('"'):
                target = target[1:-1].replace('""', '"')
            indexed.add(target)
        return indexed

    def _query(self, cql: str, params: tuple[Any, ...]) -> list[Any]:
        try:
            return list(self.session.execute(cql, params))
        except Exception as exc:
            raise StoreError(f"reading the schema of keyspace {self.keyspace!r} failed") from exc

    def _ddl(self, cql: str) -> None:
        try:
            self.session.execute(cql)
        except Exception as exc:
            raise StoreError(f"schema change failed: {cql}") from exc
