"""Store mappings shared by the mirror endpoints and the Spark store feeds.

Each store has its own subpackage (``gridstream.stores.cassandra``,
``gridstream.stores.sql``); what a mapping
decides (table names, columns, value encodings) is decided once here, so that every
path writing a store and every path reading it back agree. ``naming`` gives every store
one table per type name over the store's persisted type → table records.
"""

from __future__ import annotations

__all__ = ["cassandra", "naming", "sql"]
