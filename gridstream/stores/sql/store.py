"""The SQL store: each type's current state in one table, idempotent by version.

Every batch (a consumer poll, a Spark micro-batch) is one database transaction: the
stored rows of the batch's entities are read, the batch's operations folded onto them
in version order (``gridstream.fold``, the space's own semantics for partial updates and
property paths), and the new states upserted with
``ON CONFLICT (id) DO UPDATE ... WHERE table.version < excluded.version``. A delete keeps
its row as a tombstone (``deleted`` true, ``data`` null, the delete's version), so a late
replay of an older write cannot resurrect the entity; ``purge_tombstones`` forgets
tombstones below a version once replays can no longer reach them. A replayed batch finds
every operation stale and changes nothing.

``data`` holds the entity's properties in the protocol's wire JSON form (what a WRITE's
envelope carries), so values keep their JSON type whatever earlier values were.
Type names map to tables through ``gridstream.stores.naming``; the records live in
``gs_tables``, so distinct types never share a table and the mapping survives restarts.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson
import sqlalchemy as sa
from pydantic import SecretStr, ValidationError
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from gridstream.errors import ConfigError, StoreError
from gridstream.fold import EntityState, OpRow, fold, op_row
from gridstream.operations import TypeDescriptor
from gridstream.protocol import Envelope
from gridstream.stores.cassandra.naming import DefaultTableNameConverter
from gridstream.stores.naming import TableNames
from gridstream.stores.sql._registry import SqlTableRegistry
from gridstream.stores.sql._schema import (
    COLUMNS,
    MAX_TABLE_NAME,
    REGISTRY_TABLE,
    create_engine,
    describe_url,
    registry_table,
    state_table,
)
from gridstream.stores.sql.config import SCOPE, SqlStoreConfig

__all__ = ["ApplyResult", "Batch", "SqlStore", "StoredRow", "group", "op_row"]

Batch = Mapping[str, Mapping[str, Sequence[OpRow]]]
"""A batch's operations: type name → entity id → operations (any order)."""

_CHUNK = 500
_DDL_LOCK = 0x6773_7461_626C_6573
"""The PostgreSQL advisory lock (transaction-scoped) that writers take before looking for
a table they may create: two writers starting at once would otherwise both miss it, and
the second's CREATE TABLE fail once the first commits."""
_SCOPE = SCOPE
"""Starts and ends the table prefix in a ``gs_tables`` key: a prefixed store records
``<SCOPE><prefix><SCOPE><type>``, an unprefixed one the plain type name. Every store of
a database allocates against all records, so no two share a table, and a type is
looked up only under its own store's prefix."""


