"""Kafka → lake change log: every operation appended to Parquet, partitioned by type,
date and source topic.

Layout: ``<path>/type=<type>/date=<yyyy-mm-dd>/topic=<topic>/<file>``, each file named
``batch-<batch id>-<query id>-<n>.parquet``; ``date`` is the operation's commit time
(UTC). Columns: the Kafka position (``topic``, from the directory, ``kafka_partition``,
``offset``), the envelope (``op type id version txn ts partition``), ``data`` as JSON
text and ``removed``. The topic is a directory rather than a
column of every row: a batch holds few topics, and writing the same string into every row
cost 3–5 % of the pipeline's CPU time.

A batch is written to ``<path>/_staging/query=<query id>/batch=<id>`` and then moved into
place under names derived from its query id and batch id, after removing any file an
earlier attempt of the same batch of the same query left. A re-run batch therefore
replaces its own files instead of duplicating them (the batch's rows are the same: Spark
re-reads the same offsets). The query id is the streaming query's (kept by its
checkpoint): batch ids restart at 0 with a new checkpoint and repeat across pipelines, so
another pipeline writing to the same path, or a run on a reset checkpoint, never touches
this query's files. Readers skip ``_staging``, as Spark skips every path starting with
``_``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from gridstream.errors import StoreError
from gridstream.spark.sinks.base import BatchSink, SinkResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["CHANGE_LOG_COLUMNS", "PARTITION_COLUMNS", "ParquetSink", "change_log_frame"]

CHANGE_LOG_COLUMNS = (
    "topic", "kafka_partition", "offset", "op", "type", "id", "version", "txn", "ts",
    "partition", "data", "removed", "date",
)
PARTITION_COLUMNS = ("type", "date", "topic")
"""The change log's directory levels, in order."""
_LEVELS = "/".join(f"{name}=*" for name in PARTITION_COLUMNS)
"""A glob of every partition directory."""


def change_log_frame(operations: DataFrame) -> DataFrame:
    """The change-log rows of decoded operations (adds the ``date`` partition column)."""
    columns = [f"`{name}`" for name in CHANGE_LOG_COLUMNS if name != "date"]
    return operations.selectExpr(*columns, "to_date(timestamp_millis(`ts`)) AS date")


class ParquetSink(BatchSink):
    """Appends each batch to the change log at ``path`` (see the module docstring)."""

    kind = "parquet"
    single_pass = True  # one write job; a failed job leaves only ``_staging`` behind

    def __init__(self, path: str, *, compression: str = "zstd") -> None:
        self.path = path.rstrip("/")
        self.compression = compression
        self.query_id: str | None = None

    def bind_query(self, query_id: str | None) -> None:
        self.query_id = query_id

    def describe(self) -> str:
        return f"parquet {self.path}"

    def open(self, spark: SparkSession) -> None:
        """Refuse a path that holds a change log of the earlier layout (files directly
        under ``type=…/date=…``): Spark cannot read the two layouts as one table."""
        fs, path_cls = _filesystem(spark, self.path)
        if fs.globStatus(path_cls(f"{self.path}/type=*/date=*/batch-*.parquet")):
            raise StoreError(
                f"{self.path} holds a change log of the earlier layout (type=…/date=…/"
                f"<file>, topic inside the files); this sink writes type=…/date=…/topic=…/. "
                f"Point the parquet sink at a new path")

    def write(self, operations: DataFrame, batch_id: int) -> SinkResult:
        import pyspark.sql.functions as F
        from pyspark.sql import Observation

        spark = operations.sparkSession
        query = self.query_id
        if query is None:
            raise StoreError(
                f"change-log batch {batch_id} for {self.path} has no query id: file names "
                f"include it (batch ids repeat across queries); outside a streaming query "
                f"pass one, e.g. process_batch(frame, batch_id, query_id='replay-1')")
        staging = f"{self.path}/_staging/query={query}/batch={batch_id}"
        rows = Observation()
        frame = change_log_frame(operations).observe(rows, F.count(F.lit(1)).alias("rows"))
        try:
            (frame.write.mode("overwrite").option("compression", self.compression)
             .partitionBy(*PARTITION_COLUMNS).parquet(staging))
            moved = _publish(spark, self.path, staging, f"batch-{batch_id:012d}-{query}-")
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"writing change-log batch {batch_id} to {self.path} failed") \
                from exc
        count = int(rows.get["rows"])
        return SinkResult(operations=count, applied=count, details={"files": moved})


def _publish(spark: SparkSession, root: str, staging: str, prefix: str) -> int:
    """Move the staged files into their partitions as ``<prefix><n>.parquet``, after
    deleting whatever an earlier attempt of the same batch (same ``prefix``: batch and
    query) published."""
    fs, path_cls = _filesystem(spark, staging)
    jvm: Any = spark.sparkContext._jvm
    stat2paths = jvm.org.apache.hadoop.fs.FileUtil.stat2Paths
    stage_path = path_cls(staging)
    # the glob also matches another query whose id extends this one ("q" and "q-1"):
    # only ``<prefix><digits>.parquet`` is this batch's own
    own = re.compile(re.escape(prefix) + r"[0-9]+\.parquet")
    old = fs.globStatus(path_cls(f"{root}/{_LEVELS}/{prefix}*"))
    for path in stat2paths(old) if old else []:
        if own.fullmatch(path.getName()):
            fs.delete(path, False)
    stage_root = fs.makeQualified(stage_path).toString()
    found = fs.globStatus(path_cls(f"{staging}/{_LEVELS}/*.parquet"))
    listed = (p.toString() for p in (stat2paths(found) if found else []))
    staged = sorted(p for p in listed if not p[p.rindex("/") + 1:].startswith(("_", ".")))
    made: set[str] = set()
    for n, source in enumerate(staged):
        rel = source[len(stage_root) + 1:source.rindex("/")]
        if rel not in made:
            fs.mkdirs(path_cls(f"{root}/{rel}"))
            made.add(rel)
        if not fs.rename(path_cls(source), path_cls(f"{root}/{rel}/{prefix}{n:05d}.parquet")):
            raise StoreError(f"could not move {source} into {root}/{rel}")
    fs.delete(stage_path, True)
    return len(staged)


def _filesystem(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """The Hadoop file system holding ``path``, and Hadoop's ``Path`` class (via Py4J)."""
    jvm: Any = spark.sparkContext._jvm
    path_cls = jvm.org.apache.hadoop.fs.Path
    return path_cls(path).getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path_cls
