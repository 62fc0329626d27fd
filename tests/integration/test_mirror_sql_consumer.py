"""Mirror → Kafka → SQL: the database ends in the space's final state, and a full replay
(a new consumer group from the beginning) changes nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from gridstream.consumer import OperationConsumer
from gridstream.mirror import InMemoryLog, KafkaSyncEndpoint, Mirror
from gridstream.operations import PropertySpec, TypeDescriptor
from gridstream.stores.sql import SqlStore, run_sql_consumer
from tests.integration.mirror_helpers import random_workload

MakeTopic = Callable[..., str]


def _final_state(log: InMemoryLog) -> dict[str, tuple[int, int | None]]:
    """id → (version, n) after applying the log in order (None n: deleted)."""
    state: dict[str, tuple[int, int | None]] = {}
    for bulk in log.read(log.first_seq(), 10**9):
        for op in bulk.operations:
            n = None if op.op.is_delete else (op.data or {}).get("n")
            state[str(op.id)] = (op.version, n)
    return state


def test_sql_store_converges_and_replays_are_harmless(kafka_bootstrap: str,
                                                      topic_factory: MakeTopic,
                                                      tmp_path: Path) -> None:
    topic = topic_factory(3)
    descriptor = TypeDescriptor(name="Account", id_property="id", topic=topic,
                                fixed=(PropertySpec("id", "str"), PropertySpec("n", "int"),
                                       PropertySpec("pad", "str")))
    log = InMemoryLog([descriptor])
    random_workload(log, "Account", 2000)
    mirror = Mirror(log, KafkaSyncEndpoint(kafka_bootstrap), name=f"sql-{uuid.uuid4().hex[:8]}")
    while mirror.run_once():
        pass
    mirror.stop()
    url = f"sqlite:///{tmp_path / 'accounts.db'}"
    store = SqlStore(url, types=log.types())
    expected = _final_state(log)
    for _ in range(2):  # the second pass is a full replay under a new group
        consumer = OperationConsumer(kafka_bootstrap, topics=[topic],
                                     group_id=f"gs-test-{uuid.uuid4().hex[:8]}",
                                     types=log.types())
        with consumer:
            applied = run_sql_consumer(consumer, store, idle_timeout_s=3.0)
        assert applied == 2000
        for entity, (version, n) in expected.items():
            row = store.get("Account", entity, include_deleted=True)
            assert row is not None and row.version == version
            assert row.deleted == (n is None)
            if n is not None:
                assert row.data is not None and row.data["n"] == n
    store.close()
