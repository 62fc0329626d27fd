"""Applying operations to Cassandra: idempotent, version-stamped, no read gap.

Every statement carries the operation's ``version`` as its write timestamp
(``USING TIMESTAMP version``). Versions only grow across the whole space, so Cassandra's
last-write-wins keeps the newest state however often operations are replayed and in
whatever order they run within a call: an old write never shadows a newer value, and a
removed row never comes back. What each operation writes:

- WRITE, UPDATE: the row is replaced whole (the space reports an overwrite as WRITE), in
  one request that readers see whole, never a delete followed by an insert; see
  ``replace_mode``. With ``replace_on_write=False`` WRITE only inserts its non-null
  columns (the seed's behaviour, right for a space that never overwrites with WRITE).
- PARTIAL_UPDATE: one INSERT of the non-null properties, each written whole (a nested
  object's null fields are nulled, not left stale).
- CHANGE: one INSERT of the changed paths' values and nulls for the removed paths. A
  path inside one column's value (a map, a list, an object past the depth limit) is
  applied to the stored value: read, edit, write back at the version, unless the column
  already holds a newer write.
- REMOVE, TAKE: one DELETE of the row.
- An entry carrying nothing but its id writes nothing, and is counted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

from gridstream.errors import InvalidEntryError, StoreError
from gridstream.operations import Operation, OpType, TypeDescriptor
from gridstream.stores.cassandra._batches import Unit, group_requests, replica_key
from gridstream.stores.cassandra._driver import consistency_level, require_driver
from gridstream.stores.cassandra._json import row_json
from gridstream.stores.cassandra._paths import REMOVE, edit_path
from gridstream.stores.cassandra._statements import StatementCache
from gridstream.stores.cassandra.columns import VERSION_COLUMN, column_name
from gridstream.stores.cassandra.flatten import Location, TypeLayout
from gridstream.stores.cassandra.mapping import CassandraMapping
from gridstream.stores.cassandra.schema import CassandraSchema, TableState
from gridstream.stores.cassandra.tables import cassandra_table_names

if TYPE_CHECKING:
    from gridstream.stores.cassandra.config import CassandraConfig

__all__ = ["CassandraWriter", "ReplaceMode", "WriteCounters"]

log = logging.getLogger(__name__)

ReplaceMode = Literal["tombstone", "nulls"]
"""How a row is replaced whole: see ``CassandraWriter``."""


@dataclass
class WriteCounters:
    """What a writer did; nothing is skipped without being counted here."""

    operations: int = 0
    inserts: int = 0
    replaces: int = 0
    partial_writes: int = 0
    deletes: int = 0
    read_modify_writes: int = 0
    skipped_id_only: int = 0

    def add(self, other: WriteCounters) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass(frozen=True, slots=True)
class _Target:
    table: str
    layout: TypeLayout
    state: TableState
    key: Any


@dataclass
class _Call:
    """One ``apply`` call: statements planned but not yet executed, and its counts."""

    pending: list[Unit] = field(default_factory=list)
    counts: WriteCounters = field(default_factory=WriteCounters)


class CassandraWriter:
    """Applies operations to one keyspace through prepared statements, ``concurrency``
    requests in flight at a time. One writer per thread.

    ``replace_mode`` chooses how a row is replaced whole, always in one request that
    readers see whole: ``tombstone`` (default) is a single-partition batch of the INSERT
    of the non-null columns at the version and a row deletion at version - 1 (one
    deletion marker per partition, and it also shadows columns that an older operation
    creates later); ``nulls`` is one ``INSERT ... JSON ... DEFAULT NULL`` at the version,
    in which Cassandra nulls every column the table has at that moment (no deletion,
    for consumers of Cassandra CDC, but a null cell per absent column).

    ``write_id_only_entries`` writes an entry that has only its id as a row holding its
    id and version (the seed skips such entries; they are counted either way).

    Rows owned by the same replicas travel together in unlogged batches of up to
    ``batch_partitions`` rows and ``batch_max_bytes`` of values (see ``_batches``);
    ``batch_partitions=1`` sends one request per row.
    """

    def __init__(
        self,
        session: Any,
        keyspace: str,
        mapping: CassandraMapping | None = None,
        *,
        concurrency: int = 64,
        consistency_level: int | None = None,
        replication_factor: int = 1,
        replace_mode: ReplaceMode = "tombstone",
        replace_on_write: bool = True,
        write_id_only_entries: bool = False,
        statement_cache_size: int = 1024,
        batch_partitions: int = 10,
        batch_max_bytes: int = 4096,
    ) -> None:
        require_driver()
        if replace_mode not in ("tombstone", "nulls"):
            raise StoreError(f"replace_mode must be 'tombstone' or 'nulls', not {replace_mode!r}")
        self.session = session
        self.keyspace = keyspace
        self.mapping = mapping or CassandraMapping()
        self.schema = CassandraSchema(session, keyspace, replication_factor=replication_factor)
        self.tables = cassandra_table_names(
            session, keyspace, self.mapping.seed_table_name, create=True
        )
        self.statements = StatementCache(session, keyspace, consistency_level, statement_cache_size)
        self.concurrency = max(1, concurrency)
        self.consistency_level = consistency_level
        self.replace_mode = replace_mode
        self.replace_on_write = replace_on_write
        self.write_id_only_entries = write_id_only_entries
        self.batch_partitions = max(1, batch_partitions)
        self.batch_max_bytes = max(0, batch_max_bytes)
        self.counters = WriteCounters()

    @classmethod
    def from_config(
        cls, session: Any, config: CassandraConfig, mapping: CassandraMapping
    ) -> CassandraWriter:
        """A writer with every write option of ``config`` (one place for them all)."""
        return cls(
            session,
            config.keyspace,
            mapping,
            concurrency=config.concurrency,
            consistency_level=consistency_level(config.consistency_level),
            replication_factor=config.replication_factor,
            replace_on_write=config.replace_on_write,
            replace_mode=config.replace_mode,
            write_id_only_entries=config.write_id_only_entries,
            batch_partitions=config.batch_partitions,
            batch_max_bytes=config.batch_max_bytes,
        )

    def table_for(self, type_name: str) -> str:
        """The type's table, recorded in the keyspace's ``gs_tables`` on first sight."""
        return self.tables.table_for(type_name)

    def apply(
        self, operations: Iterable[Operation], types: Mapping[str, TypeDescriptor]
    ) -> WriteCounters:
        """Write ``operations`` durably (at the configured consistency) or raise
        ``StoreError``; safe to call again with the same operations after a failure."""
        call = _Call()
        try:
            for op in operations:
                unit = self._plan(op, types, call)
                if unit is not None:
                    call.pending.append(unit)
            self._flush(call)
        except StoreError:
            self.schema.forget()
            raise
        self.counters.add(call.counts)
        return call.counts

    # ------------------------------------------------------------ planning

    def _plan(
        self, op: Operation, types: Mapping[str, TypeDescriptor], call: _Call
    ) -> Unit | None:
        counts = call.counts
        counts.operations += 1
        target = self._target(op, types)
        if op.op.is_delete:
            counts.deletes += 1
            return (self._bind(target, "delete", (), (op.version, target.key)),)
        values = self._values(target, op, call)
        if not values and not self.write_id_only_entries:
            counts.skipped_id_only += 1
            log.debug("%s %s %r has only its id: nothing written", op.op, op.type_name, op.id)
            return None
        needed = [target.layout.column(n) for n, v in values.items() if v is not None]
        self.schema.ensure_columns(target.state, needed)
        encoded = self.mapping.encode_row(target.layout, values)
        if self._replaces(op):
            counts.replaces += 1
            return self._bind_replace(target, op, encoded)
        if op.op.is_partial:
            counts.partial_writes += 1
        else:
            counts.inserts += 1
        return (self._bind_insert(target, op, encoded),)

    def _replaces(self, op: Operation) -> bool:
        return op.op is OpType.UPDATE or (op.op is OpType.WRITE and self.replace_on_write)

    def _target(self, op: Operation, types: Mapping[str, TypeDescriptor]) -> _Target:
        descriptor = types.get(op.type_name)
        if descriptor is None:
            raise StoreError(f"no type descriptor for {op.type_name!r} (version {op.version})")
        layout = self.mapping.layout(descriptor)
        table = self.table_for(op.type_name)
        id_type = self.mapping.id_cql_type(descriptor, op.id)
        state = self.schema.ensure_table(table, layout, id_type, descriptor.indexes)
        return _Target(table, layout, state, state.key(op.id))

    def _values(self, target: _Target, op: Operation, call: _Call) -> dict[str, Any]:
        """Column → value to write (``None``: write null); empty if nothing to write."""
        data = op.data or {}
        if op.op is OpType.PARTIAL_UPDATE:
            present = {k: v for k, v in data.items() if v is not None}
            return self._changed_values(target, op, present, (), call, paths=False)
        if op.op is OpType.CHANGE:
            return self._changed_values(target, op, data, op.removed, call, paths=True)
        flat = target.layout.flatten(data)
        return {name: value for name, value in flat.items() if value is not None}

    def _changed_values(
        self,
        target: _Target,
        op: Operation,
        changed: Mapping[str, Any],
        removed: Sequence[str],
        call: _Call,
        *,
        paths: bool,
    ) -> dict[str, Any]:
        """Each changed property written whole (nested nulls written, columns under it
        that its new value lacks nulled), each removed one nulled. With ``paths`` the
        names are property paths (CHANGE), else top-level names (PARTIAL_UPDATE)."""
        layout, state = target.layout, target.state
        values: dict[str, Any] = {}
        inner_edits: dict[str, list[tuple[tuple[str, ...], Any, bool]]] = {}
        edits = [(k, v) for k, v in changed.items() if k != layout.id_property]
        edits += [(name, REMOVE) for name in removed if name != layout.id_property]
        for key, value in edits:
            where = layout.locate(key, state.columns) if paths else Location((key,))
            prefix = column_name(where.path)
            if where.inner:
                declared = key in layout.declared_paths
                inner_edits.setdefault(prefix, []).append((where.inner, value, declared))
                continue
            if value is REMOVE:
                self._ensure_removable(target, prefix)
            else:
                values.update(layout.flatten_at(where.path, value))
            for col in state.columns:
                if col == prefix or col.startswith(prefix + "."):
                    values.setdefault(col, None)
        for column, column_edits in inner_edits.items():
            self._read_modify(target, op, column, column_edits, values, call)
        return {n: v for n, v in values.items() if v is not None or n in state.columns}

    def _ensure_removable(self, target: _Target, prefix: str) -> None:
        """Give a removed property that was never stored here a column, so that the null
        written now also shadows an older write of it that arrives later."""
        if prefix == VERSION_COLUMN:
            raise StoreError(f"{target.layout.type_name}: {VERSION_COLUMN!r} is reserved")
        state = target.state
        if not any(c == prefix or c.startswith(prefix + ".") for c in state.columns):
            self.schema.ensure_columns(state, [target.layout.column(prefix)])

    def _read_modify(
        self,
        target: _Target,
        op: Operation,
        column: str,
        edits: list[tuple[tuple[str, ...], Any, bool]],
        values: dict[str, Any],
        call: _Call,
    ) -> None:
        """Apply changes inside one column's value: read it (after everything planned so
        far has been written), edit, and write it back at the version, unless the column
        already holds a write as new or newer."""
        current, written_at = self._read_column(target, column, call)
        if written_at is not None and written_at >= op.version:
            return
        try:
            for path, new, declared in edits:
                current = edit_path(current, path, new, declared=declared)
        except InvalidEntryError as exc:
            raise StoreError(f"{op.type_name} id={op.id!r} version {op.version}: column "
                             f"{column!r}: {exc}") from exc
        values[column] = current
        if column in target.state.columns:
            call.counts.read_modify_writes += 1

    def _read_column(self, target: _Target, column: str, call: _Call) -> tuple[Any, int | None]:
        if column not in target.state.columns:
            return None, None
        self._flush(call)
        statement = self.statements.bind(
            target.table, target.state.id_column, "read", (column,), (target.key,)
        )
        try:
            row = self.session.execute(statement).one()
        except Exception as exc:
            raise StoreError(f"reading {target.table}.{column} for a change failed") from exc
        if row is None:
            return None, None
        value, written_at = list(row.values()) if isinstance(row, Mapping) else list(row)
        decoded = self.mapping.decode(target.layout.column(column), value)
        return decoded, None if written_at is None else int(written_at)

    # ------------------------------------------------------------ statements

    def _bind(self, target: _Target, kind: str, names: tuple[str, ...], params: Any) -> Any:
        return self.statements.bind(target.table, target.state.id_column, kind, names, params)

    def _bind_insert(self, target: _Target, op: Operation, encoded: dict[str, Any]) -> Any:
        names = tuple(sorted(encoded))
        params = (target.key, op.version, *(encoded[n] for n in names), op.version)
        return self._bind(target, "insert", names, params)

    def _bind_replace(self, target: _Target, op: Operation, encoded: dict[str, Any]) -> Unit:
        if self.replace_mode == "nulls":
            row = {target.layout.id_column: target.key, VERSION_COLUMN: op.version, **encoded}
            doc = row_json(row, target.state.columns)
            return (self._bind(target, "replace-json", (), (doc, op.version)),)
        return (
            self._bind_insert(target, op, encoded),
            self._bind(target, "delete", (), (op.version - 1, target.key)),
        )

    def _flush(self, call: _Call) -> None:
        """Execute the pending writes, grouped into requests, ``concurrency`` at a time."""
        units, call.pending = call.pending, []
        if not units:
            return
        from cassandra.concurrent import execute_concurrent

        statements = group_requests(
            units,
            replicas_of=replica_key(self.session),
            max_partitions=self.batch_partitions,
            max_bytes=self.batch_max_bytes,
            consistency_level=self.consistency_level,
        )
        results = execute_concurrent(
            self.session,
            [(statement, None) for statement in statements],
            concurrency=self.concurrency,
            raise_on_first_error=False,
            results_generator=False,
        )
        failures = [r.result_or_exc for r in results if not r.success]
        if failures:
            raise StoreError(
                f"{len(failures)} of {len(statements)} Cassandra write requests failed "
                f"(first: {type(failures[0]).__name__})"
            ) from failures[0]
