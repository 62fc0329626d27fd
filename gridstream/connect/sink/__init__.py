"""The sink connector: Kafka topics → grid caches (the Space or Hazelcast), on Spark.
How it decodes, applies and what it guarantees: ``docs/connectors.md``."""

from gridstream.connect.sink.connector import SinkConnector

__all__ = ["SinkConnector"]
