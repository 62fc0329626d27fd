"""Store decoded operations in a SQL database: one table per type, idempotent by version.

Each row carries the entry's ``_version`` (the space-wide sequence number); every write
is guarded by ``WHERE _version < new``, so replays and redeliveries change nothing.
Deletes leave a tombstone row (``_deleted`` set, version kept) so a late replay of an
older write cannot resurrect the entry. SQLite (``sqlite:///path``) is built in;
PostgreSQL (``postgresql://...``) needs ``pip install 'gridstream[postgres]'``.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from gridstream.consumer import OperationConsumer, OperationRecord
from gridstream.errors import ConfigError, StoreError
from gridstream.operations import OpType, TypeDescriptor
from gridstream.protocol import Envelope
from gridstream.protocol.values import restore, wire_default

__all__ = ["SqlOperationStore", "run_sql_consumer", "table_name"]

_META = ("_id", "_version", "_deleted", "_op", "_ts")
_NATIVE_KINDS = frozenset({"str", "int", "float", "bool", "bytes"})
_TYPES = {
    "sqlite": {"str": "TEXT", "int": "INTEGER", "float": "REAL", "bool": "INTEGER",
               "bytes": "BLOB", "text": "TEXT"},
    "postgresql": {"str": "TEXT", "int": "BIGINT", "float": "DOUBLE PRECISION",
                   "bool": "BOOLEAN", "bytes": "BYTEA", "text": "TEXT"},
}


def table_name(type_name: str, prefix: str = "gs_") -> str:
    """A portable table name: lower case, ``[a-z0-9_]``, at most 63 characters."""
    name = prefix + re.sub(r"[^a-z0-9_]", "_", type_name.lower())
    if len(name) > 63:
        digest = hashlib.md5(type_name.encode(), usedforsecurity=False).hexdigest()[:6]
        name = f"{name[:56]}_{digest}"
    return name


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _infer_kind(value: Any) -> str:
    for kind, cls in (("bool", bool), ("int", int), ("float", float), ("str", str),
                      ("bytes", bytes)):
        if isinstance(value, cls):
            return kind
    return "any"


class SqlOperationStore:
    """Applies operations to ``url`` (see the module docstring); thread-confined."""

    def __init__(self, url: str = "sqlite:///gridstream.db", *,
                 types: Mapping[str, TypeDescriptor] | None = None,
                 table_prefix: str = "gs_") -> None:
        self.types = dict(types or {})
        self.prefix = table_prefix
        self.dialect, self._conn = _connect(url)
        self._mark = "?" if self.dialect == "sqlite" else "%s"
        self._columns: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self._conn.close()

    # schema ----------------------------------------------------------------------------

    def _table(self, type_name: str, data: Mapping[str, Any] | None) -> tuple[str, dict[str, str]]:
        """The table of a type, created or widened so that it has a column per key."""
        table = table_name(type_name, self.prefix)
        columns = self._columns.get(table)
        if columns is None:
            columns = self._create(table, self.types.get(type_name))
        missing = [k for k in (data or {}) if k not in columns]
        for key in missing:
            kind = _infer_kind(data[key]) if data is not None else "any"
            self._execute(f"ALTER TABLE {_quote(table)} ADD COLUMN {_quote(key)} "
                          f"{self._sql_type(kind)}", ())
            columns[key] = kind
        return table, columns

    def _sql_type(self, kind: str) -> str:
        return _TYPES[self.dialect]["text" if kind not in _NATIVE_KINDS else kind]

    def _create(self, table: str, descriptor: TypeDescriptor | None) -> dict[str, str]:
        columns = {s.name: s.kind for s in descriptor.fixed} if descriptor else {}
        columns = {k: v for k, v in columns.items() if k not in _META}
        defs = [f"{_quote(k)} {self._sql_type(v)}" for k, v in columns.items()]
        boolean = self._sql_type("bool")
        self._execute(
            f"CREATE TABLE IF NOT EXISTS {_quote(table)} (_id TEXT PRIMARY KEY, "
            f"_version BIGINT NOT NULL, _deleted {boolean} NOT NULL, _op TEXT NOT NULL, "
            f"_ts BIGINT NOT NULL{''.join(', ' + d for d in defs)})", ())
        existing = self._existing_columns(table)
        for name in existing:
            columns.setdefault(name, "any")
        self._columns[table] = {k: v for k, v in columns.items() if k not in _META}
        return self._columns[table]

    def _existing_columns(self, table: str) -> list[str]:
        if self.dialect == "sqlite":
            rows = self._execute(f"PRAGMA table_info({_quote(table)})", ()).fetchall()
            return [str(r[1]) for r in rows]
        rows = self._execute("SELECT column_name FROM information_schema.columns WHERE "
                             f"table_name = {self._mark}", (table,)).fetchall()
        return [str(r[0]) for r in rows]

    # writes ----------------------------------------------------------------------------

    def apply(self, items: Iterable[Envelope | OperationRecord]) -> int:
        """Apply operations in one database transaction; the rows changed."""
        changed = 0
        with self._lock:
            try:
                for item in items:
                    envelope = item.envelope if isinstance(item, OperationRecord) else item
                    changed += self._apply_one(envelope)
                self._conn.commit()
            except Exception as exc:
                self._conn.rollback()
                if isinstance(exc, StoreError):
                    raise
                raise StoreError(f"sql apply failed: {type(exc).__name__}: {exc}") from exc
        return changed

    def _apply_one(self, env: Envelope) -> int:
        descriptor = self.types.get(env.type)
        data = dict(env.data or {})
        if descriptor is not None and data:
            data = restore(data, descriptor.fixed)
        if env.op is OpType.PARTIAL_UPDATE:
            data = {k: v for k, v in data.items() if v is not None}
        if env.op is OpType.CHANGE:
            data.update({name: None for name in env.removed})
        table, columns = self._table(env.type, None if env.op.is_delete else data)
        if env.op.is_delete:
            values = dict.fromkeys(columns)
            deleted = True
        elif env.op.is_partial:
            values, deleted = data, False
        else:
            values = {name: data.get(name) for name in columns}
            deleted = False
        return self._upsert(table, columns, env, values, deleted,
                            touch_deleted=not env.op.is_partial)

    def _upsert(self, table: str, columns: Mapping[str, str], env: Envelope,
                values: Mapping[str, Any], deleted: bool, touch_deleted: bool) -> int:
        names = list(values)
        meta = [str(env.id), env.version, self._bool(deleted), env.op.value, env.ts]
        params = meta + [self._param(values[n], columns.get(n, "any")) for n in names]
        cols = ", ".join(_quote(c) for c in (*_META, *names))
        marks = ", ".join([self._mark] * len(params))
        updated = ["_version", "_op", "_ts", *(["_deleted"] if touch_deleted else []), *names]
        sets = ", ".join(f"{_quote(c)} = excluded.{_quote(c)}" for c in updated)
        sql = (f"INSERT INTO {_quote(table)} ({cols}) VALUES ({marks}) ON CONFLICT (_id) DO "
               f"UPDATE SET {sets} WHERE {_quote(table)}._version < excluded._version")
        return int(max(self._execute(sql, params).rowcount, 0))

    def _bool(self, value: bool) -> Any:
        return int(value) if self.dialect == "sqlite" else value

    def _param(self, value: Any, kind: str) -> Any:
        if value is None:
            return None
        if kind == "bool" and isinstance(value, bool):
            return self._bool(value)
        container = isinstance(value, dict | list | set | frozenset | tuple)
        if kind in _NATIVE_KINDS and not container:
            return value
        if not container and not isinstance(value, int | float | bool):
            scalar = value if isinstance(value, str) else wire_default(value)
            if isinstance(scalar, str):
                return scalar  # ISO dates, decimals and UUIDs as plain text
        return orjson.dumps(value, default=wire_default, option=orjson.OPT_NON_STR_KEYS
                            ).decode()

    def _execute(self, sql: str, params: Sequence[Any]) -> Any:
        cursor = self._conn.cursor()
        cursor.execute(sql, tuple(params))
        return cursor

    # reads -----------------------------------------------------------------------------

    def get(self, type_name: str, entity_id: Any, *, include_deleted: bool = False
            ) -> dict[str, Any] | None:
        """The stored row of an entry (``None`` if absent, or deleted unless asked)."""
        table = table_name(type_name, self.prefix)
        if table not in self._columns:
            self._create(table, self.types.get(type_name))
        with self._lock:
            cursor = self._execute(f"SELECT * FROM {_quote(table)} WHERE _id = {self._mark}",
                                   (str(entity_id),))
            row = cursor.fetchone()
            names = [d[0] for d in cursor.description]
            self._conn.commit()
        if row is None:
            return None
        record = dict(zip(names, row, strict=True))
        if record["_deleted"] and not include_deleted:
            return None
        return record

    def purge_tombstones(self, type_name: str, below_version: int) -> int:
        """Forget deletes older than ``below_version`` (once replays cannot reach them)."""
        table = table_name(type_name, self.prefix)
        with self._lock:
            cursor = self._execute(f"DELETE FROM {_quote(table)} WHERE _deleted = "
                                   f"{self._mark} AND _version < {self._mark}",
                                   (self._bool(True), below_version))
            self._conn.commit()
        return int(max(cursor.rowcount, 0))


def _connect(url: str) -> tuple[str, Any]:
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://").removeprefix("/") or ":memory:"
        return "sqlite", sqlite3.connect(path, check_same_thread=False)
    if url.startswith(("postgresql://", "postgres://")):
        try:
            import psycopg
        except ImportError as exc:
            raise ConfigError("PostgreSQL needs: pip install 'gridstream[postgres]'") from exc
        try:
            return "postgresql", psycopg.connect(url)
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to PostgreSQL: {type(exc).__name__}") from exc
    raise ConfigError("database url must start with sqlite:// or postgresql://")


def run_sql_consumer(consumer: OperationConsumer, store: SqlOperationStore, *,
                     max_records: int = 1000, idle_timeout_s: float | None = None,
                     stop: threading.Event | None = None) -> int:
    """Consume → store (one DB commit per poll) → commit offsets; the operations applied.

    Offsets are committed only after the database commit, so a crash replays the last
    poll, which the version guard makes harmless."""
    total, idle = 0, 0.0
    while stop is None or not stop.is_set():
        records = consumer.consume(max_records, timeout_s=0.5)
        if not records:
            idle += 0.5
            if idle_timeout_s is not None and idle >= idle_timeout_s:
                break
            consumer.commit()  # skipped and tombstone records still advance
            continue
        idle = 0.0
        store.apply(records)
        consumer.commit()
        total += len(records)
    return total
