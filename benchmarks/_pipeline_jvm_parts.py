"""What the pipeline's hidden columns cost in the JVM and through Arrow, in ONE warm Spark
session (not a whole-process timing): the same pre-filled topic read to its end
(``available_now``) by a hand-written ``mapInArrow`` pass (values uppercased as bytes)
with, on top of the bare pass,

- ``utf8``: the String deserializer's UTF-8 validity check on key and value;
- ``where``: the event time and the origin text ``topic[partition]@offset`` (built per
  row in the JVM) carried into the pass and back;
- ``hidden8``: all six hidden columns (the four others null) and the error filter after
  the pass, as a pipeline carries them.

Each variant once to warm up, then ``--repeat`` times in rotating order; the medians of
the queries' wall times (start → end) are printed as JSON.

Usage: python benchmarks/_pipeline_jvm_parts.py [--records 500000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._pipeline_bench import (
    BOOTSTRAP,
    create_topics,
    delete_topics,
    fill,
    fresh_topic,
    warm_rounds,
)

KINDS = ("bare", "utf8", "where", "hidden8")
_WHERE = ("key binary, value binary, _gs_ts timestamp, _gs_where string")
_HIDDEN8 = (f"{_WHERE}, _gs_error string, _gs_stage string, _gs_raw_key binary, "
            "_gs_raw_value binary")


def _upper(extra: int) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The pass: the value uppercased (bytes), ``extra`` further columns copied."""
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            values = [None if v is None else v.upper() for v in batch.column(1).to_pylist()]
            columns = [batch.column(0), pa.array(values, pa.binary()),
                       *(batch.column(i) for i in range(2, 2 + extra))]
            yield pa.RecordBatch.from_arrays(columns, names=batch.schema.names[:2 + extra])
    return run


def _start(spark: Any, source: str, target: str, checkpoint: str, kind: str) -> Any:
    import pyspark.sql.functions as F  # noqa: N812

    df = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", BOOTSTRAP)
          .option("subscribe", source).option("startingOffsets", "earliest").load())
    where = F.concat(F.col("topic"), F.lit("["), F.col("partition").cast("string"),
                     F.lit("]@"), F.col("offset").cast("string"))
    if kind == "bare":
        rows, schema, extra = df.select("key", "value"), "key binary, value binary", 0
    elif kind == "utf8":
        valid = [F.when(F.col(c).isNull() | F.is_valid_utf8(F.col(c).cast("string")),
                        F.col(c)).alias(c) for c in ("key", "value")]
        rows, schema, extra = df.select(*valid), "key binary, value binary", 0
    elif kind == "where":
        rows = df.select("key", "value", F.col("timestamp").alias("_gs_ts"),
                         where.alias("_gs_where"))
        schema, extra = _WHERE, 2
    else:
        rows = df.select("key", "value", F.col("timestamp").alias("_gs_ts"),
                         where.alias("_gs_where"),
                         *(F.lit(None).cast(t).alias(n) for n, t in (
                             ("_gs_error", "string"), ("_gs_stage", "string"),
                             ("_gs_raw_key", "binary"), ("_gs_raw_value", "binary"))))
        schema, extra = _HIDDEN8, 6
    out = rows.mapInArrow(_upper(extra), schema)
    if kind == "hidden8":
        out = out.where(F.col("_gs_error").isNull())
    return (out.select("key", "value").writeStream.format("kafka")
            .option("kafka.bootstrap.servers", BOOTSTRAP).option("topic", target)
            .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    from gridstream.spark import get_spark

    spark = get_spark(app_name="bench-pipeline-jvm-parts")
    source = fresh_topic("gs-bench-parts-in")
    topics = [source]

    def run(kind: str, target: str, checkpoint: str) -> None:
        _start(spark, source, target, checkpoint, kind).awaitTermination()

    try:
        create_topics([source], args.partitions)
        fill(source, args.records)
        times = warm_rounds(KINDS, run, repeat=args.repeat, partitions=args.partitions,
                            topics=topics)
    finally:
        spark.stop()
        delete_topics(topics)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(json.dumps({"records": args.records,
                      "seconds": {k: [round(x, 2) for x in v] for k, v in times.items()},
                      "median_s": {k: round(m, 2) for k, m in med.items()},
                      "over_bare_us_per_record": {
                          k: round((m - med["bare"]) / args.records * 1e6, 2)
                          for k, m in med.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
