"""Typed configuration of the store sinks (``cassandra``, ``sql``, ``parquet``,
``delta``): a store feed's ``sink`` table and an API pipeline's store sinks."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from gridstream._config import StrictModel
from gridstream.stores.cassandra import CassandraConfig

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


class SqlSinkConfig(StrictModel):
    """``kind = "sql"``: ``url`` is ``sqlite:///path.db`` or ``postgresql://...``."""

    kind: Literal["sql"] = "sql"
    """``sql``: one table per type in SQLite or PostgreSQL, current state and tombstones."""
    url: SecretStr
    """The database: ``sqlite:///relative.db``, ``sqlite:////absolute.db`` or
    ``postgresql://user:pw@host/db``; kept secret (never printed)."""
    table_prefix: str = ""
    """Starts every type's table name (``shop.Order`` → prefix + ``shop_Order``); stores
    with other prefixes on the same database never share a table."""
    create_tables: bool = True
    """Create a type's table when it is first needed; ``false``: each type's table must
    exist already (the ``gs_tables`` registry is still created)."""

    @field_validator("url")
    @classmethod
    def _scheme(cls, value: SecretStr) -> SecretStr:
        scheme = value.get_secret_value().split("://", 1)[0].split("+", 1)[0]
        if scheme not in ("sqlite", "postgresql", "postgres"):
            raise ValueError("url must start with sqlite:/// or postgresql://")
        return value


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
