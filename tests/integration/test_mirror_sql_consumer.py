"""Mirror → Kafka → SQL: the database ends in the space's final state, and a full replay
(a new consumer group from the beginning) changes nothing; on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from gridstream.consumer import OperationConsumer
from gridstream.mirror import Mirror
from gridstream.mirror.testing import InMemoryLog
from gridstream.operations import OpType, PropertySpec, TypeDescriptor
from gridstream.stores.sql import SqlStore, run_sql_consumer
from tests.integration.support.mirror_helpers import kafka_endpoint, random_workload

MakeTopic = Callable[..., str]


def _final_state(log: InMemoryLog) -> dict[str, tuple[int, dict[str, Any] | None]]:
    """id → (version, data) after applying the log in order (None data: deleted)."""
    state: dict[str, tuple[int, dict[str, Any] | None]] = {}
    for bulk in log.read(log.first_seq(), 10**9):
        for op in bulk.operations:
            data: dict[str, Any] | None = None
            if op.op is OpType.PARTIAL_UPDATE:
                data = dict(state[str(op.id)][1] or {})
                data.update((k, v) for k, v in (op.data or {}).items() if v is not None)
            elif not op.op.is_delete:
                data = dict(op.data or {})
            state[str(op.id)] = (op.version, data)
    return state


def test_sql_store_converges_and_replays_are_harmless(kafka_bootstrap: str,
                                                      topic_factory: MakeTopic,
                                                      sql_url: str) -> None:
    topic = topic_factory(3)
    descriptor = TypeDescriptor(name="Account", id_property="id", topic=topic,
                                fixed=(PropertySpec("id", "str"), PropertySpec("n", "int"),
                                       PropertySpec("pad", "str")))
    log = InMemoryLog([descriptor])
    random_workload(log, "Account", 2000)
    mirror = Mirror(log, kafka_endpoint(kafka_bootstrap), name=f"sql-{uuid.uuid4().hex[:8]}")
    while mirror.run_once():
        pass
    mirror.stop()
    store = SqlStore(sql_url, types=log.types())
    expected = _final_state(log)
    for _ in range(2):  # the second pass is a full replay under a new group
        consumer = OperationConsumer(kafka_bootstrap, topics=[topic],
                                     group_id=f"gs-test-{uuid.uuid4().hex[:8]}",
                                     types=log.types())
        with consumer:
            applied = run_sql_consumer(consumer, store, idle_timeout_s=3.0)
        assert applied == 2000
        for entity, (version, data) in expected.items():
            row = store.get("Account", entity, include_deleted=True)
            assert row is not None and row.version == version
            assert (row.deleted, row.data) == (data is None, data), entity
    store.close()
