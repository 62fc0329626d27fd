"""Kafka → Parquet change log with envelope decode vs a pure-JVM ``from_json`` baseline.

Both read the same topic with Spark and write Parquet partitioned by type and date, with
the same codec (the sink's default, zstd):
- baseline: a batch query, ``from_json(value, spark_schema_ddl())`` and a plain write
  (no validation, no error policy, no batch-idempotent file naming);
- pipeline: ``StoreFeed`` with the ``parquet`` sink and an ``available_now`` trigger,
  i.e. a streaming query with its checkpoint (JVM decode + validation, error counting,
  staged batch-named files).

The pipeline's fixed cost per query (start, offset and commit logs, one batch) weighs
less the more rows a run has: the default, 1,000,000 rows, measures throughput; pass
``--rows 200000`` for the short run. Baseline and pipeline alternate in the same session
after one warm-up run each; the ratio uses the medians (best-of is printed too).

Prints JSON. Usage: python benchmarks/bench_spark_parquet.py [--rows 1000000] [--repeat 3]
[--no-warmup] [--smoke] (``--smoke``: 100 rows, one round, no warm-up: seconds after
Spark's start, and the figures mean nothing)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _smoke
from benchmarks._spark_bench import BOOTSTRAP, delete_topic, make_topic, operations, produce, timed
from gridstream.feeds import FeedConfig, StoreFeed
from gridstream.protocol import spark_schema_ddl
from gridstream.spark import ParquetSinkConfig, get_spark

CODEC = str(ParquetSinkConfig.model_fields["compression"].default)
"""What the pipeline's sink writes unless told otherwise; the baseline writes it too."""


def _baseline(spark: Any, topic: str, out: str) -> float:
    import pyspark.sql.functions as F

    def run() -> None:
        records = (spark.read.format("kafka").option("kafka.bootstrap.servers", BOOTSTRAP)
                   .option("subscribe", topic).option("startingOffsets", "earliest").load())
        env = records.select(F.from_json(F.col("value").cast("string"), spark_schema_ddl())
                             .alias("e")).select("e.*")
        dated = env.withColumn("date", F.to_date(F.timestamp_millis("ts")))
        (dated.write.mode("overwrite").option("compression", CODEC)
         .partitionBy("type", "date").parquet(out))

    return timed(run)


def _pipeline(spark: Any, topic: str, out: str, tmp: str) -> tuple[float, int]:
    config = FeedConfig.model_validate({
        "name": "bench-parquet", "topics": [topic], "checkpoint": f"{tmp}/ckpt-{topic}",
        "trigger": "available_now", "maxOffsetsPerTrigger": 10_000_000,
        "sink": {"kind": "parquet", "path": out},
    })
    pipeline = StoreFeed(config)

    def run() -> None:
        pipeline.start(spark).awaitTermination()

    seconds = timed(run)
    return seconds, sum(r.records for r in pipeline.reports)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                        help="one run of each side first, not counted")
    args = _smoke.parse_args(parser, argv, rows=100, repeat=1, warmup=False)
    topic = make_topic(2)
    spark = get_spark(app_name="bench-spark-parquet")
    baseline, pipeline = [], []
    try:
        produce(topic, operations(args.rows))
        with tempfile.TemporaryDirectory() as tmp:
            if args.warmup:  # JIT, both paths
                _baseline(spark, topic, f"{tmp}/warm-base")
                _pipeline(spark, topic, f"{tmp}/warm-pipe", tmp)
            for n in range(args.repeat):
                baseline.append(_baseline(spark, topic, f"{tmp}/base-{n}"))
                seconds, records = _pipeline(spark, topic, f"{tmp}/pipe-{n}", f"{tmp}/{n}")
                assert records == args.rows, records
                pipeline.append(seconds)
    finally:
        delete_topic(topic)
        spark.stop()
    med_base, med_pipe = statistics.median(baseline), statistics.median(pipeline)
    best_base, best_pipe = min(baseline), min(pipeline)
    result = {
        "benchmark": "spark_kafka_to_parquet",
        "rows": args.rows,
        "repeat": args.repeat,
        "spark_master": "local[2]",
        "compression": CODEC,
        "baseline_from_json_rows_per_s": round(args.rows / med_base),
        "pipeline_rows_per_s": round(args.rows / med_pipe),
        "pipeline_vs_baseline": round(med_base / med_pipe, 3),
        "best_of": {
            "baseline_from_json_rows_per_s": round(args.rows / best_base),
            "pipeline_rows_per_s": round(args.rows / best_pipe),
            "pipeline_vs_baseline": round(best_base / best_pipe, 3),
        },
        "baseline_s": [round(s, 2) for s in baseline],
        "pipeline_s": [round(s, 2) for s in pipeline],
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
