"""An in-memory ``LogReader`` for tests, examples and benchmarks (no durability)."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gridstream.errors import OperationLogError
from gridstream.operations import Bulk, EntityId, Operation, OpType, TypeDescriptor
from gridstream.space.contract import LogReader

__all__ = ["InMemoryLog"]


class InMemoryLog(LogReader):
    """A log held in a list; versions are the operations' sequence numbers."""

    def __init__(self, types: Iterable[TypeDescriptor] = (), *, first_seq: int = 0) -> None:
        self._types = {t.name: t for t in types}
        self._bulks: list[Bulk] = []
        self._first = first_seq
        self._end = first_seq
        self.acks: dict[str, int] = {}
        self._lock = threading.Lock()
        self._txn_counter = 0

    def add_type(self, descriptor: TypeDescriptor) -> None:
        with self._lock:
            self._types[descriptor.name] = descriptor

    def append(self, operations: Sequence[Operation], *, txn: bool | None = None) -> Bulk:
        """Commit ``operations`` as one bulk, stamping versions, timestamps and (for more
        than one operation, or ``txn=True``) a transaction id."""
        with self._lock:
            seq = self._end
            txn_id = None
            if txn or (txn is None and len(operations) > 1):
                self._txn_counter += 1
                txn_id = f"txn-{self._txn_counter}"
            now = int(time.time() * 1000)
            stamped = tuple(
                dataclasses.replace(op, version=seq + i, txn_id=txn_id, timestamp_ms=now)
                for i, op in enumerate(operations)
            )
            bulk = Bulk(first_seq=seq, operations=stamped, txn_id=txn_id, timestamp_ms=now)
            self._bulks.append(bulk)
            self._end = bulk.next_seq
            return bulk

    def write(self, type_name: str, entity_id: EntityId, data: Mapping[str, Any] | None, *,
              op: OpType = OpType.WRITE, partition: int = 0) -> Bulk:
        """Commit one operation."""
        return self.append([Operation(op, type_name, entity_id, 0, data, partition, 0)])

    def first_seq(self) -> int:
        return self._first

    def end_seq(self) -> int:
        return self._end

    def read(self, from_seq: int, max_operations: int) -> Sequence[Bulk]:
        with self._lock:
            if from_seq < self._first:
                raise OperationLogError(f"seq {from_seq} is no longer retained "
                                        f"(first is {self._first})")
            index = self._index(from_seq)
            out: list[Bulk] = []
            count = 0
            for bulk in self._bulks[index:]:
                if out and count + len(bulk.operations) > max_operations:
                    break
                out.append(bulk)
                count += len(bulk.operations)
            return out

    def _index(self, seq: int) -> int:
        lo, hi = 0, len(self._bulks)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._bulks[mid].first_seq < seq:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self._bulks) and self._bulks[lo].first_seq != seq:
            raise OperationLogError(f"seq {seq} is not at a bulk boundary")
        if lo == len(self._bulks) and seq != self._end:
            raise OperationLogError(f"seq {seq} is not at a bulk boundary")
        return lo

    def acknowledge(self, consumer: str, next_seq: int) -> None:
        with self._lock:
            self.acks[consumer] = max(self.acks.get(consumer, self._first), next_seq)

    def register(self, consumer: str) -> int:
        with self._lock:
            return self.acks.setdefault(consumer, self._first)

    def trim(self) -> None:
        """Drop bulks every registered consumer has acknowledged."""
        with self._lock:
            floor = min(self.acks.values(), default=self._first)
            self._bulks = [b for b in self._bulks if b.next_seq > floor]
            self._first = self._bulks[0].first_seq if self._bulks else self._end

    def types(self) -> Mapping[str, TypeDescriptor]:
        return dict(self._types)

    def close(self) -> None:
        """Nothing to release."""
