"""Kafka → SQL (SQLite file or PostgreSQL): one table per type, upserts guarded by version.

Table ``<prefix><type>`` (name from the shared table-name converter)::

    id TEXT PRIMARY KEY, version BIGINT, deleted BOOLEAN, op TEXT, ts BIGINT, data JSON

Each batch runs in one database transaction on the driver: the batch's entities are
read, their operations folded in version order (see ``gridstream.fold``), and the new states
written with ``INSERT ... ON CONFLICT (id) DO UPDATE ... WHERE version < excluded.version``.
A delete keeps its row as a tombstone (``deleted`` true, ``data`` null, the delete's
version), so a late replay of an older write is rejected by the guard instead of
resurrecting the entity. A re-run batch finds every operation stale and changes nothing.
Live rows: ``SELECT ... WHERE NOT deleted``.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import SecretStr

from gridstream.errors import ConfigError, StoreError
from gridstream.fold import EntityState, OpRow, fold
from gridstream.spark.sinks.base import BatchSink, SinkResult
from gridstream.spark.types import TypeRegistry
from gridstream.stores.cassandra.naming import DefaultTableNameConverter

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["SqlDialect", "SqlSink", "connect_sql", "dialect_of"]

_CHUNK = 500


@dataclass(frozen=True)
class SqlDialect:
    """What differs between the supported databases."""

    name: str
    marker: str
    bool_type: str
    json_type: str
    json_param: str
    json_select: str


SQLITE = SqlDialect("sqlite", "?", "INTEGER", "TEXT", "?", "data")
POSTGRES = SqlDialect("postgresql", "%s", "BOOLEAN", "JSONB", "%s::jsonb", "data::text")


def dialect_of(url: str) -> SqlDialect:
    """The dialect of a database URL (``sqlite:///file.db``, ``postgresql://...``)."""
    scheme = urlsplit(url).scheme.split("+", 1)[0]
    if scheme == "sqlite":
        return SQLITE
    if scheme in ("postgresql", "postgres"):
        return POSTGRES
    raise ConfigError(f"unsupported SQL URL scheme {scheme!r}: use sqlite:/// or postgresql://")


def sqlite_path(url: str) -> str:
    """The file of a ``sqlite:///relative`` or ``sqlite:////absolute`` URL."""
    path = url.split("://", 1)[1]
    return path[1:] if path.startswith("/") else path


def connect_sql(url: str) -> Any:
    """A DB-API connection for ``url`` (autocommit off)."""
    dialect = dialect_of(url)
    if dialect is SQLITE:
        path = sqlite_path(url)
        try:
            return sqlite3.connect(path or ":memory:", timeout=30, isolation_level="DEFERRED",
                                   check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {path!r}") from exc
    try:
        import psycopg
    except ImportError as exc:
        raise ConfigError("the PostgreSQL sink needs psycopg: pip install 'gridstream[postgres]'") \
            from exc
    try:
        return psycopg.connect(url)
    except psycopg.Error as exc:
        raise StoreError(f"cannot connect to PostgreSQL at {urlsplit(url).hostname}") from exc


class SqlSink(BatchSink):
    """Applies each batch to a SQL database (see the module docstring)."""

    kind = "sql"

    def __init__(self, url: str | SecretStr, types: TypeRegistry, *, table_prefix: str = "",
                 create_tables: bool = True) -> None:
        self._url = url if isinstance(url, SecretStr) else SecretStr(url)
        self.dialect = dialect_of(self._url.get_secret_value())
        self.types = types
        self.table_prefix = table_prefix
        self.create_tables = create_tables
        self._names = DefaultTableNameConverter()
        self._ready: set[str] = set()
        self._conn: Any = None

    def describe(self) -> str:
        url = self._url.get_secret_value()
        parts = urlsplit(url)
        where = sqlite_path(url) if self.dialect is SQLITE else f"{parts.hostname}{parts.path}"
        return f"sql {self.dialect.name} {where}"

    def table_name(self, type_name: str) -> str:
        """The table holding ``type_name``'s entities."""
        return self.table_prefix + self._names.to_table_name(type_name)

    def _connection(self) -> Any:
        if self._conn is None:
            self._conn = connect_sql(self._url.get_secret_value())
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def write(self, operations: DataFrame, batch_id: int) -> SinkResult:
        table = operations.select("type", "id", "version", "op", "ts", "data", "removed").toArrow()
        grouped = _group(table)
        applied = stale = 0
        with self._transaction() as cur:
            for type_name, entities in grouped.items():
                a, s = self._apply_type(cur, type_name, entities)
                applied, stale = applied + a, stale + s
        return SinkResult(operations=table.num_rows, applied=applied, stale=stale)

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        conn = self._connection()
        try:
            cur = conn.cursor()
            yield cur
            conn.commit()
        except Exception as exc:
            self._rollback()
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"SQL batch failed: {type(exc).__name__}: {exc}") from exc

    def _rollback(self) -> None:
        try:
            self._conn.rollback()
        except Exception:  # noqa: BLE001 - the connection is dropped and reopened below
            self.close()
        self._ready.clear()

    def _apply_type(self, cur: Any, type_name: str,
                    entities: dict[str, list[OpRow]]) -> tuple[int, int]:
        table = self.table_name(type_name)
        self._ensure_table(cur, table)
        fixed = self.types.declared_paths(type_name)
        bases = self._load(cur, table, list(entities))
        rows: list[tuple[Any, ...]] = []
        applied = stale = 0
        for entity_id, ops in entities.items():
            result = fold(bases.get(entity_id), ops, fixed)
            applied, stale = applied + result.applied, stale + result.stale
            state = result.state
            if state is not None:
                rows.append((entity_id, state.version, state.deleted, state.op, state.ts,
                             state.data))
        if rows:
            cur.executemany(self._upsert_sql(table), rows)
        return applied, stale

    def _ensure_table(self, cur: Any, table: str) -> None:
        if table in self._ready:
            return
        d = self.dialect
        if self.create_tables:
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {_quote(table)} (id TEXT PRIMARY KEY, "
                f"version BIGINT NOT NULL, deleted {d.bool_type} NOT NULL, op TEXT NOT NULL, "
                f"ts BIGINT NOT NULL, data {d.json_type})"
            )
        self._ready.add(table)

    def _load(self, cur: Any, table: str, ids: Sequence[str]) -> dict[str, EntityState]:
        d = self.dialect
        found: dict[str, EntityState] = {}
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start:start + _CHUNK]
            marks = ", ".join([d.marker] * len(chunk))
            cur.execute(
                f"SELECT id, version, deleted, op, ts, {d.json_select} FROM {_quote(table)} "
                f"WHERE id IN ({marks})", tuple(chunk),
            )
            for row in cur.fetchall():
                found[row[0]] = EntityState(int(row[1]), bool(row[2]), row[3], int(row[4]), row[5])
        return found

    def _upsert_sql(self, table: str) -> str:
        d = self.dialect
        t = _quote(table)
        marks = ", ".join([d.marker] * 5 + [d.json_param])
        return (
            f"INSERT INTO {t} (id, version, deleted, op, ts, data) VALUES ({marks}) "
            "ON CONFLICT (id) DO UPDATE SET version = excluded.version, "
            "deleted = excluded.deleted, op = excluded.op, ts = excluded.ts, "
            f"data = excluded.data WHERE {t}.version < excluded.version"
        )


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _group(table: Any) -> dict[str, dict[str, list[OpRow]]]:
    """Arrow table → type → id → operations."""
    cols = {name: table.column(name).to_pylist() for name in table.column_names}
    grouped: dict[str, dict[str, list[OpRow]]] = defaultdict(lambda: defaultdict(list))
    for i in range(table.num_rows):
        row = OpRow(cols["op"][i], int(cols["version"][i]), int(cols["ts"][i]), cols["data"][i],
                    tuple(cols["removed"][i] or ()))
        grouped[cols["type"][i]][cols["id"][i]].append(row)
    return grouped