@dataclass(frozen=True, slots=True)
class StoredRow:
    """One row of a type's table; ``data`` is ``None`` for a tombstone."""

    id: str
    version: int
    deleted: bool
    op: str
    ts: int
    data: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What one batch did: ``applied`` operations changed the store, ``stale`` ones were
    not newer than what it holds (replays)."""

    operations: int = 0
    applied: int = 0
    stale: int = 0


def group(envelopes: Iterable[Envelope]) -> dict[str, dict[str, list[OpRow]]]:
    """Envelopes → a ``Batch``."""
    grouped: dict[str, dict[str, list[OpRow]]] = defaultdict(lambda: defaultdict(list))
    for envelope in envelopes:
        grouped[envelope.type][str(envelope.id)].append(op_row(envelope))
    return grouped


class SqlStore:
    """A SQLite (``sqlite:///file.db``) or PostgreSQL (``postgresql://...``) store; see
    the module docstring. Its options are ``SqlStoreConfig``'s (a URL alone: the
    defaults of the rest). ``types`` gives each declared type's fixed properties (an
    unset one becomes null rather than disappearing). Connects on first use;
    thread-safe."""

    def __init__(self, config: SqlStoreConfig | str | SecretStr, *,
                 types: Mapping[str, TypeDescriptor] | None = None) -> None:
        if not isinstance(config, SqlStoreConfig):
            try:
                config = SqlStoreConfig.model_validate({"url": config})
            except ValidationError as exc:
                raise ConfigError(f"invalid SQL store: {exc}") from None
        self.config = config
        self._url = config.url
        self._engine = create_engine(self._url.get_secret_value())
        self.dialect = self._engine.dialect.name
        self.types = dict(types or {})
        self.table_prefix = config.table_prefix
        self.create_tables = config.create_tables
        self._metadata = sa.MetaData()
        self._registry = SqlTableRegistry(registry_table(self._metadata))
        self._converter = DefaultTableNameConverter()
        self._names = self._new_names()
        self._ready: set[str] = set()
        self._lock = threading.RLock()

    def _new_names(self) -> TableNames:
        return TableNames(self._registry, self._convert, max_length=MAX_TABLE_NAME,
                          case_sensitive=False, reserved=(REGISTRY_TABLE,))

    def _key(self, type_name: str) -> str:
        """The type's key in ``gs_tables`` (see ``_SCOPE``)."""
        if type_name.startswith(_SCOPE):
            raise StoreError(f"type name {type_name!r} starts with the character U+001F")
        if not self.table_prefix:
            return type_name
        return f"{_SCOPE}{self.table_prefix}{_SCOPE}{type_name}"

    def _type_of(self, key: str) -> str | None:
        """The type name of a ``gs_tables`` key of this store's prefix, else ``None``."""
        if not key.startswith(_SCOPE):
            return None if self.table_prefix else key
        prefix, _, type_name = key[1:].partition(_SCOPE)
        return type_name if prefix == self.table_prefix and self.table_prefix else None

    def _convert(self, key: str) -> str:
        type_name = key[1:].partition(_SCOPE)[2] if key.startswith(_SCOPE) else key
        return self.table_prefix + self._converter.to_table_name(type_name)

    def describe(self) -> str:
        """Where the store is (never the user or password)."""
        return describe_url(self._url.get_secret_value())

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # transactions ----------------------------------------------------------------------

    @contextmanager
    def _transaction(self, what: str) -> Iterator[sa.Connection]:
        """One database transaction; on any failure it is rolled back and every cache of
        database state (tables known to exist, type → table records) is dropped."""
        with self._lock:
            try:
                with self._engine.begin() as conn:
                    self._registry.conn = conn
                    yield conn
            except BaseException as exc:
                self._names = self._new_names()
                self._ready.clear()
                if isinstance(exc, sa.exc.SQLAlchemyError):
                    raise StoreError(f"{what} failed on {self.describe()}: "
                                     f"{_db_error(exc)}") from exc
                raise
            finally:
                self._registry.conn = None

    def _ddl_lock(self, conn: sa.Connection) -> None:
        if self.dialect == "postgresql":
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_DDL_LOCK)))

    def _ensure_registry(self, conn: sa.Connection) -> None:
        if REGISTRY_TABLE not in self._ready:
            self._ddl_lock(conn)
            self._registry.table.create(conn, checkfirst=True)
            self._ready.add(REGISTRY_TABLE)

    def _ensure(self, conn: sa.Connection, type_name: str, name: str) -> sa.Table:
        table = state_table(self._metadata, name)
        if name in self._ready:
            return table
        if self.create_tables:
            self._ddl_lock(conn)
        inspector = sa.inspect(conn)
        if inspector.has_table(name):
            found = sorted(str(c["name"]) for c in inspector.get_columns(name))
            if found != sorted(COLUMNS):
                raise StoreError(f"table {name!r} (type {type_name!r}) has columns {found}, "
                                 f"not the store's layout {list(COLUMNS)}")
        elif self.create_tables:
            table.create(conn)
        else:
            raise StoreError(f"table {name!r} for type {type_name!r} does not exist "
                             "(create_tables is off)")
        self._ready.add(name)
        return table

    def _existing(self, conn: sa.Connection, type_name: str) -> sa.Table | None:
        """The type's table for a reader, or ``None`` if it holds nothing yet."""
        name = self._names.lookup(self._key(type_name))
        if name not in self._ready and not sa.inspect(conn).has_table(name):
            return None
        return self._ensure(conn, type_name, name)

    # writes ----------------------------------------------------------------------------

    def apply(self, envelopes: Iterable[Envelope]) -> ApplyResult:
        """Apply decoded operations (a consumer's poll) as one transaction."""
        return self.apply_rows(group(envelopes))

    def apply_rows(self, batch: Batch) -> ApplyResult:
        """Apply a batch (see ``Batch``) as one transaction."""
        total = applied = stale = 0
        with self._transaction("SQL batch") as conn:
            self._ensure_registry(conn)
            for type_name, entities in batch.items():
                table = self._ensure(conn, type_name,
                                     self._names.table_for(self._key(type_name)))
                a, s = self._apply_type(conn, table, type_name, entities)
                applied, stale = applied + a, stale + s
                total += sum(len(ops) for ops in entities.values())
        return ApplyResult(total, applied, stale)

    def _apply_type(self, conn: sa.Connection, table: sa.Table, type_name: str,
                    entities: Mapping[str, Sequence[OpRow]]) -> tuple[int, int]:
        descriptor = self.types.get(type_name)
        declared = descriptor.declared_paths() if descriptor is not None else frozenset()
        bases = self._load(conn, table, list(entities))
        rows: list[dict[str, Any]] = []
        applied = stale = 0
        for entity_id, ops in entities.items():
            result = fold(bases.get(entity_id), ops, declared)
            applied, stale = applied + result.applied, stale + result.stale
            state = result.state
            if state is not None:
                rows.append({"p_id": entity_id, "p_version": state.version,
                             "p_deleted": state.deleted, "p_op": state.op, "p_ts": state.ts,
                             "p_data": state.data})
        if rows:
            conn.execute(self._upsert(table), rows)
        return applied, stale

    def _load(self, conn: sa.Connection, table: sa.Table, ids: Sequence[str]
              ) -> dict[str, EntityState]:
        found: dict[str, EntityState] = {}
        for start in range(0, len(ids), _CHUNK):
            query = _select(table).where(table.c.id.in_(ids[start:start + _CHUNK]))
            for row in conn.execute(query.with_for_update()):
                found[row[0]] = EntityState(int(row[1]), bool(row[2]), row[3], int(row[4]),
                                            row[5])
        return found

    def _upsert(self, table: sa.Table) -> Any:
        insert = sqlite_insert if self.dialect == "sqlite" else pg_insert
        data = sa.cast(sa.bindparam("p_data", type_=sa.Text()), table.c.data.type)
        stmt = insert(table).values(
            id=sa.bindparam("p_id"), version=sa.bindparam("p_version"),
            deleted=sa.bindparam("p_deleted"), op=sa.bindparam("p_op"),
            ts=sa.bindparam("p_ts"), data=data)
        excluded = stmt.excluded
        return stmt.on_conflict_do_update(
            index_elements=[table.c.id],
            set_={name: excluded[name] for name in COLUMNS[1:]},
            where=table.c.version < excluded.version,
        )

    def purge_tombstones(self, type_name: str, below_version: int) -> int:
        """Delete the tombstones of ``type_name`` whose version is below
        ``below_version``; how many. Only safe once no replay of an operation older
        than ``below_version`` can arrive any more (a replayed write of a purged entity
        would bring it back)."""
        with self._transaction("purging tombstones") as conn:
            table = self._existing(conn, type_name)
            if table is None:
                return 0
            done = conn.execute(sa.delete(table).where(table.c.deleted.is_(True),
                                                       table.c.version < below_version))
            return max(int(done.rowcount), 0)

    # reads -----------------------------------------------------------------------------

    def table_name(self, type_name: str) -> str:
        """The table holding ``type_name`` (recorded, or the one it would get now)."""
        with self._transaction("reading the table registry"):
            return self._names.lookup(self._key(type_name))

    def tables(self) -> dict[str, str]:
        """Every recorded type name → table name (of this store's table prefix)."""
        with self._transaction("reading the table registry"):
            recorded = self._names.reload()
        found = ((self._type_of(key), table) for key, table in recorded.items())
        return {type_name: table for type_name, table in found if type_name is not None}

    def read(self, type_name: str, *, include_deleted: bool = False) -> Iterator[StoredRow]:
        """The rows of a type (live ones only unless ``include_deleted``), by id; read
        in one transaction before the first is returned."""
        with self._transaction(f"reading {type_name}") as conn:
            table = self._existing(conn, type_name)
            if table is None:
                return iter(())
            query = _select(table).order_by(table.c.id)
            if not include_deleted:
                query = query.where(table.c.deleted.is_(False))
            rows = conn.execute(query).all()
        return (_stored(row) for row in rows)

    def get(self, type_name: str, entity_id: object, *, include_deleted: bool = False
            ) -> StoredRow | None:
        """One entity's row (``None`` if absent, or deleted unless ``include_deleted``)."""
        with self._transaction(f"reading {type_name}") as conn:
            table = self._existing(conn, type_name)
            if table is None:
                return None
            row = conn.execute(_select(table).where(table.c.id == str(entity_id))).first()
        if row is None:
            return None
        stored = _stored(row)
        return stored if include_deleted or not stored.deleted else None


def _select(table: sa.Table) -> sa.Select[Any]:
    c = table.c
    return sa.select(c.id, c.version, c.deleted, c.op, c.ts, sa.cast(c.data, sa.Text()))


def _stored(row: Any) -> StoredRow:
    data = orjson.loads(row[5]) if row[5] is not None else None
    return StoredRow(str(row[0]), int(row[1]), bool(row[2]), str(row[3]), int(row[4]), data)


def _db_error(exc: sa.exc.SQLAlchemyError) -> str:
    """The driver's error class and first line (no statement, no parameters)."""
    cause = exc.orig if isinstance(exc, sa.exc.DBAPIError) and exc.orig is not None else exc
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[0][:300] if text else ''}"

