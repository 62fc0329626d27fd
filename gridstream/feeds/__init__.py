"""Store feeds: the mirror's Kafka topics → one store each (Cassandra, SQL, a Parquet
change log, a Delta current-state table), checkpointed, applied idempotently by version
(``docs/feeds.md``). A run file's ``[[feed]]`` tables (``[[pipeline]]`` tables without a
``source``, their earlier form, are read as feeds too).
"""

from gridstream.feeds.config import FeedConfig
from gridstream.feeds.feed import BatchReport, StoreFeed

__all__ = ["BatchReport", "FeedConfig", "StoreFeed"]
