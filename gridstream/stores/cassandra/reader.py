"""Reading a type's rows back into entries (the initial load of a space).

The reader uses the same ``CassandraMapping`` as the writers: fixed columns decode by
their declared kind, other columns are dynamic and decode with their type tags, and the
flattened columns are nested again. Round trip: what a WRITE stored reads back equal to
the entry's data in the canonical form described in ``flatten``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gridstream.errors import StoreError
from gridstream.operations import EntityId, TypeDescriptor
from gridstream.stores.cassandra._driver import require_driver, row_values
from gridstream.stores.cassandra.columns import VERSION_COLUMN, Encoding
from gridstream.stores.cassandra.flatten import TypeLayout
from gridstream.stores.cassandra.mapping import CassandraMapping
from gridstream.stores.cassandra.naming import qualified_table, quote_identifier
from gridstream.stores.cassandra.schema import CassandraSchema, TableState
from gridstream.stores.cassandra.tables import cassandra_table_names

__all__ = ["CassandraReader", "EntryWriter", "StoredEntry"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """One row read back: the entry's id, the version of its last write, its data
    (nested, including the id property)."""

    type_name: str
    id: EntityId | Any
    version: int | None
    data: dict[str, Any]


class EntryWriter(Protocol):
    """Anything with a ``write`` method, such as a space."""

    def write(self, entry: Any, /) -> Any: ...


class CassandraReader:
    """Reads rows of a type from one keyspace, ``fetch_size`` rows per page."""

    def __init__(
        self,
        session: Any,
        keyspace: str,
        mapping: CassandraMapping | None = None,
        *,
        fetch_size: int = 1000,
        consistency_level: int | None = None,
    ) -> None:
        require_driver()
        self.session = session
        self.keyspace = keyspace
        self.mapping = mapping or CassandraMapping()
        self.fetch_size = fetch_size
        self.consistency_level = consistency_level
        self._schema = CassandraSchema(session, keyspace)
        self.tables = cassandra_table_names(
            session, keyspace, self.mapping.seed_table_name, create=False
        )

    def read(self, descriptor: TypeDescriptor) -> Iterator[StoredEntry]:
        """Every stored entry of ``descriptor``'s type (none if it has no table)."""
        table = self.tables.lookup(descriptor.name)
        state = self._schema.load(table)
        if state is None:
            log.info("no table %s.%s for type %s", self.keyspace, table, descriptor.name)
            return
        layout = self.mapping.layout(descriptor)
        rows = self._select(f"SELECT * FROM {qualified_table(self.keyspace, table)}", ())
        yield from self._entries(rows, layout, state)

    def get(self, descriptor: TypeDescriptor, entity_id: EntityId) -> StoredEntry | None:
        """The stored entry with ``entity_id``, or ``None``."""
        table = self.tables.lookup(descriptor.name)
        state = self._schema.load(table)
        if state is None:
            return None
        layout = self.mapping.layout(descriptor)
        key = state.key(entity_id)
        cql = (
            f"SELECT * FROM {qualified_table(self.keyspace, table)} "
            f"WHERE {quote_identifier(state.id_column)} = %s"
        )
        return next(self._entries(self._select(cql, (key,)), layout, state), None)

    def load_into(
        self,
        target: EntryWriter | Callable[[Any], Any],
        descriptor: TypeDescriptor,
        *,
        to_entry: Callable[[StoredEntry], Any] | None = None,
    ) -> int:
        """Write every stored entry of the type into ``target`` (a ``write`` method or a
        callable), converted by ``to_entry`` (default: the ``StoredEntry`` itself).
        Returns how many entries were written."""
        write = target.write if hasattr(target, "write") else target
        if not callable(write):
            raise StoreError("load_into needs a callable or an object with a write method")
        count = 0
        for stored in self.read(descriptor):
            write(to_entry(stored) if to_entry is not None else stored)
            count += 1
        return count

    def _select(self, cql: str, params: tuple[Any, ...]) -> Any:
        from cassandra.query import SimpleStatement

        statement = SimpleStatement(cql, fetch_size=self.fetch_size)
        if self.consistency_level is not None:
            statement.consistency_level = self.consistency_level
        try:
            return self.session.execute(statement, params)
        except Exception as exc:
            raise StoreError(f"reading {cql!r} failed") from exc

    def _entries(self, rows: Any, layout: TypeLayout, state: TableState) -> Iterator[StoredEntry]:
        names: Sequence[str] = list(rows.column_names)
        try:
            for row in rows:
                values = dict(zip(names, row_values(row, names), strict=True))
                yield self._entry(values, layout, state)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"reading table {state.name!r} failed") from exc

    def _entry(self, row: Mapping[str, Any], layout: TypeLayout, state: TableState) -> StoredEntry:
        key = row[layout.id_column]
        decoded = {
            name: self._decode(layout, state, name, value)
            for name, value in row.items()
            if name not in (layout.id_column, VERSION_COLUMN)
        }
        data = layout.unflatten(decoded)
        data[layout.id_property] = key
        version = row.get(VERSION_COLUMN)
        return StoredEntry(layout.type_name, key, None if version is None else int(version), data)

    def _decode(self, layout: TypeLayout, state: TableState, name: str, value: Any) -> Any:
        column = layout.column(name)
        if column.encoding is Encoding.DYNAMIC and state.columns.get(name, "blob") != "blob":
            return value  # a native column the type no longer declares: its value as stored
        return self.mapping.decode(column, value)
