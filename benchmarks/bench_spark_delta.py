"""Kafka → Delta current-state table: the store feed's lake sink with the session's Delta
settings against the same feed with Delta Lake's own default snapshot width, same run.

After each micro-batch's MERGE (one Delta commit) Delta computes the table's new
snapshot, and reads it again before the next batch's MERGE: shuffles of
``spark.databricks.delta.snapshotPartitions`` partitions, 50 unless told otherwise.
``get_spark`` sets it to the session's own shuffle width. Both sides
run ``StoreFeed`` with the ``delta`` sink over the same topic, into a fresh table each
round (``maxOffsetsPerTrigger`` = rows / ``--batches``, which Kafka's source rounds
down per partition: a batch or so more than asked; the cost measured is per batch), in
one Spark session, the setting changed between them (Delta reads it at each use). One
warm-up round of each side, then ``--repeat`` rounds; the order of the sides alternates
from round to round, the warm-up's included (so the session's own side runs first in
the first measured round). Reported: each side's whole drain, its median, and the
median of every batch's ``addBatch`` (the sink's time, from the query's progress)
pooled over the rounds, and the ratios. Without the warm-up the side that runs first
pays for the session's first Delta MERGEs (20 s and more).

Prints JSON. Usage: python benchmarks/bench_spark_delta.py [--rows 20000] [--batches 8]
[--repeat 3] [--no-warmup] [--smoke] (``--smoke``: 100 rows, 2 batches, one round, no
warm-up: the figures mean nothing)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _smoke
from benchmarks._spark_bench import delete_topic, make_topic, operations, produce, timed
from gridstream import stack
from gridstream.feeds import FeedConfig, StoreFeed
from gridstream.spark import current_state, get_spark
from gridstream.spark.session import DELTA_SNAPSHOT_PARTITIONS as SETTING

DELTA_DEFAULT = "50"


def _run(spark: Any, bootstrap: str, topic: str, per_batch: int, tmp: str,
         name: str) -> dict[str, Any]:
    config = FeedConfig.model_validate({
        "name": name, "topics": [topic], "checkpoint": f"{tmp}/ckpt-{name}",
        "trigger": "available_now", "maxOffsetsPerTrigger": per_batch,
        "sink": {"kind": "delta", "path": f"{tmp}/lake-{name}"},
    })
    feed = StoreFeed(config, bootstrap_servers=bootstrap)
    query: list[Any] = []

    def run() -> None:
        query.append(feed.start(spark))
        query[0].awaitTermination()

    seconds = timed(run)
    if feed.failure is not None:
        raise RuntimeError(f"{name}: {feed.failure}")
    add = [p["durationMs"]["addBatch"] / 1000 for p in query[0].recentProgress
           if p["numInputRows"] > 0]
    rows = current_state(spark, f"{tmp}/lake-{name}").count()
    return {"seconds": seconds, "add_batch_s": add, "rows": rows,
            "records": sum(r.records for r in feed.reports)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                        help="one round of each side first, not counted")
    args = _smoke.parse_args(parser, argv, rows=100, batches=2, repeat=1, warmup=False)
    if min(args.rows, args.batches, args.repeat) < 1:
        parser.error("--rows, --batches and --repeat must be at least 1")
    kafka = stack.services(["kafka"])[0]
    kafka.up()
    loads = [os.getloadavg()[0]]
    spark = get_spark(app_name="bench-spark-delta")
    master = spark.sparkContext.master
    sides = {"gridstream": spark.conf.get(SETTING), "delta_default": DELTA_DEFAULT}
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    per_batch = -(-args.rows // args.batches)
    topic = make_topic(2)
    try:
        produce(topic, operations(args.rows))
        with tempfile.TemporaryDirectory() as tmp:
            rounds = [("warm", n) for n in range(int(args.warmup))] + \
                [("round", n) for n in range(args.repeat)]
            for i, (kind, n) in enumerate(rounds):
                # the warm-up's order is the reverse of the first measured round's
                order = list(sides) if (len(rounds) - args.repeat - i) % 2 == 0 \
                    else list(reversed(sides))
                for side in order:
                    spark.conf.set(SETTING, sides[side])
                    run = _run(spark, kafka.address, topic, per_batch, tmp,
                               f"{side}-{kind}-{n}")
                    assert run["records"] == run["rows"] == args.rows, run
                    if kind == "round":
                        runs[side].append(run)
            loads.append(os.getloadavg()[0])
    finally:
        try:
            delete_topic(topic)
        finally:
            spark.stop()
    figures = {side: {
        "snapshot_partitions": int(sides[side]),
        "drain_s": [round(r["seconds"], 2) for r in side_runs],
        "median_drain_s": round(statistics.median(r["seconds"] for r in side_runs), 2),
        "median_add_batch_s_pooled": round(statistics.median(
            s for r in side_runs for s in r["add_batch_s"]), 2),
        "batches_per_run": [len(r["add_batch_s"]) for r in side_runs],
    } for side, side_runs in runs.items()}
    mine, theirs = figures["gridstream"], figures["delta_default"]
    result = {
        "benchmark": "spark_kafka_to_delta",
        "rows": args.rows, "batches_asked": args.batches, "repeat": args.repeat,
        "spark_master": master,
        "sides": figures,
        "gridstream_over_delta_default": {
            "drain": round(mine["median_drain_s"] / theirs["median_drain_s"], 3),
            "add_batch": round(mine["median_add_batch_s_pooled"]
                               / theirs["median_add_batch_s_pooled"], 3),
        },
        "load_1min": [round(v, 2) for v in loads],
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
