"""Kafka → Cassandra: each batch applied by the shared Cassandra mapping, on the executors.

The batch's operations go to Spark's Python workers as Arrow batches (``mapInArrow``);
each worker keeps one ``CassandraWriter`` (prepared statements, ``concurrency`` requests
in flight) per configuration for its lifetime. Many topics and many types map to many
tables, created and evolved by the mapping.

Effectively-once: every statement carries ``USING TIMESTAMP version``, and versions only
grow across the space. Applying a batch twice, or applying an older operation after a
newer one, leaves every cell as the newest operation wrote it, so Spark re-running a
batch after a crash is harmless and no deleted row can come back.
"""

from __future__ import annotations

import functools
import hashlib
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, fields
from typing import TYPE_CHECKING, Any

import orjson

from gridstream.errors import StoreError
from gridstream.operations import Operation, TypeDescriptor
from gridstream.spark import worker
from gridstream.spark._rows import operations_from_arrow
from gridstream.spark.envelope import OPERATION_COLUMNS
from gridstream.spark.sinks.base import BatchSink, SinkResult
from gridstream.spark.types import TypeRegistry
from gridstream.stores.cassandra import (
    CassandraConfig,
    CassandraConnection,
    CassandraWriter,
    WriteCounters,
    connect,
    mapping_from_config,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["CassandraSink", "open_writer"]

_COUNTER_NAMES = tuple(f.name for f in fields(WriteCounters))
_COUNTER_DDL = ", ".join(f"{name} BIGINT" for name in _COUNTER_NAMES)
_ATTEMPTS = 4
_BACKOFF_S = 0.25
_WRITERS: dict[str, tuple[CassandraConnection, CassandraWriter]] = {}
_LOCK = threading.Lock()


def _payload(config: CassandraConfig) -> dict[str, Any]:
    """The config as JSON-able values, secret included (it travels inside the task)."""
    values = config.model_dump(mode="json")
    if config.password is not None:
        values["password"] = config.password.get_secret_value()
    return values


def open_writer(config: CassandraConfig) -> tuple[CassandraConnection, CassandraWriter]:
    """A connection and a writer configured as the mirror's Cassandra endpoint would be."""
    connection = connect(config)
    return connection, CassandraWriter.from_config(connection.session, config,
                                                   mapping_from_config(config))


def _worker_writer(key: str, config_values: Mapping[str, Any]) -> CassandraWriter:
    """The worker process's writer for this configuration (opened once, then reused)."""
    with _LOCK:
        cached = _WRITERS.get(key)
        if cached is None:
            cached = open_writer(CassandraConfig.model_validate(dict(config_values)))
            _WRITERS[key] = cached
        return cached[1]


def _write_partition(key: str, config_values: Mapping[str, Any], types_payload: Mapping[str, Any],
                     batches: Iterator[Any]) -> Iterator[Any]:
    """mapInArrow body: apply every operation of this partition, yield the counts."""
    import pyarrow as pa

    worker.prepare()
    types = TypeRegistry.from_payload(types_payload)
    writer = _worker_writer(key, config_values)
    total = WriteCounters()
    for batch in batches:
        operations = list(operations_from_arrow(batch, types))
        descriptors = types.resolve(op.type_name for op in operations)
        total.add(_apply(writer, operations, descriptors))
    yield pa.RecordBatch.from_pylist([asdict(total)])


def _apply(writer: CassandraWriter, operations: list[Operation],
           descriptors: Mapping[str, TypeDescriptor]) -> WriteCounters:
    """``writer.apply`` retried a few times on ``StoreError``.

    Workers evolving the same table at once can race (one adds a column while another
    prepares a statement using it, or adds the same column); the writer forgets its
    schema cache on failure, so a retry reads the settled schema. Re-applying the same
    operations is harmless (write timestamps are versions). A store that stays down
    still fails the batch after the last attempt.
    """
    for attempt in range(_ATTEMPTS):
        try:
            return writer.apply(operations, descriptors)
        except StoreError:
            if attempt == _ATTEMPTS - 1:
                raise
            time.sleep(_BACKOFF_S * 2**attempt)
    raise AssertionError("unreachable")


class CassandraSink(BatchSink):
    """Applies each batch to one keyspace with the seed's mapping rules."""

    kind = "cassandra"

    def __init__(self, config: CassandraConfig, types: TypeRegistry) -> None:
        self.config = config
        self.types = types
        self.totals = WriteCounters()

    def describe(self) -> str:
        hosts = ",".join(self.config.contact_points)
        return f"cassandra {hosts}:{self.config.port}/{self.config.keyspace}"

    def open(self, spark: SparkSession) -> None:
        """Create the keyspace and the declared types' tables from the driver, once, so
        executors do not race on schema changes for known types."""
        connection, writer = open_writer(self.config)
        try:
            if self.config.create_keyspace:
                writer.schema.ensure_keyspace()
            for descriptor in self.types.declared.values():
                layout = writer.mapping.layout(descriptor)
                table = writer.table_for(descriptor.name)
                id_type = writer.mapping.id_cql_type(descriptor)
                writer.schema.ensure_table(table, layout, id_type, descriptor.indexes)
        finally:
            connection.close()

    def write(self, operations: DataFrame, batch_id: int) -> SinkResult:
        config_values = _payload(self.config)
        key = hashlib.sha256(orjson.dumps(config_values, option=orjson.OPT_SORT_KEYS)).hexdigest()
        body = functools.partial(_write_partition, key, config_values, self.types.to_payload())
        try:
            rows = operations.select(*OPERATION_COLUMNS).mapInArrow(body, _COUNTER_DDL).collect()
        except Exception as exc:
            raise StoreError(f"Cassandra batch {batch_id} failed: {_root(exc)}") from exc
        counters = WriteCounters(**{n: sum(int(r[n]) for r in rows) for n in _COUNTER_NAMES})
        self.totals.add(counters)
        written = counters.operations - counters.skipped_id_only
        return SinkResult(
            operations=counters.operations, applied=written,
            skipped=counters.skipped_id_only, details=asdict(counters),
        )


def _root(exc: BaseException) -> str:
    """A short description of a failed Spark job (its first line)."""
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
