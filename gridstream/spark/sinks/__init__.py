"""Store sinks on Spark (of the store feeds and the pipeline API), chosen by ``kind``.

``cassandra`` (the shared Cassandra mapping, on the executors), ``sql`` (SQLite or
PostgreSQL), ``parquet`` (the lake's change log) and ``delta`` (the lake's current-state
table). Every sink is idempotent per batch: a batch Spark runs again changes nothing.
"""

from __future__ import annotations

from gridstream.spark.sinks.base import BatchSink, SinkResult
from gridstream.spark.sinks.cassandra import CassandraSink
from gridstream.spark.sinks.config import (
    CassandraSinkConfig,
    DeltaSinkConfig,
    ParquetSinkConfig,
    SinkConfig,
    SqlSinkConfig,
)
from gridstream.spark.sinks.delta import DeltaSink, current_state
from gridstream.spark.sinks.parquet import ParquetSink
from gridstream.spark.sinks.sql import SqlSink
from gridstream.spark.types import TypeRegistry

__all__ = [
    "BatchSink",
    "CassandraSink",
    "DeltaSink",
    "ParquetSink",
    "SinkResult",
    "SqlSink",
    "create_sink",
    "current_state",
]


def create_sink(config: SinkConfig, types: TypeRegistry) -> BatchSink:
    """The sink a ``[pipeline.sink]`` table describes."""
    if isinstance(config, CassandraSinkConfig):
        return CassandraSink(config.cassandra, types)
    if isinstance(config, SqlSinkConfig):
        return SqlSink(config, types)
    if isinstance(config, ParquetSinkConfig):
        return ParquetSink(config.path, compression=config.compression)
    if isinstance(config, DeltaSinkConfig):
        return DeltaSink(config.path, types)
    raise TypeError(f"unknown sink config {type(config).__name__}")
