"""Kafka → Cassandra store feed throughput vs a plain concurrent prepared-statement load.

Both load the same rows into the same Cassandra in the same run:
- baseline: one Python process, cassandra-driver, one prepared INSERT ... USING TIMESTAMP,
  ``execute_concurrent`` with 64 requests in flight, rows built in memory beforehand;
- pipeline: ``StoreFeed`` (Kafka source, JVM envelope decode, mapInArrow, the shared
  Cassandra mapping) with an ``available_now`` trigger, timed from start to finish.

For reference, each round also times the same ``CassandraWriter`` fed directly from Python
(no Kafka, no Spark): what the store takes from this writer, so the part Spark costs shows.

A single Cassandra on two shared cores drifts a lot between runs (memtable flushes,
compactions, JIT), so the two are measured ``--repeat`` times, alternating which goes
first, each into a table of its own; the figure is the median of the per-round ratios.

Prints JSON. Usage: python benchmarks/bench_spark_cassandra.py [--rows 50000] [--repeat 3]
[--no-warmup] [--smoke] (``--smoke``: 100 rows, one round, no warm-up: seconds after
Spark's start, and the figures mean nothing)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _smoke
from benchmarks._spark_bench import ITEM, delete_topic, item, make_topic, operations, produce, timed
from gridstream.feeds import FeedConfig, StoreFeed
from gridstream.spark import TypeRegistry, get_spark


def _baseline(session: Any, keyspace: str, rows: int) -> float:
    from cassandra.concurrent import execute_concurrent_with_args

    session.execute(f'CREATE TABLE "{keyspace}".plain (id text PRIMARY KEY, "_version" bigint, '
                    'name text, qty bigint, price double, active boolean, '
                    '"address.city" text, "address.zip" text)', timeout=60)
    insert = session.prepare(
        f'INSERT INTO "{keyspace}".plain (id, "_version", name, qty, price, active, '
        '"address.city", "address.zip") VALUES (?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?')
    params = []
    for i in range(rows):
        d = item(i)
        params.append((d["id"], i + 1, d["name"], d["qty"], d["price"], d["active"],
                       d["address"]["city"], d["address"]["zip"], i + 1))
    return timed(lambda: execute_concurrent_with_args(session, insert, params, concurrency=64))


def _direct(keyspace: str, rows: int) -> float:
    """The pipeline's writer without Spark: operations built in memory, one ``apply``."""
    from gridstream.spark.sinks.cassandra import open_writer
    from gridstream.stores.cassandra import CassandraConfig

    connection, writer = open_writer(CassandraConfig(keyspace=keyspace, concurrency=64))
    try:
        ops, types = operations(rows), {ITEM.name: ITEM}
        writer.apply(ops[:1], types)  # the table and the prepared statements
        return timed(lambda: writer.apply(ops, types))
    finally:
        connection.close()


def _pipeline(spark: Any, topic: str, keyspace: str, rows: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        config = FeedConfig.model_validate({
            "name": "bench-cassandra", "topics": [topic], "checkpoint": f"{tmp}/ckpt",
            "trigger": "available_now", "maxOffsetsPerTrigger": max(rows // 2, 1),
            "sink": {"kind": "cassandra", "keyspace": keyspace, "concurrency": 64},
        })
        pipeline = StoreFeed(config, TypeRegistry.of([ITEM]))
        pipeline.sink.open(spark)

        def run() -> None:
            query = pipeline.start(spark)
            query.awaitTermination()

        seconds = timed(run)
        return seconds, sum(r.result.applied for r in pipeline.reports)


def _keyspace(session: Any) -> str:
    keyspace = f"gs_bench_{uuid.uuid4().hex[:8]}"
    session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}", timeout=60)
    return keyspace


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                        help="one pipeline run of 500 rows first, not counted")
    args = _smoke.parse_args(parser, argv, rows=100, repeat=1, warmup=False)
    from cassandra.cluster import Cluster

    cluster = Cluster(["127.0.0.1"], protocol_version=5)
    session = cluster.connect()
    keyspaces: list[str] = []
    topic = make_topic(2)
    spark = get_spark(app_name="bench-spark-cassandra")
    baseline: list[float] = []
    pipeline: list[float] = []
    direct: list[float] = []
    try:
        produce(topic, operations(args.rows))
        if args.warmup:  # JIT, Python workers, tables
            warm = make_topic(1)
            produce(warm, operations(500))
            keyspaces.append(_keyspace(session))
            _pipeline(spark, warm, keyspaces[-1], 500)
            delete_topic(warm)
        for round_ in range(args.repeat):
            keyspaces.append(_keyspace(session))
            keyspace = keyspaces[-1]
            if round_ % 2 == 0:
                baseline.append(_baseline(session, keyspace, args.rows))
            seconds, applied = _pipeline(spark, topic, keyspace, args.rows)
            assert applied == args.rows, applied
            pipeline.append(seconds)
            if round_ % 2 == 1:
                baseline.append(_baseline(session, keyspace, args.rows))
            keyspaces.append(_keyspace(session))
            direct.append(_direct(keyspaces[-1], args.rows))
            print(f"round {round_ + 1}: baseline {baseline[-1]:.2f}s, "
                  f"pipeline {pipeline[-1]:.2f}s, direct writer {direct[-1]:.2f}s",
                  file=sys.stderr, flush=True)
    finally:
        delete_topic(topic)
        for keyspace in keyspaces:
            session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
        cluster.shutdown()
        spark.stop()
    ratios = [b / p for b, p in zip(baseline, pipeline, strict=True)]
    base_s, pipe_s = statistics.median(baseline), statistics.median(pipeline)
    result = {
        "benchmark": "spark_kafka_to_cassandra",
        "rows": args.rows,
        "repeat": args.repeat,
        "spark_master": "local[2]",
        "baseline_prepared_concurrent_rows_per_s": round(args.rows / base_s),
        "pipeline_rows_per_s": round(args.rows / pipe_s),
        "pipeline_vs_baseline": round(statistics.median(ratios), 3),
        "ratios": [round(r, 3) for r in ratios],
        "direct_writer_rows_per_s": round(args.rows / statistics.median(direct)),
        "pipeline_vs_direct_writer": round(statistics.median(direct) / pipe_s, 3),
        "baseline_s": [round(s, 2) for s in baseline],
        "pipeline_s": [round(s, 2) for s in pipeline],
        "direct_writer_s": [round(s, 2) for s in direct],
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
