"""Shared helpers of the mirror integration tests: workloads and exactly-once checks."""

from __future__ import annotations

import random
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gridstream.consumer import OperationConsumer, OperationRecord
from gridstream.mirror import KafkaEndpointConfig, KafkaSyncEndpoint
from gridstream.mirror.testing import InMemoryLog
from gridstream.operations import Bulk, Operation, OpType, TypeDescriptor
from gridstream.reconcile import canonical_entity, first_difference, show


def kafka_endpoint(bootstrap: str, **options: Any) -> KafkaSyncEndpoint:
    """The mirror's Kafka endpoint on ``bootstrap`` with ``options``
    (``KafkaEndpointConfig``'s)."""
    return KafkaSyncEndpoint(KafkaEndpointConfig(bootstrap_servers=bootstrap, **options))


@dataclass(frozen=True)
class Seen:
    """What a consumer saw of one operation."""

    type_name: str
    id: str
    version: int
    op: str
    txn: str | None
    topic: str
    partition: int
    offset: int


def random_workload(log: InMemoryLog, type_name: str, operations: int, *, ids: int = 50,
                    seed: int = 7, max_txn: int = 8) -> list[Bulk]:
    """Writes, updates, partial updates and removes over ``ids`` entities, in bulks of
    1..``max_txn`` operations (transactions when larger than one)."""
    rnd = random.Random(seed)
    alive: set[int] = set()
    bulks: list[Bulk] = []
    done = 0
    while done < operations:
        size = min(rnd.randint(1, max_txn), operations - done)
        ops: list[Operation] = []
        for _ in range(size):
            n = rnd.randrange(ids)
            if n not in alive:
                kind, data = OpType.WRITE, {"id": str(n), "n": n, "pad": "x" * 100}
                alive.add(n)
            else:
                kind = rnd.choice([OpType.UPDATE, OpType.PARTIAL_UPDATE, OpType.REMOVE])
                data = {"id": str(n), "n": rnd.randint(0, 9)}
                if kind is OpType.REMOVE:
                    alive.discard(n)
            ops.append(Operation(kind, type_name, str(n), 0, data, n % 4, 0))
        bulks.append(log.append(ops))
        done += size
    return bulks


def consume_all(bootstrap: str, topics: Sequence[str], expected: int, *,
                timeout_s: float = 120.0, read_committed: bool = True,
                settle_s: float = 2.0,
                types: Mapping[str, TypeDescriptor] | None = None) -> list[OperationRecord]:
    """Read from the beginning until ``expected`` records arrived and nothing more
    comes for ``settle_s`` (so duplicates beyond ``expected`` are caught too)."""
    consumer = OperationConsumer(bootstrap, topics=topics,
                                 group_id=f"gs-test-{uuid.uuid4().hex[:8]}",
                                 read_committed=read_committed, types=types,
                                 consumer_properties={"session.timeout.ms": 6000})
    records: list[OperationRecord] = []
    deadline = time.monotonic() + timeout_s
    quiet_since: float | None = None
    with consumer:
        while time.monotonic() < deadline:
            batch = consumer.consume(5000, timeout_s=0.5)
            records.extend(batch)
            if len(records) >= expected:
                if batch:
                    quiet_since = time.monotonic()
                elif quiet_since is not None and time.monotonic() - quiet_since >= settle_s:
                    break
                elif quiet_since is None:
                    quiet_since = time.monotonic()
    return records


def seen(records: Iterable[OperationRecord]) -> list[Seen]:
    return [Seen(r.type_name, str(r.id), r.version, r.op.value, r.envelope.txn, r.topic,
                 r.partition, r.offset) for r in records]


def assert_exactly_once(records: Sequence[OperationRecord], bulks: Sequence[Bulk]) -> None:
    """Every logged operation exactly once, per-entity order, transactions whole."""
    got = seen(records)
    versions = [s.version for s in got]
    expected = {op.version: op for b in bulks for op in b.operations}
    duplicates = len(versions) - len(set(versions))
    assert duplicates == 0, f"{duplicates} duplicated operations"
    missing = sorted(set(expected) - set(versions))
    assert not missing, f"{len(missing)} missing operations, first {missing[:10]}"
    assert set(versions) == set(expected)
    for s in got:
        op = expected[s.version]
        assert (s.type_name, s.id, s.op, s.txn) == (op.type_name, str(op.id), op.op.value,
                                                    op.txn_id)
    for record in records:
        assert_same_content(record, expected[record.version])
    _assert_per_entity_order(got)
    _assert_transactions_contiguous(got)


def assert_same_content(record: OperationRecord, op: Operation) -> None:
    """The record carries the logged operation's data, value by value (canonical form)."""
    carried = None if record.data is None else canonical_entity(record.data)
    logged = None if op.data is None else canonical_entity(op.data)
    found = first_difference(logged, carried)
    assert found is None, (f"{op.type_name} {op.id} version {op.version}: {found[0] or 'data'}"
                           f" logged {show(found[1])}, in Kafka {show(found[2])}")
    assert tuple(record.envelope.removed) == tuple(op.removed), op.version


def _assert_per_entity_order(got: Sequence[Seen]) -> None:
    by_partition: dict[tuple[str, int], list[Seen]] = defaultdict(list)
    for s in got:
        by_partition[(s.topic, s.partition)].append(s)
    last: dict[tuple[str, str], int] = {}
    homes: dict[tuple[str, str], tuple[str, int]] = {}
    for where, items in by_partition.items():
        for s in sorted(items, key=lambda x: x.offset):
            key = (s.type_name, s.id)
            assert homes.setdefault(key, where) == where, f"{key} on two partitions"
            assert s.version > last.get(key, -1), f"{key} out of order at version {s.version}"
            last[key] = s.version


def _assert_transactions_contiguous(got: Sequence[Seen]) -> None:
    by_partition: dict[tuple[str, int], list[Seen]] = defaultdict(list)
    for s in got:
        by_partition[(s.topic, s.partition)].append(s)
    for items in by_partition.values():
        closed: set[str] = set()
        current: str | None = None
        for s in sorted(items, key=lambda x: x.offset):
            if s.txn != current:
                if current is not None:
                    closed.add(current)
                assert s.txn is None or s.txn not in closed, f"transaction {s.txn} interleaved"
                current = s.txn
