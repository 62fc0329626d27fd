"""Reading each store back and comparing it with a workload's expected final state."""

from __future__ import annotations

from typing import Any

import orjson

from gridstream.operations import TypeDescriptor
from gridstream.stores.cassandra import CassandraConfig, CassandraReader, mapping_from_config
from gridstream.stores.sql import SqlStore
from tests.integration.spark_workload import ORDER, PERSON, Workload

ORDER_DESCRIPTOR = TypeDescriptor(ORDER, "id")
DESCRIPTORS = (PERSON, ORDER_DESCRIPTOR)


def _canonical_cassandra(descriptor: TypeDescriptor, keyspace: str, entity_id: str,
                         data: dict[str, Any]) -> dict[str, Any]:
    """What the Cassandra mapping reads back for ``data`` (its documented canonical form)."""
    layout = mapping_from_config(CassandraConfig(keyspace=keyspace)).layout(descriptor)
    canonical = layout.unflatten({k: v for k, v in layout.flatten(data).items()})
    canonical[descriptor.id_property] = entity_id
    return canonical


def check_cassandra(session: Any, keyspace: str, workload: Workload) -> int:
    """Every live entity equal, no deleted one present; returns rows compared."""
    mapping = mapping_from_config(CassandraConfig(keyspace=keyspace))
    reader = CassandraReader(session, keyspace, mapping)
    compared = 0
    for descriptor in DESCRIPTORS:
        stored = {str(e.id): e for e in reader.read(descriptor)}
        expected = workload.live(descriptor.name)
        assert set(stored) == set(expected), (
            descriptor.name, sorted(set(stored) ^ set(expected))[:10])
        for entity_id, data in expected.items():
            key = int(entity_id) if descriptor is ORDER_DESCRIPTOR else entity_id
            want = _canonical_cassandra(descriptor, keyspace, key, data)
            assert stored[entity_id].data == want, (descriptor.name, entity_id)
            compared += 1
        assert not (workload.gone(descriptor.name) & set(stored))
    return compared


def sql_rows(url: str, type_name: str) -> dict[str, tuple[int, bool, dict[str, Any] | None]]:
    """id → (version, deleted, data) of a SQL sink's type, read through the store."""
    with SqlStore(url) as store:
        return {r.id: (r.version, r.deleted, r.data)
                for r in store.read(type_name, include_deleted=True)}


def check_state_rows(rows: dict[str, tuple[int, bool, dict[str, Any] | None]],
                     workload: Workload, type_name: str) -> int:
    """SQL / Delta rows equal the expected state; deletes are tombstones."""
    live = {k: v for k, v in rows.items() if not v[1]}
    expected = workload.live(type_name)
    assert set(live) == set(expected), (type_name, sorted(set(live) ^ set(expected))[:10])
    for entity_id, data in expected.items():
        assert live[entity_id][2] == data, (type_name, entity_id, live[entity_id], data)
    gone = workload.gone(type_name)
    assert not gone & set(live)
    assert all(rows[g][1] and rows[g][2] is None for g in gone if g in rows)
    return len(expected)


def check_sql(url: str, workload: Workload) -> int:
    return sum(check_state_rows(sql_rows(url, d.name), workload, d.name) for d in DESCRIPTORS)


def delta_rows(spark: Any, path: str, type_name: str
               ) -> dict[str, tuple[int, bool, dict[str, Any] | None]]:
    from gridstream.spark import current_state

    frame = current_state(spark, path, type_name, include_deleted=True)
    return {r["id"]: (r["version"], r["deleted"], orjson.loads(r["data"]) if r["data"] else None)
            for r in frame.collect()}


def check_delta(spark: Any, path: str, workload: Workload) -> int:
    return sum(check_state_rows(delta_rows(spark, path, d.name), workload, d.name)
               for d in DESCRIPTORS)
