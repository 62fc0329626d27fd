"""The SQL store (SQLite or PostgreSQL): one table per type holding each entity's current
state as wire JSON, upserts guarded by version, deletes kept as tombstones.

Used by the SQL consumer (``run_sql_consumer``) and the Spark store feeds'
``kind = "sql"`` sink; see ``store`` for the contract.
"""

from __future__ import annotations

from gridstream.stores.sql.config import SqlStoreConfig
from gridstream.stores.sql.consumer import run_sql_consumer
from gridstream.stores.sql.store import ApplyResult, Batch, SqlStore, StoredRow, group, op_row

__all__ = ["ApplyResult", "Batch", "SqlStore", "SqlStoreConfig", "StoredRow", "group",
           "op_row", "run_sql_consumer"]
