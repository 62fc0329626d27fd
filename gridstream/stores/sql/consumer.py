"""Kafka → SQL: decoded operations applied to a ``SqlStore``, offsets committed after."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from gridstream.stores.sql.store import SqlStore

if TYPE_CHECKING:
    from gridstream.consumer import OperationConsumer

__all__ = ["run_sql_consumer"]

_POLL_S = 0.5


def run_sql_consumer(consumer: OperationConsumer, store: SqlStore, *,
                     max_records: int = 1000, idle_timeout_s: float | None = None,
                     stop: threading.Event | None = None) -> int:
    """Consume → store (one database transaction per poll) → commit offsets; returns the
    operations consumed.

    Offsets are committed only after the database commit, so a crash replays the last
    poll, which the version guard makes harmless. A failed poll raises (``StoreError``)
    with its offsets uncommitted."""
    total, idle = 0, 0.0
    while stop is None or not stop.is_set():
        records = consumer.consume(max_records, timeout_s=_POLL_S)
        if not records:
            idle += _POLL_S
            if idle_timeout_s is not None and idle >= idle_timeout_s:
                break
            consumer.commit()  # skipped and tombstone records still advance
            continue
        idle = 0.0
        store.apply(record.envelope for record in records)
        consumer.commit()
        total += len(records)
    return total
