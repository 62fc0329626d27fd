"""Spark: the session with the pinned connectors, and the store pipelines.

``KafkaExactlyOnceWriter`` writes micro-batches to Kafka exactly once (``foreachBatch``).
Store pipelines read the mirror's Kafka topics with Structured Streaming, decode the
operation envelopes in the JVM, and apply them idempotently (by version) to Cassandra,
a SQL database, a Parquet change log or a Delta current-state table.
"""

from __future__ import annotations

from gridstream.spark.config import (
    CassandraSinkConfig,
    DeltaSinkConfig,
    ParquetSinkConfig,
    PipelineConfig,
    SqlSinkConfig,
)
from gridstream.spark.dead_letter import ErrorPolicy
from gridstream.spark.envelope import MalformedEnvelopeError, decode_envelopes
from gridstream.spark.kafka_writer import KafkaExactlyOnceWriter
from gridstream.spark.pipeline import BatchReport, StorePipeline
from gridstream.spark.session import DEFAULT_CONF, DELTA_CONF, get_spark
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
from gridstream.spark.types import TypeRegistry, descriptor_from_table, descriptor_to_table

__all__ = [
    "DEFAULT_CONF",
    "DELTA_CONF",
    "BatchReport",
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
    "PipelineConfig",
    "SinkResult",
    "SqlSink",
    "SqlSinkConfig",
    "StorePipeline",
    "TypeRegistry",
    "create_sink",
    "current_state",
    "decode_envelopes",
    "descriptor_from_table",
    "descriptor_to_table",
    "get_spark",
]
