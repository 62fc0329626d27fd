"""The engine behind ``Space``: one lock, the state, sequence numbers, log, transactions.

Every operation runs under the space lock: it checks the current entry (existence,
expected version), takes the next sequence number as the entry's new version, and is
either logged at once as a bulk of one (then applied) or, inside a transaction, applied
at once and logged with the whole transaction at commit. A transaction holds the lock
from ``begin`` to its end, so sequence numbers stay contiguous and other threads never
see its uncommitted writes; a rollback restores the previous slots and releases its
sequence numbers, and nothing is logged.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec

from gridstream.errors import (
    CodecError,
    EntryNotFoundError,
    InvalidEntryError,
    OperationLogError,
    SpaceError,
    TransactionError,
    VersionConflictError,
)
from gridstream.model import DEFAULT_TOPIC_PROPERTY, EntryParts
from gridstream.operations import EntityId, OpType, TypeDescriptor
from gridstream.space._change import ChangeSet, apply_changes
from gridstream.space._codec import (
    OpRecord,
    decode_data,
    encode_bulk,
    encode_data,
    encode_descriptor,
    prep_value,
)
from gridstream.space._files import Layout, WriterLock
from gridstream.space._retention import apply_retention
from gridstream.space._snapshot import SnapshotEntry, SnapshotMeta, write_snapshot
from gridstream.space._store import Slot, Store
from gridstream.space._writer import LogWriter

__all__ = ["Core", "SpaceOptions", "StagedOp", "TxState", "stable_partition"]

log = logging.getLogger(__name__)


def stable_partition(routing: Any, partitions: int) -> int:
    """The partition of a routing value (or id): CRC-32 of its text, the same in every
    process (unlike ``hash()``, which is randomised per process)."""
    text = routing if type(routing) is str else str(routing)
    return zlib.crc32(text.encode()) % partitions


@dataclass(frozen=True, slots=True)
class SpaceOptions:
    """How an embedded space stores and syncs its log (see ``Space.embedded``)."""

    partitions: int = 4
    fsync: str = "batch"
    fsync_interval_s: float = 0.05
    max_entry_bytes: int = 4 << 20
    segment_bytes: int = 64 << 20
    snapshot_every_ops: int | None = 1_000_000
    snapshot_on_close: bool = True
    on_corrupt_tail: str = "fail"
    topic_property: str = DEFAULT_TOPIC_PROPERTY


class StagedOp(NamedTuple):
    """One operation ready to log (``record``) and to apply (``slot``; ``None`` deletes)."""

    type_name: str
    id: EntityId
    record: OpRecord
    partition: int
    slot: Slot | None
    old: Slot | None
    data: Mapping[str, Any] | None


@dataclass(slots=True)
class TxState:
    txn_id: str
    start_seq: int
    thread: int
    ops: list[StagedOp] = field(default_factory=list)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Core:
    """State, lock and log of one embedded space (built by ``_open.open_core``)."""

    def __init__(
        self, name: str, layout: Layout, options: SpaceOptions, store: Store,
        types: dict[str, TypeDescriptor], writer: LogWriter, next_seq: int, lock: WriterLock,
    ) -> None:
        self.name = name
        self.layout = layout
        self.options = options
        self.store = store
        self.types = types
        self.writer = writer
        self.next_seq = next_seq
        self.lock = threading.RLock()
        self.tx: TxState | None = None
        self._dir_lock = lock
        self._closed = False
        self._failure: BaseException | None = None
        self._since_snapshot = 0
        self._snapshot_lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._maintain, name=f"space-{name}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ types and values

    def ensure_type(self, descriptor: TypeDescriptor) -> None:
        """Introduce (and persist) a type, or its new description."""
        known = self.types.get(descriptor.name)
        if known is descriptor or known == descriptor:
            return
        with self.lock:
            self._check_open()
            known = self.types.get(descriptor.name)
            if known == descriptor:
                return
            self.writer.append_type(encode_descriptor(descriptor))
            self.types[descriptor.name] = descriptor
            if known is None or known.indexes != descriptor.indexes:
                self.store.set_indexes(descriptor.name, descriptor.indexes)

    def encode(self, type_name: str, data: Mapping[str, Any]) -> bytes:
        try:
            raw = encode_data(data)
        except CodecError as exc:
            raise InvalidEntryError(f"{type_name}: {exc}") from exc
        if len(raw) > self.options.max_entry_bytes:
            raise InvalidEntryError(
                f"{type_name}: the entry takes {len(raw)} bytes, over the "
                f"{self.options.max_entry_bytes}-byte limit (max_entry_bytes)"
            )
        return raw

    def _routing(self, parts: EntryParts) -> tuple[int, Any, Any]:
        """(partition, routing value, its log form) of an entry."""
        routing = parts.routing if parts.descriptor.routing_property else None
        key = parts.id if routing is None else routing
        logged = routing if routing is None or type(routing) in (str, int) else prep_value(routing)
        return stable_partition(key, self.options.partitions), routing, logged

    # ------------------------------------------------------------ operations

    def put(self, parts: EntryParts, op: OpType, expected: int | None, must_exist: bool) -> int:
        """WRITE or UPDATE a whole entry; returns its new version."""
        name, ident = parts.descriptor.name, parts.id
        raw = self.encode(name, parts.data)
        partition, routing, logged = self._routing(parts)
        with self.lock:
            old = self._current(name, ident, expected, must_exist)
            seq = self.next_seq
            rec = (op.value, name, ident, msgspec.Raw(raw), partition, _now_ms(), (), logged)
            slot = Slot(seq, raw, partition, routing)
            self._commit([StagedOp(name, ident, rec, partition, slot, old, parts.data)])
            return seq

    def partial(self, parts: EntryParts, expected: int | None) -> int:
        """PARTIAL_UPDATE: write only the non-null properties of an existing entry."""
        d, ident = parts.descriptor, parts.id
        partial = {k: v for k, v in parts.data.items() if v is not None}
        with self.lock:
            old = self._existing(d.name, ident, expected)
            merged = decode_data(old.data)
            if d.routing_property in partial and partial[d.routing_property] != old.routing:
                raise InvalidEntryError(f"{d.name}: a partial update cannot change the routing")
            merged.update(partial)
            return self._stage_partial(d, ident, old, merged, partial, OpType.PARTIAL_UPDATE, ())

    def change(
        self, d: TypeDescriptor, ident: EntityId, changes: ChangeSet, expected: int | None
    ) -> int:
        """CHANGE: apply a change set to an existing entry."""
        with self.lock:
            old = self._existing(d.name, ident, expected)
            data = decode_data(old.data)
            changed, removed = apply_changes(data, changes, d)
            return self._stage_partial(d, ident, old, data, changed, OpType.CHANGE, removed)

    def _stage_partial(
        self, d: TypeDescriptor, ident: EntityId, old: Slot, data: dict[str, Any],
        logged: dict[str, Any], op: OpType, removed: tuple[str, ...],
    ) -> int:
        topic = self.options.topic_property
        if topic in data and topic not in logged and not d.topic:
            logged[topic] = data[topic]  # the mirror finds the document's topic in every op
        raw = self.encode(d.name, data)
        raw_logged = self.encode(d.name, logged)
        seq = self.next_seq
        rec = (op.value, d.name, ident, msgspec.Raw(raw_logged), old.partition, _now_ms(),
               removed, self._logged_routing(old))
        slot = Slot(seq, raw, old.partition, old.routing)
        self._commit([StagedOp(d.name, ident, rec, old.partition, slot, old, data)])
        return seq

    def delete(
        self, type_name: str, ident: EntityId, op: OpType, expected: int | None
    ) -> tuple[int, Slot] | None:
        """REMOVE or TAKE; ``None`` if there was no such entry."""
        with self.lock:
            old = self._current(type_name, ident, expected, False)
            if old is None:
                return None
            seq = self.next_seq
            self._commit([self._removal(type_name, ident, old, op)])
            return seq, old

    def clear(self, type_name: str, accept: Callable[[EntityId, Slot], bool] | None) -> int:
        """REMOVE every (accepted) entry of a type, as one bulk."""
        with self.lock:
            self._check_open()
            table = self.store.tables.get(type_name, {})
            victims = [(i, s) for i, s in table.items() if accept is None or accept(i, s)]
            if victims:
                self._commit([self._removal(type_name, i, s, OpType.REMOVE) for i, s in victims])
            return len(victims)

    def _removal(self, type_name: str, ident: EntityId, old: Slot, op: OpType) -> StagedOp:
        rec = (op.value, type_name, ident, msgspec.Raw(old.data), old.partition, _now_ms(), (),
               self._logged_routing(old))
        return StagedOp(type_name, ident, rec, old.partition, None, old, None)

    @staticmethod
    def _logged_routing(slot: Slot) -> Any:
        r = slot.routing
        return r if r is None or type(r) in (str, int) else prep_value(r)

    def get(self, type_name: str, ident: EntityId) -> Slot | None:
        with self.lock:
            self._check_open()
            return self.store.get(type_name, ident)

    def items(
        self, type_name: str, ids: Iterable[EntityId] | None = None
    ) -> list[tuple[EntityId, Slot]]:
        with self.lock:
            self._check_open()
            table = self.store.tables.get(type_name, {})
            if ids is None:
                return list(table.items())
            return [(i, table[i]) for i in ids if i in table]

    def candidates(
        self, type_name: str, criteria: Mapping[str, Any]
    ) -> list[tuple[EntityId, Slot]]:
        """Entries possibly matching ``criteria``: narrowed by an index when one covers
        a criterion (then ordered by version), else every entry of the type."""
        with self.lock:
            self._check_open()
            ids = self.store.indexed_ids(type_name, criteria) if criteria else None
            table = self.store.tables.get(type_name, {})
            if ids is None:
                return list(table.items())
            found = [(i, table[i]) for i in ids if i in table]
        found.sort(key=lambda item: item[1].version)
        return found

    def _existing(self, type_name: str, ident: EntityId, expected: int | None) -> Slot:
        old = self._current(type_name, ident, expected, True)
        assert old is not None
        return old

    def _current(
        self, type_name: str, ident: EntityId, expected: int | None, must_exist: bool
    ) -> Slot | None:
        self._check_open()
        old = self.store.get(type_name, ident)
        if old is None and must_exist:
            raise EntryNotFoundError(f"{type_name} {ident!r} is not in the space")
        if expected is not None:
            actual = old.version if old is not None else 0
            if actual != expected:
                raise VersionConflictError(
                    f"{type_name} {ident!r} is at version {actual}, not {expected}",
                    expected=expected, actual=actual,
                )
        return old

    def _commit(self, ops: list[StagedOp]) -> None:
        """Log and apply (or, in a transaction, apply and keep) ops numbered from next_seq."""
        tx = self.tx
        if tx is None:
            self._append(self.next_seq, ops, None)
            self._since_snapshot += len(ops)
        else:
            tx.ops.extend(ops)
        put = self.store.put
        for op in ops:
            put(op.type_name, op.id, op.slot, op.old, op.data)
        self.next_seq += len(ops)

    def _append(self, first_seq: int, ops: list[StagedOp], txn_id: str | None) -> None:
        if self._failure is not None:
            raise OperationLogError("the operation log failed earlier") from self._failure
        payload = encode_bulk(txn_id, _now_ms(), [op.record for op in ops])
        try:
            self.writer.append(ops[0].partition, first_seq, len(ops), payload)
        except OSError as exc:  # a failed fsync: what reached the disk is unknown
            self._failure = exc
            raise OperationLogError(f"cannot sync the operation log: {exc}") from exc

    # ------------------------------------------------------------ transactions

    def begin(self, txn_id: str) -> TxState:
        self.lock.acquire()
        if self.tx is not None:
            self.lock.release()
            raise TransactionError("a transaction is already active in this thread")
        try:
            self._check_open()
        except SpaceError:
            self.lock.release()
            raise
        self.tx = TxState(txn_id, self.next_seq, threading.get_ident())
        return self.tx

    def commit(self, tx: TxState) -> None:
        try:
            if tx.ops:
                try:
                    self._append(tx.start_seq, tx.ops, tx.txn_id)
                except BaseException:
                    self._undo(tx)
                    raise
                self._since_snapshot += len(tx.ops)
        finally:
            self.tx = None
            self.lock.release()

    def rollback(self, tx: TxState) -> None:
        try:
            self._undo(tx)
        finally:
            self.tx = None
            self.lock.release()

    def _undo(self, tx: TxState) -> None:
        for op in reversed(tx.ops):
            self.store.put(op.type_name, op.id, op.old, op.slot)
        self.next_seq = tx.start_seq
        tx.ops.clear()

    # ------------------------------------------------------------ durability

    def snapshot(self) -> int:
        """Write a snapshot of the committed state now; returns its ``next_seq``."""
        with self.lock:
            if self.tx is not None:
                raise TransactionError("cannot snapshot inside a transaction")
            self._check_open()
        return self._snapshot()

    def _snapshot(self) -> int:
        with self._snapshot_lock:
            with self.lock:
                if self.writer.fsync_policy != "never":
                    self.writer.sync()  # the log before the snapshot is durable first
                seq = self.next_seq
                tables = {n: dict(t) for n, t in self.store.tables.items() if t}
                self._since_snapshot = 0
            count = sum(len(t) for t in tables.values())
            entries = (SnapshotEntry(n, i, s.version, s.partition, s.routing, s.data)
                       for n, t in tables.items() for i, s in t.items())
            meta = SnapshotMeta(seq, self.name, count, ())
            write_snapshot(self.layout, meta, entries, durable=self.writer.fsync_policy != "never")
            apply_retention(self.layout, self.options.partitions)
            return seq

    def sync(self) -> None:
        with self.lock:
            self._check_open()
            self.writer.sync()

    def _maintain(self) -> None:
        """Background: fsync for the ``batch`` policy, periodic snapshots."""
        every = self.options.snapshot_every_ops
        while not self._stopping.wait(self.options.fsync_interval_s):
            if self.writer.fsync_policy == "batch" and self.writer.dirty():
                try:
                    self.writer.sync()
                except OSError as exc:  # what reached the disk is unknown: stop writing
                    log.exception("space %s: fsync of the operation log failed", self.name)
                    self._failure = exc
                    return
            if every and self._since_snapshot >= every:
                try:
                    self._snapshot()
                except Exception:  # the log is intact; try again after `every` more ops
                    log.exception("space %s: snapshot failed", self.name)

    def _check_open(self) -> None:
        if self._closed:
            raise SpaceError(f"space {self.name!r} is closed")

    def close(self) -> None:
        with self.lock:
            if self.tx is not None:
                raise TransactionError("cannot close the space inside a transaction")
            if self._closed:
                return
            self._closed = True
        self._stopping.set()
        self._thread.join()
        try:
            if self.options.snapshot_on_close and self._since_snapshot and self._failure is None:
                self._snapshot()
        finally:
            self.writer.close()
            self._dir_lock.release()
