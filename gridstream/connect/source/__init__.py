"""The source connector: grid caches → Kafka topics, on Spark (``docs/connectors.md``)."""

from gridstream._optional import require

for _module in ("pyspark", "pyarrow"):  # before the modules that import them
    require(_module, "the source connector")

from gridstream.connect.source.connector import SourceConnector, SourceEvent  # noqa: E402
from gridstream.connect.source.datasource import FORMAT, GridSourceDataSource, consumer_name  # noqa: E402

__all__ = ["FORMAT", "GridSourceDataSource", "SourceConnector", "SourceEvent", "consumer_name"]
