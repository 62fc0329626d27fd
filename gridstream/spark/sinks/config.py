"""Typed configuration of the store sinks (``cassandra``, ``sql``, ``parquet``,
``delta``): a store feed's ``sink`` table and an API pipeline's store sinks."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from gridstream._config import StrictModel
from gridstream.stores.cassandra import CassandraConfig
from gridstream.stores.sql.config import SqlStoreConfig

__all__ = ["CassandraSinkConfig", "DeltaSinkConfig", "ParquetSinkConfig", "SinkConfig",
           "SqlSinkConfig"]


class CassandraSinkConfig(StrictModel):
    """``kind = "cassandra"``; every other key is a ``CassandraConfig`` field."""

    kind: Literal["cassandra"] = "cassandra"
    """``cassandra``: one table per type, written with the shared Cassandra mapping."""
    cassandra: CassandraConfig
    """The cluster, keyspace and mapping options (``CassandraConfig``); in a run file they
    sit next to ``kind`` in the ``sink`` table."""

    @model_validator(mode="before")
    @classmethod
    def _nest(cls, values: Any) -> Any:
        if isinstance(values, dict) and "cassandra" not in values:
            rest = {k: v for k, v in values.items() if k != "kind"}
            return {"kind": values.get("kind", "cassandra"), "cassandra": rest}
        return values


class SqlSinkConfig(SqlStoreConfig):
    """``kind = "sql"``; every other key is a ``SqlStoreConfig`` option."""

    kind: Literal["sql"] = "sql"
    """``sql``: one table per type in SQLite or PostgreSQL, current state and tombstones."""


class ParquetSinkConfig(StrictModel):
    """``kind = "parquet"``: the change log's root directory (any Hadoop path)."""

    kind: Literal["parquet"] = "parquet"
    """``parquet``: the lake's change log, every operation, partitioned by ``type``,
    ``date`` and ``topic``."""
    path: str = Field(min_length=1)
    """The change log's root directory (any Hadoop path); several pipelines may write to
    one path, each query replacing only its own files."""
    compression: Literal["zstd", "snappy", "gzip", "lz4", "none"] = "zstd"
    """The compression codec of the Parquet files (``none``: uncompressed)."""


class DeltaSinkConfig(StrictModel):
    """``kind = "delta"``: the current-state table's location."""

    kind: Literal["delta"] = "delta"
    """``delta``: the lake's current-state table (Delta Lake), maintained with ``MERGE``."""
    path: str = Field(min_length=1)
    """The location of the Delta table (created if missing) holding every type's current
    state and tombstones, partitioned by ``type``."""


SinkConfig = Annotated[
    CassandraSinkConfig | SqlSinkConfig | ParquetSinkConfig | DeltaSinkConfig,
    Field(discriminator="kind"),
]
