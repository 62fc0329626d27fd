"""The keyspace's type → table records (``gs_tables``), so distinct types never share a
table and a restarted writer or reader maps each type to the same table.

``gs_tables`` is keyed by table name: a claim is one lightweight transaction
(``INSERT ... IF NOT EXISTS``), so of two writers claiming one table for two types one
loses and allocates again (see ``gridstream.stores.naming``). Table names are compared
exactly: every name is quoted in CQL, so ``shop_Order`` and ``shop_order`` are two tables.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gridstream.errors import StoreError
from gridstream.stores.cassandra._driver import row_values
from gridstream.stores.cassandra.naming import (
    MAX_NAME_LENGTH,
    qualified_table,
    validate_keyspace,
)
from gridstream.stores.naming import TableNames, TableNameTakenError

__all__ = ["REGISTRY_TABLE", "CassandraTableRegistry", "cassandra_table_names"]

REGISTRY_TABLE = "gs_tables"
"""The table of the records; no type is given this name."""
_COLUMNS = {"table_name": "text", "type_name": "text"}
_COLUMNS_QUERY = (
    "SELECT column_name, type FROM system_schema.columns "
    "WHERE keyspace_name = %s AND table_name = %s"
)


class CassandraTableRegistry:
    """``gs_tables`` of one keyspace. ``create``: create the table when missing (writers);
    otherwise a missing table means no records (readers never change the schema)."""

    def __init__(self, session: Any, keyspace: str, *, create: bool) -> None:
        self.session = session
        self.keyspace = validate_keyspace(keyspace)
        self.create = create
        self._ready = False

    @property
    def _table(self) -> str:
        return qualified_table(self.keyspace, REGISTRY_TABLE)

    def _exists(self) -> bool:
        if self._ready:
            return True
        found = {
            str(name): str(kind)
            for name, kind in (
                row_values(r, ("column_name", "type"))
                for r in self._run(_COLUMNS_QUERY, (self.keyspace, REGISTRY_TABLE))
            )
        }
        if not found and self.create:
            self._run(
                f"CREATE TABLE IF NOT EXISTS {self._table} "
                "(table_name text PRIMARY KEY, type_name text)"
            )
            return self._exists()
        if found and found != _COLUMNS:
            raise StoreError(
                f"table {self.keyspace}.{REGISTRY_TABLE} is not gridstream's table-name "
                f"registry (columns {sorted(found)})"
            )
        self._ready = bool(found)
        return self._ready

    def load(self) -> dict[str, str]:
        if not self._exists():
            return {}
        rows = self._run(f"SELECT table_name, type_name FROM {self._table}")
        return {
            str(type_name): str(table)
            for table, type_name in (row_values(r, ("table_name", "type_name")) for r in rows)
        }

    def record(self, type_name: str, table: str) -> str:
        if not self._exists():
            raise StoreError(f"keyspace {self.keyspace!r} has no {REGISTRY_TABLE} table")
        cql = f"INSERT INTO {self._table} (table_name, type_name) VALUES (%s, %s) IF NOT EXISTS"
        try:
            result = self.session.execute(cql, (table, type_name))
            applied = bool(result.was_applied)
            row = result.one()
        except Exception as exc:
            raise StoreError(
                f"table-name registry of keyspace {self.keyspace!r}: claiming {table!r} failed"
            ) from exc
        if applied:
            return table
        names = result.column_names
        values = row if isinstance(row, Mapping) else dict(zip(names, row, strict=True))
        owner = str(values["type_name"])
        if owner == type_name:
            return table
        raise TableNameTakenError(
            f"table {self.keyspace}.{table} already holds type {owner!r}, "
            f"not {type_name!r}", table=table, owner=owner,
        )

    def _run(self, cql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        try:
            return list(self.session.execute(cql, params))
        except Exception as exc:
            raise StoreError(f"table-name registry of keyspace {self.keyspace!r}: {cql}") from exc


def cassandra_table_names(
    session: Any, keyspace: str, convert: Callable[[str], str], *, create: bool
) -> TableNames:
    """The ``TableNames`` of a keyspace with the store's rules (exact names, 48 chars)."""
    return TableNames(
        CassandraTableRegistry(session, keyspace, create=create),
        convert,
        max_length=MAX_NAME_LENGTH,
        case_sensitive=True,
        reserved=(REGISTRY_TABLE,),
    )
