"""gridstream: connect an in-memory data grid with Apache Kafka and stores, on Spark.

The names a user types come from here: ``from gridstream import Space, Mirror,
KafkaSyncEndpoint, Pipeline``. Each is imported from its own module on first use
(PEP 562), so ``import gridstream`` stays cheap and a name whose optional extra is not
installed fails only when it is asked for, naming the extra to install. Every name here
imports with the core dependencies alone (``from gridstream import *`` too); the
Hazelcast adapter is ``gridstream.grid.hazelcast``'s, which needs the ``hazelcast``
extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridstream._lazy import exports
from gridstream.errors import GridstreamError
from gridstream.operations import Bulk, Operation, OpType, PropertySpec, TypeDescriptor

if TYPE_CHECKING:
    from gridstream.connect import SinkConnectorConfig, SourceConnectorConfig, build_connector
    from gridstream.consumer import OperationConsumer
    from gridstream.feeds import FeedConfig, StoreFeed
    from gridstream.mirror import (
        KafkaEndpointConfig,
        KafkaSyncEndpoint,
        Mirror,
        RetryPolicy,
        UndeliverablePolicy,
    )
    from gridstream.model import SpaceDocument, space_class
    from gridstream.pipeline import (
        GridSinks,
        GridSources,
        Guarantee,
        KafkaSinks,
        KafkaSources,
        Pipeline,
        Sinks,
        StoreSinks,
        entry,
    )
    from gridstream.reconcile import compare
    from gridstream.run import PipelineRunner
    from gridstream.space import Space
    from gridstream.spark import get_spark
    from gridstream.stores.cassandra import CassandraConfig, CassandraSyncEndpoint
    from gridstream.stores.sql import SqlStore

_LAZY: dict[str, str] = {
    # the grid and its documents
    "Space": "gridstream.space",
    "SpaceDocument": "gridstream.model",
    "space_class": "gridstream.model",
    # the grid → Kafka mirror, and reading what it wrote
    "Mirror": "gridstream.mirror",
    "KafkaEndpointConfig": "gridstream.mirror",
    "KafkaSyncEndpoint": "gridstream.mirror",
    "RetryPolicy": "gridstream.mirror",
    "UndeliverablePolicy": "gridstream.mirror",
    "OperationConsumer": "gridstream.consumer",
    # stores
    "CassandraConfig": "gridstream.stores.cassandra",
    "CassandraSyncEndpoint": "gridstream.stores.cassandra",
    "SqlStore": "gridstream.stores.sql",
    # flows on Spark
    "get_spark": "gridstream.spark",
    "PipelineRunner": "gridstream.run",
    "StoreFeed": "gridstream.feeds",
    "FeedConfig": "gridstream.feeds",
    "SourceConnectorConfig": "gridstream.connect",
    "SinkConnectorConfig": "gridstream.connect",
    "build_connector": "gridstream.connect",
    "Pipeline": "gridstream.pipeline",
    "Guarantee": "gridstream.pipeline",
    "entry": "gridstream.pipeline",
    "KafkaSources": "gridstream.pipeline",
    "KafkaSinks": "gridstream.pipeline",
    "GridSources": "gridstream.pipeline",
    "GridSinks": "gridstream.pipeline",
    "StoreSinks": "gridstream.pipeline",
    "Sinks": "gridstream.pipeline",
    # checking that copies agree
    "compare": "gridstream.reconcile",
}
"""Each lazily imported name and the module it lives in (its one home)."""

__all__ = [
    "Bulk",
    "CassandraConfig",
    "CassandraSyncEndpoint",
    "GridSinks",
    "GridSources",
    "GridstreamError",
    "Guarantee",
    "KafkaEndpointConfig",
    "KafkaSinks",
    "KafkaSources",
    "KafkaSyncEndpoint",
    "Mirror",
    "OpType",
    "Operation",
    "OperationConsumer",
    "Pipeline",
    "FeedConfig",
    "PipelineRunner",
    "PropertySpec",
    "RetryPolicy",
    "SinkConnectorConfig",
    "Sinks",
    "SourceConnectorConfig",
    "Space",
    "SpaceDocument",
    "SqlStore",
    "StoreFeed",
    "StoreSinks",
    "TypeDescriptor",
    "UndeliverablePolicy",
    "build_connector",
    "compare",
    "entry",
    "get_spark",
    "space_class",
    "__version__",
]

__version__ = "0.1.0"


if not TYPE_CHECKING:  # to mypy, the imports above are the names: an unknown one is an error
    __getattr__, __dir__ = exports(__name__, _LAZY)
