"""Kafka connectors for grids, on Spark: a source (caches → topics) and a sink (topics →
caches), for the Space and for Hazelcast. See ``docs/connectors.md``."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gridstream.connect.base import Connector, ConnectorReport
from gridstream.connect.config import (
    ConnectorConfig,
    ConverterConfig,
    DeliveryGuarantee,
    ErrorHandling,
    FailoverPolicy,
    KeyPolicy,
    SinkConnectorConfig,
    SourceConnectorConfig,
    TransformConfig,
)
from gridstream.errors import ConnectorError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from gridstream.space import Space

__all__ = [
    "Connector",
    "ConnectorConfig",
    "ConnectorReport",
    "ConverterConfig",
    "DeliveryGuarantee",
    "ErrorHandling",
    "FailoverPolicy",
    "KeyPolicy",
    "SinkConnectorConfig",
    "SourceConnectorConfig",
    "TransformConfig",
    "build_connector",
    "change_stream",
]


def build_connector(config: SourceConnectorConfig | SinkConnectorConfig, *,
                    bootstrap_servers: str, kafka_properties: Mapping[str, Any],
                    allowed_modules: Sequence[str], space: Space | None = None) -> Connector:
    """The connector ``config.kind`` names (imported only when used: each pulls in Spark
    and its grid's client). ``kafka_properties`` are the run's, with the connector's own
    on top (``gridstream.run.config.connector_kafka``); ``space``: an open Space of
    this process to read from / write through."""
    # by module name: the implementations live in their own packages
    # (gridstream.connect.source / gridstream.connect.sink)
    module, cls = (("gridstream.connect.source", "SourceConnector") if config.kind == "source"
                   else ("gridstream.connect.sink", "SinkConnector"))
    factory = getattr(importlib.import_module(module), cls)
    connector = factory(config, bootstrap_servers=bootstrap_servers,
                        kafka_properties=kafka_properties, allowed_modules=allowed_modules,
                        space=space)
    if not isinstance(connector, Connector):
        raise ConnectorError(f"{module}.{cls} is not a Connector")
    return connector


def change_stream(spark: SparkSession, config: SourceConnectorConfig,
                  allowed_modules: Sequence[str]) -> DataFrame:
    """The source connector's change rows of ``config``'s caches as a streaming DataFrame
    (its Python data source, ``gridstream-grid``: positions in the query's checkpoint,
    snapshots, discovery, lost positions), for a flow that reads a grid's changes without
    the connector's Kafka half (the pipeline API's ``GridSources.changes``). Its columns
    are the data source's (``gridstream.connect.source.datasource``)."""
    from gridstream.connect.source.datasource import FORMAT, register, source_options

    register(spark)
    return (spark.readStream.format(FORMAT)
            .options(**source_options(config, allowed_modules)).load())
