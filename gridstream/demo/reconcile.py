"""Reconciliation: what each place holds, as (type, id) -> version of the last operation.

The version is the space-wide sequence number of an entry's last operation, so two places
that agree on every (type, id, version) have applied the same final operation to every
entity; a deleted entity must be absent everywhere.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gridstream.consumer import OperationConsumer
from gridstream.operations import TypeDescriptor
from gridstream.space import Space

__all__ = [
    "Holding",
    "from_cassandra",
    "from_grid",
    "from_kafka",
    "from_lake",
    "from_sql",
    "state_hash",
]

State = dict[tuple[str, str], int]


@dataclass
class Holding:
    """One place's view: its live entities and, where it has one, its operation count."""

    place: str
    state: State
    operations: int | None = None
    notes: list[str] = field(default_factory=list)


def state_hash(state: Mapping[tuple[str, str], int]) -> str:
    digest = hashlib.sha256()
    for (type_name, entity_id), version in sorted(state.items()):
        digest.update(f"{type_name}\x00{entity_id}\x00{version}\n".encode())
    return digest.hexdigest()[:12]


def from_grid(space: Space, type_names: Iterable[str]) -> Holding:
    state: State = {}
    for type_name in type_names:
        descriptor = space.types()[type_name]
        for entry in space.read_multiple(type_name):
            entity_id = entry.get(descriptor.id_property) if hasattr(entry, "get") \
                else getattr(entry, descriptor.id_property)
            versioned = space.read_versioned(type_name, entity_id)
            if versioned is not None:
                state[(type_name, str(entity_id))] = versioned.version
    return Holding("grid", state, operations=space.next_seq - 1)


def from_kafka(bootstrap: str, topics: list[str], types: Mapping[str, TypeDescriptor],
               expected_ops: int, group: str, timeout_s: float = 60) -> Holding:
    """Fold every operation in ``topics`` (read_committed); check per-entity order."""
    last: dict[tuple[str, str], tuple[int, bool]] = {}
    count, out_of_order = 0, 0
    deadline = time.monotonic() + timeout_s
    with OperationConsumer(bootstrap, topics=topics, group_id=group, types=types) as consumer:
        while count < expected_ops and time.monotonic() < deadline:
            for record in consumer.consume(1000, timeout_s=0.5):
                key = (record.type_name, str(record.id))
                previous = last.get(key)
                if previous is not None and previous[0] >= record.version:
                    out_of_order += 1
                last[key] = (record.version, record.op.is_delete)
                count += 1
    holding = Holding("kafka", {k: v for k, (v, gone) in last.items() if not gone}, count)
    if out_of_order:
        holding.notes.append(f"{out_of_order} operations out of per-entity order")
    return holding


def from_sql(path: str, type_names: Iterable[str]) -> Holding:
    from gridstream.stores.sql import SqlStore

    state: State = {}
    with SqlStore(f"sqlite:///{path}") as store:
        for type_name in type_names:
            state.update({(type_name, row.id): row.version for row in store.read(type_name)})
    return Holding("sql", state)


def from_cassandra(session: Any, keyspace: str, descriptors: Iterable[TypeDescriptor],
                   place: str = "cassandra") -> Holding:
    from gridstream.stores.cassandra import CassandraReader

    reader = CassandraReader(session, keyspace)
    state: State = {}
    for descriptor in descriptors:
        for stored in reader.read(descriptor):
            state[(descriptor.name, str(stored.id))] = int(stored.version or 0)
    return Holding(place, state)


def from_lake(path: Any) -> Holding:
    """The Delta current-state table (live rows only)."""
    from gridstream.spark import get_spark
    from gridstream.spark.sinks.delta import current_state

    rows = current_state(get_spark(app_name="gridstream-demo"), str(path)).collect()
    return Holding("lake (delta)", {(r["type"], str(r["id"])): int(r["version"]) for r in rows})
