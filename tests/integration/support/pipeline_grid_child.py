"""A Spark driver running a pipeline Kafka → grid map (``GridSinks.map``) with
``EXACTLY_ONCE``, as a process of its own for the crash tests. Prints ``applied batch N``
once batch N is written to the grid, before Spark commits it (``--pause-after N``: then
it sleeps there, so a test can kill it between the write and the checkpoint), and
``finished`` when everything available was processed (``available_now``).

Usage: python -m tests.integration.support.pipeline_grid_child --bootstrap B --topic T
       --grid JSON --cache C --checkpoint DIR --name NAME [--pause-after N]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import orjson

from gridstream.pipeline import GridSinks, Guarantee, KafkaSources, Pipeline
from gridstream.spark import get_spark


def json_entry(kv: tuple[bytes, bytes | None]) -> tuple[Any, Any]:
    return orjson.loads(kv[0]), None if kv[1] is None else orjson.loads(kv[1])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    for name in ("--bootstrap", "--topic", "--grid", "--cache", "--checkpoint", "--name"):
        parser.add_argument(name, required=True)
    parser.add_argument("--pause-after", type=int, default=-1)
    parser.add_argument("--max-offsets", type=int, default=1000)
    args = parser.parse_args(argv)
    props = {"bootstrap.servers": args.bootstrap, "key.deserializer": "ByteArrayDeserializer",
             "value.deserializer": "ByteArrayDeserializer", "auto.offset.reset": "earliest"}
    sink = GridSinks.map(orjson.loads(args.grid), args.cache)
    write = sink.write_batch

    def written(batch: Any, batch_id: int) -> None:
        write(batch, batch_id)
        print(f"applied batch {batch_id}", flush=True)
        if batch_id == args.pause_after:
            time.sleep(600)  # killed here: written to the grid, not committed by Spark

    sink.write_batch = written  # type: ignore[method-assign]
    p = Pipeline.create(name=args.name)
    (p.read_from(KafkaSources.kafka(props, args.topic, max_offsets_per_trigger=args.max_offsets))
      .map(json_entry)
      .write_to(sink))
    spark = get_spark(app_name="pipeline-grid-child")
    job = p.job(guarantee=Guarantee.EXACTLY_ONCE, checkpoint=args.checkpoint,
                trigger="available_now")
    try:
        query = job.start(spark)
        print(f"query {query.id}", flush=True)
        query.awaitTermination()
        if job.failure is not None:
            print(f"FAILED: {job.failure}", flush=True)
            return 1
        print("finished", flush=True)
        return 0
    finally:
        job.close()
        spark.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
