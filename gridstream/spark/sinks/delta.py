"""Kafka → lake current state: a Delta table maintained with a version-guarded MERGE.

One Delta table holds every type's current state, partitioned by ``type``::

    type STRING, id STRING, version BIGINT, deleted BOOLEAN, op STRING, ts BIGINT,
    data STRING (the entry as JSON)

Per batch: the stored state of the batch's entities is joined in, each entity's
operations are folded in version order (Arrow batches in Spark's Python workers, see
``gridstream.fold``), and the changed states are merged with
``WHEN MATCHED AND t.version < s.version THEN UPDATE ... WHEN NOT MATCHED THEN INSERT``.
Deletes stay as tombstones (``deleted`` true) so a late replay cannot resurrect an
entity; ``current_state`` hides them. A MERGE is one Delta commit, so a batch is applied
whole or not at all, and a re-run batch finds every operation stale.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from gridstream._optional import require
from gridstream.errors import StoreError
from gridstream.fold import EntityState, OpRow, fold
from gridstream.spark import worker
from gridstream.spark.sinks.base import BatchSink, SinkResult
from gridstream.spark.types import TypeRegistry

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["STATE_DDL", "DeltaSink", "current_state"]

STATE_DDL = (
    "type STRING, id STRING, version BIGINT, deleted BOOLEAN, op STRING, ts BIGINT, data STRING"
)
_FOLD_DDL = STATE_DDL + ", applied BIGINT, stale BIGINT"


def _delta_table() -> Any:
    return require("delta.tables", "the delta sink").DeltaTable


def _fold_partition(fixed: Mapping[str, list[str]], batches: Iterator[Any]) -> Iterator[Any]:
    """mapInArrow body: rows sorted by (type, id, is_base desc, version) → new states."""
    import pyarrow as pa

    worker.prepare()
    out: list[dict[str, Any]] = []
    key: tuple[str, str] | None = None
    base: EntityState | None = None
    ops: list[OpRow] = []

    def flush() -> None:
        if key is None:
            return
        result = fold(base, ops, frozenset(fixed.get(key[0], ())))
        if result.state is not None or result.stale:
            s = result.state
            out.append({
                "type": key[0], "id": key[1], "version": s.version if s else None,
                "deleted": s.deleted if s else None, "op": s.op if s else None,
                "ts": s.ts if s else None, "data": s.data if s else None,
                "applied": result.applied, "stale": result.stale,
            })

    for batch in batches:
        cols = {n: batch.column(n).to_pylist() for n in batch.schema.names}
        for i in range(batch.num_rows):
            row_key = (cols["type"][i], cols["id"][i])
            if row_key != key:
                flush()
                key, base, ops = row_key, None, []
            if cols["is_base"][i]:
                base = EntityState(cols["version"][i], bool(cols["deleted"][i]), cols["op"][i],
                                   cols["ts"][i], cols["data"][i])
            else:
                ops.append(OpRow(cols["op"][i], cols["version"][i], cols["ts"][i],
                                 cols["data"][i], tuple(cols["removed"][i] or ())))
    flush()
    yield pa.RecordBatch.from_pylist(out, schema=_arrow_schema())


def _arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema([
        ("type", pa.string()), ("id", pa.string()), ("version", pa.int64()),
        ("deleted", pa.bool_()), ("op", pa.string()), ("ts", pa.int64()),
        ("data", pa.string()), ("applied", pa.int64()), ("stale", pa.int64()),
    ])


class DeltaSink(BatchSink):
    """Maintains the current-state Delta table at ``path`` (see the module docstring)."""

    kind = "delta"

    def __init__(self, path: str, types: TypeRegistry) -> None:
        self.path = path
        self.types = types
        self._spark: SparkSession | None = None

    def describe(self) -> str:
        return f"delta {self.path}"

    def open(self, spark: SparkSession) -> None:
        """Create the table if it does not exist."""
        self._spark = spark
        delta = _delta_table()
        builder = delta.createIfNotExists(spark).location(self.path)
        for name, kind in (f.split(" ", 1) for f in STATE_DDL.split(", ")):
            builder = builder.addColumn(name, kind, nullable=name in ("data",))
        builder.partitionedBy("type").execute()

    def write(self, operations: DataFrame, batch_id: int) -> SinkResult:
        import pyspark.sql.functions as F

        spark = operations.sparkSession
        target = _delta_table().forPath(spark, self.path)
        ops = operations.select(
            "type", "id", "version", "op", "ts", "data", "removed",
            F.lit(None).cast("boolean").alias("deleted"), F.lit(False).alias("is_base"),
        )
        keys = ops.select("type", "id").distinct()
        base = target.toDF().join(keys, ["type", "id"], "left_semi").select(
            "type", "id", "version", "op", "ts", "data",
            F.array().cast("array<string>").alias("removed"), "deleted",
            F.lit(True).alias("is_base"),
        )
        fixed = {n: sorted(d.declared_paths()) for n, d in self.types.declared.items()}
        folded = (
            ops.unionByName(base)
            .repartition("type", "id")
            .sortWithinPartitions("type", "id", F.col("is_base").desc(), "version")
            .mapInArrow(functools.partial(_fold_partition, fixed), _FOLD_DDL)
            .persist()
        )
        try:
            totals = folded.agg(F.count("*").alias("n"), F.sum("applied").alias("applied"),
                                F.sum("stale").alias("stale")).first()
            changes = folded.where(F.col("version").isNotNull()).drop("applied", "stale")
            (target.alias("t")
             .merge(changes.alias("s"), "t.type = s.type AND t.id = s.id")
             .whenMatchedUpdateAll(condition="t.version < s.version")
             .whenNotMatchedInsertAll()
             .execute())
        except Exception as exc:
            raise StoreError(f"Delta MERGE of batch {batch_id} into {self.path} failed") from exc
        finally:
            folded.unpersist()
        applied = int(totals["applied"] or 0) if totals else 0
        stale = int(totals["stale"] or 0) if totals else 0
        return SinkResult(operations=applied + stale, applied=applied, stale=stale)


def current_state(spark: SparkSession, path: str, type_name: str | None = None, *,
                  include_deleted: bool = False) -> DataFrame:
    """The live entities of the current-state table (optionally of one type)."""
    import pyspark.sql.functions as F

    frame = spark.read.format("delta").load(path)
    if type_name is not None:
        frame = frame.where(F.col("type") == type_name)
    if not include_deleted:
        frame = frame.where(~F.col("deleted"))
    return frame
