"""The Spark pieces every flow shares: the session with the pinned connectors, Kafka's
source options, the exactly-once Kafka writer (``KafkaExactlyOnceWriter``, for
``foreachBatch``), envelope decoding in the JVM, the store sinks (Cassandra, SQL, a
Parquet change log, a Delta current-state table), dead letters, checkpoint ownership,
the Python workers' set-up and the ``Runnable`` contract every flow keeps with the
runner. The flows themselves (store feeds, connectors, API pipelines) are above it.
"""

from __future__ import annotations

from gridstream.spark.dead_letter import ErrorPolicy
from gridstream.spark.envelope import MalformedEnvelopeError, decode_envelopes
from gridstream.spark.kafka_writer import KafkaExactlyOnceWriter
from gridstream.spark.session import DEFAULT_CONF, DELTA_CONF, DELTA_SNAPSHOT_PARTITIONS, get_spark
from gridstream.spark.sinks import (
    BatchSink,
    CassandraSink,
    DeltaSink,
    ParquetSink,
    SinkResult,
    SqlSink,
    create_sink,
    current_state,
)
from gridstream.spark.sinks.config import (
    CassandraSinkConfig,
    DeltaSinkConfig,
    ParquetSinkConfig,
    SqlSinkConfig,
)
from gridstream.spark.types import TypeRegistry, descriptor_from_table, descriptor_to_table

__all__ = [
    "DEFAULT_CONF",
    "DELTA_CONF",
    "DELTA_SNAPSHOT_PARTITIONS",
    "BatchSink",
    "CassandraSink",
    "CassandraSinkConfig",
    "DeltaSink",
    "DeltaSinkConfig",
    "ErrorPolicy",
    "KafkaExactlyOnceWriter",
    "MalformedEnvelopeError",
    "ParquetSink",
    "ParquetSinkConfig",
    "SinkResult",
    "SqlSink",
    "SqlSinkConfig",
    "TypeRegistry",
    "create_sink",
    "current_state",
    "decode_envelopes",
    "descriptor_from_table",
    "descriptor_to_table",
    "get_spark",
]
