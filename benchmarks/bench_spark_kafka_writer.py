"""Kafka → Kafka from Spark: the exactly-once writer vs Spark's own Kafka sink.

The same batch — every record of a source topic, read by Spark's Kafka source (one
Spark partition per Kafka partition), key and value only — is written to a fresh topic
by Spark's at-least-once Kafka sink (``df.write.format("kafka")``, pure JVM) and by
``KafkaExactlyOnceWriter`` (Arrow batches to Python, one kept transactional producer
per slot, the commit markers), alternating in one session after one warm-up run each.
The writer is one run of one query throughout (run n is its batch n, under one Spark
run id, as a streaming query's batches are): its first batch pays the one-off costs
(the ranking pass a batch that may be a re-run needs, marker topic, fencing every
slot's id, the producers' ``init_transactions``); each later batch is one pass. The ratio uses
the medians (best-of is printed too). Each run's output is counted (read_committed).

Prints JSON. Usage: python benchmarks/bench_spark_kafka_writer.py [--rows 1000000]
[--partitions 4] [--value-bytes 100] [--repeat 3] [--no-warmup] [--smoke]
(``--smoke``: 100 rows over 2 partitions, one round, no warm-up: seconds after Spark's
start, and the figures mean nothing)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer

from benchmarks import _smoke
from benchmarks._spark_bench import BOOTSTRAP, delete_topic, make_topic, read_to_end, timed
from gridstream.spark import get_spark
from gridstream.spark.kafka_writer import KafkaExactlyOnceWriter


def _fill(topic: str, rows: int, value_bytes: int) -> None:
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 20,
                         "compression.type": "lz4"})
    pad = b"x" * max(value_bytes - 12, 0)
    for i in range(rows):
        key = b"%d" % i
        while True:
            try:
                producer.produce(topic, b"%012d" % i + pad, key)
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(60)


def _count(topic: str) -> int:
    """Records of ``topic`` a read_committed consumer sees (to each partition's end)."""
    return sum(1 for _ in read_to_end(topic))


def _source(spark: Any, topic: str) -> Any:
    return (spark.read.format("kafka").option("kafka.bootstrap.servers", BOOTSTRAP)
            .option("subscribe", topic).option("startingOffsets", "earliest").load()
            .select("key", "value"))


def _spark_sink(spark: Any, source: str, target: str) -> float:
    return timed(lambda: _source(spark, source).write.format("kafka")
                 .option("kafka.bootstrap.servers", BOOTSTRAP).option("topic", target).save())


class _Writer:
    """One writer (one query) for every run, as in a streaming query: run ``n`` is
    batch ``n``, its rows carry their topic (a fresh one per run)."""

    def __init__(self) -> None:
        self.writer = KafkaExactlyOnceWriter(BOOTSTRAP, name="bench", query_id=uuid.uuid4().hex)
        self.batch_id = 0
        self.run = f"bench-run-{uuid.uuid4().hex}"
        """Spark's run id of a streaming query (``spark.jobGroup.id``), as its batches
        have it: a batch after one the writer completed in the run is one pass."""
        self.counting: list[float] = []

    def __call__(self, spark: Any, source: str, target: str) -> float:
        import pyspark.sql.functions as F

        rows = _source(spark, source).withColumn("topic", F.lit(target))
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", self.run)
        try:
            seconds = timed(lambda: self.writer(rows, self.batch_id))
        finally:
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        self.batch_id += 1
        self.counting.append(self.writer.results[-1].counting_s)
        return seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                        help="one run of each side first, not counted")
    args = _smoke.parse_args(parser, argv, rows=100, partitions=2, repeat=1, warmup=False)
    source = make_topic(args.partitions)
    targets: list[str] = []
    spark = get_spark(app_name="bench-spark-kafka-writer")
    runs: dict[str, list[float]] = {"spark": [], "writer": []}
    writer = _Writer()

    def run(kind: str, record: bool) -> None:
        target = make_topic(args.partitions)
        targets.append(target)
        seconds = (_spark_sink if kind == "spark" else writer)(spark, source, target)
        seen = _count(target)
        assert seen >= args.rows if kind == "spark" else seen == args.rows, (kind, seen)
        if record:
            runs[kind].append(seconds)

    try:
        _fill(source, args.rows, args.value_bytes)
        if args.warmup:  # both paths
            run("spark", False)
            run("writer", False)
        for _ in range(args.repeat):
            run("spark", True)
            run("writer", True)
    finally:
        spark.stop()
        for topic in [source, *targets]:
            delete_topic(topic)
    med_spark, med_writer = statistics.median(runs["spark"]), statistics.median(runs["writer"])
    result = {
        "benchmark": "spark_kafka_exactly_once_writer",
        "rows": args.rows,
        "partitions": args.partitions,
        "value_bytes": args.value_bytes,
        "repeat": args.repeat,
        "spark_master": "local[2]",
        "spark_sink_rows_per_s": round(args.rows / med_spark),
        "writer_rows_per_s": round(args.rows / med_writer),
        "writer_vs_spark_sink": round(med_spark / med_writer, 3),
        "best_of": {
            "spark_sink_rows_per_s": round(args.rows / min(runs["spark"])),
            "writer_rows_per_s": round(args.rows / min(runs["writer"])),
            "writer_vs_spark_sink": round(min(runs["spark"]) / min(runs["writer"]), 3),
        },
        "writer_counting_pass_s": [round(s, 2) for s in writer.counting[-args.repeat:]],
        "load_average_end": [round(v, 2) for v in os.getloadavg()],
        "spark_sink_s": [round(s, 2) for s in runs["spark"]],
        "writer_s": [round(s, 2) for s in runs["writer"]],
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
