"""Prepared statements of the writer, cached per (table, kind, column set)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from gridstream.errors import StoreError
from gridstream.stores.cassandra.columns import VERSION_COLUMN
from gridstream.stores.cassandra.naming import qualified_table, quote_identifier

__all__ = ["StatementCache"]


def _cql(table: str, kind: str, id_column: str, names: tuple[str, ...]) -> str:
    key = quote_identifier(id_column)
    if kind == "delete":
        return f"DELETE FROM {table} USING TIMESTAMP ? WHERE {key} = ?"
    if kind == "replace-json":
        return f"INSERT INTO {table} JSON ? DEFAULT NULL USING TIMESTAMP ?"
    if kind == "read":
        (column,) = names
        quoted = quote_identifier(column)
        return f"SELECT {quoted}, WRITETIME({quoted}) FROM {table} WHERE {key} = ?"
    columns = ", ".join([key, quote_identifier(VERSION_COLUMN), *map(quote_identifier, names)])
    markers = ", ".join("?" * (len(names) + 2))
    return f"INSERT INTO {table} ({columns}) VALUES ({markers}) USING TIMESTAMP ?"


class StatementCache:
    """Prepares each statement once (LRU-bounded) and binds values to it.

    Statements are marked idempotent (every write carries its own timestamp), so the
    driver may retry them safely.
    """

    def __init__(
        self, session: Any, keyspace: str, consistency_level: int | None, size: int = 1024
    ) -> None:
        self.session = session
        self.keyspace = keyspace
        self.consistency_level = consistency_level
        self.size = size
        self._prepared: OrderedDict[tuple[str, str, tuple[str, ...]], Any] = OrderedDict()

    def __len__(self) -> int:
        return len(self._prepared)

    def bind(
        self,
        table: str,
        id_column: str,
        kind: str,
        names: tuple[str, ...],
        params: tuple[Any, ...],
    ) -> Any:
        """A bound statement; values that do not fit their columns are a ``StoreError``."""
        prepared = self._statement(table, id_column, kind, names)
        try:
            return prepared.bind(params)
        except Exception as exc:
            raise StoreError(f"values for {table} ({', '.join(names)}) do not fit: {exc}") from exc

    def _statement(self, table: str, id_column: str, kind: str, names: tuple[str, ...]) -> Any:
        key = (table, kind, names)
        prepared = self._prepared.get(key)
        if prepared is not None:
            self._prepared.move_to_end(key)
            return prepared
        cql = _cql(qualified_table(self.keyspace, table), kind, id_column, names)
        try:
            prepared = self.session.prepare(cql)
        except Exception as exc:
            raise StoreError(f"preparing {cql!r} failed") from exc
        prepared.is_idempotent = True
        if self.consistency_level is not None:
            prepared.consistency_level = self.consistency_level
        self._prepared[key] = prepared
        if len(self._prepared) > self.size:
            self._prepared.popitem(last=False)
        return prepared
