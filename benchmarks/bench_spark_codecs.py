"""The store feeds' decode of the mirror's JSON, MessagePack and Avro topics.

The same operations are produced once per codec (Avro: through the stack's schema
registry, topic_record subjects). Each topic is read as one Spark batch and decoded the
way the store feed does (``StoreFeed.decode``: JSON ``from_json`` in the JVM; Avro
``from_avro`` in the JVM, ``gridstream.spark.avro_envelopes``; MessagePack transcoded to
the envelope JSON on Arrow batches by ``mapInArrow``, then the JVM checks of JSON). The
side ``avro-python`` decodes the Avro topic the way the feeds did before, as a same-run
baseline: fastavro on Arrow batches to the envelope JSON, then the JVM checks of JSON.
The decoded rows are consumed by one aggregate (count, malformed count, total ``data``
length), so the figure is the decode alone, without a sink. The Avro feed's plan learns
its registry ids in its warm-up (the first batch of a feed runs twice: outside the
figures). Rounds alternate the sides after one warm-up each; medians.

Prints JSON. Usage: python benchmarks/bench_spark_codecs.py [--rows 200000] [--repeat 3]
[--no-warmup] [--smoke] (``--smoke``: 100 rows, one round, no warm-up: seconds after
Spark's start, and the figures mean nothing)
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _smoke
from benchmarks._spark_bench import BOOTSTRAP, delete_topic, make_topic, operations, produce, timed
from gridstream.feeds import FeedConfig, StoreFeed
from gridstream.protocol import OperationEncoder
from gridstream.protocol.avro import AvroCodec
from gridstream.spark import get_spark
from gridstream.spark.envelope import decode_envelopes
from gridstream.spark.value_codecs import CODEC_ERROR, JSON_TEXT, Transcoder

REGISTRY = "http://127.0.0.1:8081/apis/ccompat/v7"


def _python_avro(batch: Any) -> Any:
    """The Avro topic decoded the earlier way: fastavro on Arrow batches → JSON → JVM."""
    transcoder = Transcoder("avro", schema_registry_url=REGISTRY)
    return decode_envelopes(transcoder.apply(batch), codec="avro", text=JSON_TEXT,
                            codec_error=CODEC_ERROR)


def _decode_once(spark: Any, pipeline: StoreFeed, topic: str, rows: int, *,
                 python: bool = False) -> None:
    batch = (spark.read.format("kafka").option("kafka.bootstrap.servers", BOOTSTRAP)
             .option("subscribe", topic).option("startingOffsets", "earliest").load())
    for _ in range(2):
        decoded = _python_avro(batch) if python else pipeline.decode(batch)
        try:
            row = decoded.selectExpr("count(1) AS n", "count(error) AS bad",
                                     "sum(length(data)) AS size").collect()[0]
            break
        except Exception as exc:  # the plan learns the batch's new ids, as a feed does
            if pipeline.avro is None or not pipeline.avro.relearn(batch, exc):
                raise
    if row["n"] != rows or row["bad"] != 0:
        raise SystemExit(f"{pipeline.name}: {row['n']} rows, {row['bad']} malformed")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                        help="one run of each side first, not counted")
    args = _smoke.parse_args(parser, argv, rows=100, repeat=1, warmup=False)
    ops = operations(args.rows)
    codecs: dict[str, tuple[OperationEncoder, dict[str, Any]]] = {
        "json": (OperationEncoder(), {}),
        "msgpack": (OperationEncoder("msgpack"), {"codec": "msgpack"}),
        "avro": (OperationEncoder(AvroCodec(schema_registry_url=REGISTRY,
                                            subject_strategy="topic_record")),
                 {"codec": "avro", "schema_registry_url": REGISTRY}),
    }
    sides = [*codecs, "avro-python"]
    spark = get_spark(app_name="bench-codecs")
    topics: dict[str, str] = {}
    pipelines: dict[str, StoreFeed] = {}
    try:
        for name, (encoder, options) in codecs.items():
            topics[name] = make_topic(2)
            produce(topics[name], ops, encoder)
            pipelines[name] = StoreFeed(FeedConfig.model_validate({
                "name": f"bench-{name}", "topics": [topics[name]], "checkpoint": "/unused",
                "sink": {"kind": "parquet", "path": "/unused"}, **options}))
        seconds: dict[str, list[float]] = {name: [] for name in sides}

        def once(side: str) -> None:
            codec = "avro" if side == "avro-python" else side
            _decode_once(spark, pipelines[codec], topics[codec], args.rows,
                         python=side == "avro-python")

        for side in sides if args.warmup else ():
            once(side)
        for _ in range(args.repeat):
            for side in sides:
                seconds[side].append(timed(functools.partial(once, side)))
        medians = {name: statistics.median(s) for name, s in seconds.items()}
        print(json.dumps({
            "rows": args.rows, "repeat": args.repeat,
            "seconds": seconds,
            "records_per_s": {n: round(args.rows / m) for n, m in medians.items()},
            "vs_json": {n: round(medians["json"] / m, 3) for n, m in medians.items()},
        }, indent=2))
        return 0
    finally:
        for topic in topics.values():
            delete_topic(topic)
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
