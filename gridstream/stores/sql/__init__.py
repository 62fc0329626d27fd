"""The SQL store (SQLite or PostgreSQL): one table per type holding each entity's current
state as wire JSON, upserts guarded by version, deletes kept as tombstones.

Used by the SQL consumer (``run_sql_consumer``) and the Spark store feeds'
``kind = "sql"`` sink; see ``store`` for the contract.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridstream._lazy import exports
from gridstream.stores.sql.config import SqlStoreConfig

if TYPE_CHECKING:
    from gridstream.stores.sql.consumer import run_sql_consumer
    from gridstream.stores.sql.store import (
        ApplyResult,
        Batch,
        SqlStore,
        StoredRow,
        group,
        op_row,
    )

_LAZY: dict[str, str] = {
    "run_sql_consumer": "gridstream.stores.sql.consumer",
    **dict.fromkeys(["ApplyResult", "Batch", "SqlStore", "StoredRow", "group", "op_row"],
                    "gridstream.stores.sql.store"),
}
"""Each name imported from its own module on first use (``gridstream._lazy``): a config
model's import does not import SQLAlchemy."""

__all__ = ["ApplyResult", "Batch", "SqlStore", "SqlStoreConfig", "StoredRow", "group",
           "op_row", "run_sql_consumer"]

if not TYPE_CHECKING:  # to mypy, the imports above are the names: an unknown one is an error
    __getattr__, __dir__ = exports(__name__, _LAZY)
