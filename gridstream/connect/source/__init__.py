"""The source connector: grid caches → Kafka topics, on Spark (``docs/connectors.md``)."""

from gridstream.connect.source.connector import SourceConnector, SourceEvent
from gridstream.connect.source.datasource import FORMAT, GridSourceDataSource, consumer_name

__all__ = ["FORMAT", "GridSourceDataSource", "SourceConnector", "SourceEvent", "consumer_name"]
