"""The SQL store's type → table records, kept in ``gs_tables`` (see ``_schema``)."""

from __future__ import annotations

from collections.abc import Mapping

import sqlalchemy as sa

from gridstream.errors import StoreError
from gridstream.stores.naming import TableNameTakenError

__all__ = ["SqlTableRegistry"]


class SqlTableRegistry:
    """``TableRegistry`` over ``gs_tables``, read and written on the connection of the
    transaction in progress (``conn``), so a record is kept only if that transaction
    commits."""

    def __init__(self, table: sa.Table) -> None:
        self.table = table
        self.conn: sa.Connection | None = None

    def _connection(self) -> sa.Connection:
        if self.conn is None:
            raise StoreError("the table registry is used outside a transaction")
        return self.conn

    def load(self) -> Mapping[str, str]:
        t = self.table
        if not sa.inspect(self._connection()).has_table(t.name):
            return {}
        rows = self._connection().execute(sa.select(t.c.type_name, t.c.table_name))
        return {str(r[0]): str(r[1]) for r in rows}

    def record(self, type_name: str, table: str) -> str:
        conn = self._connection()
        t = self.table
        for _ in range(2):
            mine = conn.execute(sa.select(t.c.table_name).where(t.c.type_name == type_name))
            found = mine.scalar_one_or_none()
            if found is not None:
                return str(found)
            # the column compares as the store compares identifiers (NOCASE on SQLite)
            owner = conn.execute(sa.select(t.c.type_name).where(t.c.table_name == table))
            other = owner.scalar_one_or_none()
            if other is not None:
                raise TableNameTakenError(
                    f"table {table!r} belongs to type {other!r}", table=table, owner=str(other))
            try:
                with conn.begin_nested():  # a lost race must not abort the batch
                    conn.execute(sa.insert(t).values(type_name=type_name, table_name=table))
            except sa.exc.IntegrityError:
                continue  # another writer recorded it first: look again
            return table
        raise StoreError(f"could not record table {table!r} for type {type_name!r}")
