"""Reading each store back and comparing it with a workload's expected final state.

Cassandra and Delta are compared with the reconciliation (every property of every live
entity in canonical form, versions, nothing missing or extra).
"""

from __future__ import annotations

from typing import Any

import orjson

from gridstream.operations import TypeDescriptor
from gridstream.reconcile import Entity, Holding, compare
from gridstream.reconcile.readers import from_cassandra, from_sql, from_state_rows
from gridstream.stores.cassandra import CassandraConfig, mapping_from_config
from gridstream.stores.sql import SqlStore
from tests.integration.support.spark_workload import ORDER, PERSON, Workload

ORDER_DESCRIPTOR = TypeDescriptor(ORDER, "id")
DESCRIPTORS = (PERSON, ORDER_DESCRIPTOR)


def reference(workload: Workload) -> Holding:
    """The workload's expected final state: live entities, the version of each one's last
    operation, every property."""
    last = {(op.type_name, op.id): op.version for op in workload.ops}
    return Holding("workload", {(t, str(i)): Entity(last[(t, i)], data)
                                for (t, i), data in workload.state.items()},
                   {d.name: d for d in DESCRIPTORS})


def assert_matches(expected: Holding, place: Holding) -> int:
    """Every live entity equal in every property and version, none missing or extra;
    returns the entities compared."""
    result = compare(expected, place)
    first = result.first.line() if result.first is not None else "-"
    assert result.matches, f"{place.place}: {result.summary()}; first difference: {first}"
    return len(expected.entities)


def check_cassandra(session: Any, keyspace: str, workload: Workload) -> int:
    """Every live entity equal, no deleted one present; returns entities compared."""
    mapping = mapping_from_config(CassandraConfig(keyspace=keyspace))
    stored = from_cassandra(session, keyspace, DESCRIPTORS, "cassandra", mapping)
    return assert_matches(reference(workload), stored)


def sql_rows(url: str, type_name: str) -> dict[str, tuple[int, bool, dict[str, Any] | None]]:
    """id → (version, deleted, data) of a SQL sink's type, read through the store."""
    with SqlStore(url) as store:
        return {r.id: (r.version, r.deleted, r.data)
                for r in store.read(type_name, include_deleted=True)}


def check_sql(url: str, workload: Workload) -> int:
    """Every live entity equal in every property and version; deletes are tombstones."""
    types = {d.name: d for d in DESCRIPTORS}
    compared = assert_matches(reference(workload), from_sql(url, types))
    for d in DESCRIPTORS:
        rows = sql_rows(url, d.name)
        assert all(rows[g][1] and rows[g][2] is None for g in workload.gone(d.name) if g in rows)
    return compared


def delta_rows(spark: Any, path: str, type_name: str
               ) -> dict[str, tuple[int, bool, dict[str, Any] | None]]:
    from gridstream.spark import current_state

    frame = current_state(spark, path, type_name, include_deleted=True)
    return {r["id"]: (r["version"], r["deleted"], orjson.loads(r["data"]) if r["data"] else None)
            for r in frame.collect()}


def check_delta(spark: Any, path: str, workload: Workload) -> int:
    """Live rows equal the expected state in every property; deletes are tombstones."""
    types = {d.name: d for d in DESCRIPTORS}
    rows = {d.name: delta_rows(spark, path, d.name) for d in DESCRIPTORS}
    live = ((t, i, v, orjson.dumps(data).decode())
            for t, by_id in rows.items() for i, (v, deleted, data) in by_id.items()
            if not deleted)
    compared = assert_matches(reference(workload), from_state_rows("lake (delta)", live, types))
    for type_name, by_id in rows.items():
        gone = workload.gone(type_name)
        assert all(by_id[g][1] and by_id[g][2] is None for g in gone if g in by_id)
    return compared
