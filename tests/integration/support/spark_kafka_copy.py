"""A Spark driver that copies one Kafka topic to another (identity), run as a process of
its own by the crash tests: through the exactly-once writer (``--sink exactly_once``) or
Spark's own Kafka sink (``--sink spark``). Prints ``batch N`` after each micro-batch.

Usage: python -m tests.integration.support.spark_kafka_copy --sink exactly_once --bootstrap B
       --source IN --target OUT --checkpoint DIR [--trigger "1 second" | available_now]
"""

from __future__ import annotations

import argparse
import sys
import time

from gridstream.spark import get_spark
from gridstream.spark.kafka_writer import KafkaExactlyOnceWriter


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sink", choices=("exactly_once", "spark"), required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--trigger", default="1 second")
    parser.add_argument("--max-offsets", type=int, default=4000)
    args = parser.parse_args(argv)
    spark = get_spark(app_name=f"kafka-copy-{args.sink}")
    rows = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", args.bootstrap)
            .option("subscribe", args.source).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", args.max_offsets).load()
            .select("key", "value"))
    if args.sink == "exactly_once":
        writer = KafkaExactlyOnceWriter(args.bootstrap, name="copy", topic=args.target,
                                        trigger=None if args.trigger == "available_now"
                                        else args.trigger)
        stream = rows.writeStream.foreachBatch(writer)
    else:
        stream = (rows.writeStream.format("kafka")
                  .option("kafka.bootstrap.servers", args.bootstrap)
                  .option("topic", args.target))
    stream = stream.option("checkpointLocation", args.checkpoint)
    if args.trigger == "available_now":
        stream = stream.trigger(availableNow=True)
    else:
        stream = stream.trigger(processingTime=args.trigger)
    try:
        query = stream.start()
        last = None
        while query.isActive:
            progress = query.lastProgress
            if progress is not None and progress.get("batchId") != last:
                last = progress.get("batchId")
                print(f"batch {last}: {progress.get('numInputRows')} rows", flush=True)
            time.sleep(0.1)
        if query.exception() is not None:
            print(f"FAILED: {query.exception()}", flush=True)
            return 1
        print("finished", flush=True)
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
