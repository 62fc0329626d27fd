"""Spark: the session with the pinned connectors, Kafka read/write, pipelines."""

from __future__ import annotations

from gridstream.spark.session import DEFAULT_CONF, get_spark

__all__ = ["DEFAULT_CONF", "get_spark"]
