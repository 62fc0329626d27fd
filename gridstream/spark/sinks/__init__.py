"""Store sinks on Spark (of the store feeds and the pipeline API), chosen by ``kind``.

``cassandra`` (the shared Cassandra mapping, on the executors), ``sql`` (SQLite or
PostgreSQL), ``parquet`` (the lake's change log) and ``delta`` (the lake's current-state
table). Every sink is idempotent per batch: a batch Spark runs again changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridstream._lazy import exports
from gridstream.spark.sinks.config import (
    CassandraSinkConfig,
    DeltaSinkConfig,
    ParquetSinkConfig,
    SinkConfig,
    SqlSinkConfig,
)

if TYPE_CHECKING:
    from gridstream.spark.sinks.base import BatchSink, SinkResult
    from gridstream.spark.sinks.cassandra import CassandraSink
    from gridstream.spark.sinks.delta import DeltaSink, current_state
    from gridstream.spark.sinks.parquet import ParquetSink
    from gridstream.spark.sinks.sql import SqlSink
    from gridstream.spark.types import TypeRegistry

_LAZY: dict[str, str] = {
    "BatchSink": "gridstream.spark.sinks.base",
    "SinkResult": "gridstream.spark.sinks.base",
    "CassandraSink": "gridstream.spark.sinks.cassandra",
    "DeltaSink": "gridstream.spark.sinks.delta",
    "current_state": "gridstream.spark.sinks.delta",
    "ParquetSink": "gridstream.spark.sinks.parquet",
    "SqlSink": "gridstream.spark.sinks.sql",
}
"""Each sink imported from its own module on first use (``gridstream._lazy``): SQLAlchemy
only for the sinks that need it."""

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
        from gridstream.spark.sinks.cassandra import CassandraSink
        return CassandraSink(config.cassandra, types)
    if isinstance(config, SqlSinkConfig):
        from gridstream.spark.sinks.sql import SqlSink
        return SqlSink(config, types)
    if isinstance(config, ParquetSinkConfig):
        from gridstream.spark.sinks.parquet import ParquetSink
        return ParquetSink(config.path, compression=config.compression)
    if isinstance(config, DeltaSinkConfig):
        from gridstream.spark.sinks.delta import DeltaSink
        return DeltaSink(config.path, types)
    raise TypeError(f"unknown sink config {type(config).__name__}")

if not TYPE_CHECKING:  # to mypy, the imports above are the names: an unknown one is an error
    __getattr__, __dir__ = exports(__name__, _LAZY)
