"""The Spark pieces every flow shares: the session with the pinned connectors, Kafka's
source options, the exactly-once Kafka writer (``KafkaExactlyOnceWriter``, for
``foreachBatch``), envelope decoding in the JVM, the store sinks (Cassandra, SQL, a
Parquet change log, a Delta current-state table), dead letters, checkpoint ownership,
the Python workers' set-up and the ``Runnable`` contract every flow keeps with the
runner. The flows themselves (store feeds, connectors, API pipelines) are above it.

Each name is imported from its own module on first use (``gridstream._lazy``): a Python
worker that imports one small module of this package does not import every sink.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridstream._lazy import exports

if TYPE_CHECKING:
    from gridstream.spark.dead_letter import ErrorPolicy
    from gridstream.spark.envelope import MalformedEnvelopeError, decode_envelopes
    from gridstream.spark.kafka_writer import KafkaExactlyOnceWriter
    from gridstream.spark.session import (
        DEFAULT_CONF,
        DELTA_CONF,
        DELTA_SNAPSHOT_PARTITIONS,
        get_spark,
    )
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

_LAZY: dict[str, str] = {
    "ErrorPolicy": "gridstream.spark.dead_letter",
    "MalformedEnvelopeError": "gridstream.spark.envelope",
    "decode_envelopes": "gridstream.spark.envelope",
    "KafkaExactlyOnceWriter": "gridstream.spark.kafka_writer",
    "DEFAULT_CONF": "gridstream.spark.session",
    "DELTA_CONF": "gridstream.spark.session",
    "DELTA_SNAPSHOT_PARTITIONS": "gridstream.spark.session",
    "get_spark": "gridstream.spark.session",
    **dict.fromkeys(["BatchSink", "CassandraSink", "DeltaSink", "ParquetSink", "SinkResult",
                     "SqlSink", "create_sink", "current_state"], "gridstream.spark.sinks"),
    **dict.fromkeys(["CassandraSinkConfig", "DeltaSinkConfig", "ParquetSinkConfig",
                     "SqlSinkConfig"], "gridstream.spark.sinks.config"),
    **dict.fromkeys(["TypeRegistry", "descriptor_from_table", "descriptor_to_table"],
                     "gridstream.spark.types"),
}
"""Each name and the module it lives in."""

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

if not TYPE_CHECKING:  # to mypy, the imports above are the names: an unknown one is an error
    __getattr__, __dir__ = exports(__name__, _LAZY)
