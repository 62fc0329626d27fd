"""What the JVM tells the exactly-once writer of a batch (``kafka_writer``): each row's
two hashes, each partition's content (rows and hash sums, one JVM-only pass) and whether
the batch reads a shuffle."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridstream.spark._kafka_slots import H1, H2, content_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["content", "hashes", "reads_shuffle"]


def hashes(rows: DataFrame) -> DataFrame:
    """``rows`` with two hashes of each row (order-free sums of them know a partition)."""
    import pyspark.sql.functions as F

    columns = [F.col(c) for c in rows.columns]
    return rows.select("*", F.xxhash64(*columns).alias(H1), F.hash(*columns).alias(H2))


def content(hashed: DataFrame) -> list[tuple[int, int, str]]:
    """Each partition's rows and content (``content_of``: rows and hash sums), in the
    JVM (one pass)."""
    import pyspark.sql.functions as F

    stats = (hashed.select(F.spark_partition_id().alias("p"), H1, H2).groupBy("p")
             .agg(F.count(F.lit(1)).alias("n"),
                  F.sum(F.col(H1).cast("decimal(38,0)")).alias("h1"),
                  F.sum(F.col(H2).cast("decimal(38,0)")).alias("h2")).collect())
    return [(int(r.p), int(r.n), content_of(int(r.n), int(r.h1), int(r.h2))) for r in stats]


def reads_shuffle(rows: DataFrame) -> bool:
    """Whether the batch reads a shuffle (or cannot be told). When a shuffle's output is
    lost Spark runs the writer's stage again, its tasks' attempts numbered from 0
    (PySpark shows no stage attempt): a one-pass task of such a batch fences and reads
    its marker as a retry does. Inside ``foreachBatch`` the batch's plan is a scan of
    the query's RDD (no ``Exchange`` to see): its lineage names the shuffle."""
    try:
        execution = rows._jdf.queryExecution()
        plan = str(execution.executedPlan().toString())
        lineage = str(execution.toRdd().toDebugString())
    except Exception:  # noqa: BLE001 - no plan to read: assume the worst
        return True
    return "Exchange" in plan or "Shuffled" in lineage
