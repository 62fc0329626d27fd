"""Kafka connectors for grids, on Spark: a source (caches → topics) and a sink (topics →
caches), for the Space and for Hazelcast. See ``docs/connectors.md``."""

from gridstream.connect.base import Connector, ConnectorReport
from gridstream.connect.config import (
    ConverterConfig,
    DeliveryGuarantee,
    ErrorHandling,
    FailoverPolicy,
    KeyPolicy,
    SinkConnectorConfig,
    SourceConnectorConfig,
    TransformConfig,
)

__all__ = [
    "Connector",
    "ConnectorReport",
    "ConverterConfig",
    "DeliveryGuarantee",
    "ErrorHandling",
    "FailoverPolicy",
    "KeyPolicy",
    "SinkConnectorConfig",
    "SourceConnectorConfig",
    "TransformConfig",
]
