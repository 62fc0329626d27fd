"""Store mappings shared by the mirror endpoints and the Spark store pipelines.

Each store has its own subpackage (``gridstream.stores.cassandra``,
``gridstream.stores.sql``); what a mapping
decides (table names, columns, value encodings) is decided once here, so that every
path writing a store and every path reading it back agree.
"""

from __future__ import annotations

__all__ = ["cassandra", "sql"]
