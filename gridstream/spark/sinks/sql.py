"""Kafka → SQL (SQLite file or PostgreSQL): each batch applied by the SQL store.

The batch's operations come to the driver as Arrow, grouped by type and entity, and
``gridstream.stores.sql.SqlStore`` applies them in one database transaction (fold in
version order, upsert guarded by version, tombstones for deletes). A re-run batch finds
every operation stale and changes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from gridstream.fold import OpRow
from gridstream.spark.sinks.base import BatchSink, SinkResult
from gridstream.spark.types import TypeRegistry
from gridstream.stores.sql import SqlStore, SqlStoreConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["SqlSink"]


class SqlSink(BatchSink):
    """Applies each batch to a SQL database (see the module docstring)."""

    kind = "sql"

    def __init__(self, config: SqlStoreConfig, types: TypeRegistry) -> None:
        self.types = types
        self.store = SqlStore(config, types=types.declared)

    def describe(self) -> str:
        return f"sql {self.store.describe()}"

    def close(self) -> None:
        self.store.close()

    def write(self, operations: DataFrame, batch_id: int) -> SinkResult:
        table = operations.select("type", "id", "version", "op", "ts", "data", "removed").toArrow()
        result = self.store.apply_rows(_group(table))
        return SinkResult(operations=table.num_rows, applied=result.applied, stale=result.stale)


def _group(table: Any) -> dict[str, dict[str, list[OpRow]]]:
    """Arrow table → type → id → operations."""
    cols = {name: table.column(name).to_pylist() for name in table.column_names}
    grouped: dict[str, dict[str, list[OpRow]]] = defaultdict(lambda: defaultdict(list))
    for i in range(table.num_rows):
        row = OpRow(cols["op"][i], int(cols["version"][i]), int(cols["ts"][i]), cols["data"][i],
                    tuple(cols["removed"][i] or ()))
        grouped[cols["type"][i]][cols["id"][i]].append(row)
    return grouped
