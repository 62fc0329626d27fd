"""One Spark side of the pipeline benchmarks, as a process of its own: the map pipeline
(uppercase the string value, key unchanged) from one Kafka topic to another.

Sides: ``native`` (Spark's own Kafka source and sink, the map in SQL, no Python),
``native-bounded`` (the same in batches of the pipeline's bound, ``maxOffsetsPerTrigger``
= ``MAX_OFFSETS_PER_TRIGGER``), ``gridstream-alo`` / ``gridstream-eo`` (the pipeline API,
AT_LEAST_ONCE / EXACTLY_ONCE).

Usage: python benchmarks/_pipeline_side.py SIDE SOURCE TARGET TRIGGER [INTERVAL]
  INTERVAL: a real-time pipeline's ``checkpoint_interval`` (its batch's length; by
  default the product's);
  TRIGGER ``available_now``: read the topic to its end, stop, print one JSON line
  (``session_s`` Spark's start, ``query_s`` the query from start to end, its input rows);
  any other (``real_time`` or a processing-time interval such as ``"0 seconds"``): print
  ``READY`` once the query runs, then run until a line or the end of stdin, stop the
  query, print the JSON line.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._pipeline_map import upper_entry
from gridstream.spark.kafka_source import MAX_OFFSETS_PER_TRIGGER

BOOTSTRAP = "127.0.0.1:9092"


def _native(spark: Any, source: str, target: str, trigger: str, checkpoint: str,
            max_offsets: int | None = None) -> Any:
    """``max_offsets``: Spark's ``maxOffsetsPerTrigger`` (None: Spark's default, every
    available record in one batch)."""
    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", BOOTSTRAP)
              .option("subscribe", source).option("startingOffsets", "earliest"))
    if max_offsets is not None:
        reader = reader.option("maxOffsetsPerTrigger", max_offsets)
    df = reader.load()
    out = df.selectExpr("key", "CAST(upper(CAST(value AS STRING)) AS BINARY) AS value")
    writer = (out.writeStream.format("kafka").option("kafka.bootstrap.servers", BOOTSTRAP)
              .option("topic", target).option("checkpointLocation", checkpoint)
              .outputMode("update"))
    if trigger == "available_now":
        writer = writer.trigger(availableNow=True)
    elif trigger == "real_time":
        writer = writer.trigger(realTime="5 seconds")
    else:
        writer = writer.trigger(processingTime=trigger)
    return writer.start()


def _gridstream(side: str, source: str, target: str, trigger: str, checkpoint: str,
                bound: int | None = MAX_OFFSETS_PER_TRIGGER,
                checkpoint_interval: str | None = None) -> Any:
    """``bound``: the Kafka source's ``max_offsets_per_trigger`` (by default the
    pipeline's; None: every available record in one batch, as Spark's own default)."""
    from gridstream.pipeline import Guarantee, KafkaSinks, KafkaSources, Pipeline

    props = {"bootstrap.servers": BOOTSTRAP, "key.deserializer": "StringDeserializer",
             "value.deserializer": "StringDeserializer", "auto.offset.reset": "earliest"}
    out_props = {"bootstrap.servers": BOOTSTRAP, "key.serializer": "StringSerializer",
                 "value.serializer": "StringSerializer"}
    p = Pipeline.create(name=f"bench-{Path(checkpoint).name}")
    (p.read_from(KafkaSources.kafka(props, source, max_offsets_per_trigger=bound))
      .map(upper_entry)
      .write_to(KafkaSinks.kafka(out_props, target)))
    guarantee = Guarantee.EXACTLY_ONCE if side == "gridstream-eo" else Guarantee.AT_LEAST_ONCE
    # real-time mode: the fused Python pass runs only with Spark's allow-list check off
    # (MapInArrowExec is not on Spark 4.2's real-time allow-list)
    return p.job(guarantee, checkpoint, trigger, real_time_python=trigger == "real_time",
                 checkpoint_interval=checkpoint_interval)


def _epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def _summary(query: Any) -> dict[str, Any]:
    """Input rows and batches from the query's progress; ``drain_s`` from the start of
    the first batch with rows to the end of the last one."""
    progress = [json.loads(p.json) for p in query.recentProgress]
    with_rows = [p for p in progress if p["numInputRows"] > 0]
    summary: dict[str, Any] = {"input_rows": sum(p["numInputRows"] for p in progress),
                               "batches": len(with_rows)}
    if with_rows:
        first, last = with_rows[0], with_rows[-1]
        end = _epoch(last["timestamp"]) + last["durationMs"]["triggerExecution"] / 1000
        summary["drain_s"] = end - _epoch(first["timestamp"])
        summary["duration_ms"] = last["durationMs"]  # the last batch's, by phase
        # the first batch holds the start of the Python workers and the JIT's warm-up:
        # the batches after it are the steady state (when there are any)
        summary["first_batch_s"] = first["durationMs"]["triggerExecution"] / 1000
        summary["first_batch_rows"] = first["numInputRows"]
        # a batch's turnaround, by phase: the medians over the batches with rows of the
        # progress kept (the last 100), so that a real-time query's cost per batch shows
        summary["batch_ms_median"] = {
            phase: statistics.median(p["durationMs"].get(phase, 0) for p in with_rows)
            for phase in ("triggerExecution", "addBatch", "queryPlanning", "walCommit",
                          "commitOffsets")}
    return summary


def main(argv: list[str]) -> int:
    side, source, target, trigger = argv[:4]
    interval = argv[4] if len(argv) > 4 else None
    started = time.perf_counter()
    from gridstream.spark import get_spark

    conf = {}
    if trigger == "real_time":
        # real-time mode reads Kafka through the V2 source only (with the V1 source:
        # STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED); get_spark turns it off
        # for micro-batches (spark.sql.streaming.disabledV2MicroBatchReaders)
        conf["spark.sql.streaming.disabledV2MicroBatchReaders"] = ""
        if side != "native":
            # MapInArrowExec is not on Spark 4.2's real-time allow-list: the session is
            # built with the check off, as the job's real_time_python requires
            from gridstream.pipeline.run import REAL_TIME_PYTHON_CONF

            conf.update(REAL_TIME_PYTHON_CONF)
    spark = get_spark(app_name=f"bench-pipeline-{side}", conf=conf)
    session_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="gs-bench-ck-") as checkpoint:
        began = time.perf_counter()
        job = None
        if side in ("native", "native-bounded"):
            query = _native(spark, source, target, trigger, checkpoint,
                            MAX_OFFSETS_PER_TRIGGER if side == "native-bounded" else None)
        else:
            job = _gridstream(side, source, target, trigger, checkpoint,
                              checkpoint_interval=interval)
            query = job.start(spark)
        try:
            if trigger == "available_now":
                query.awaitTermination()
            else:
                _serve(query)
            query_s = time.perf_counter() - began
            failure = job.failure if job is not None else query.exception()
            if failure is not None:
                raise SystemExit(f"the query failed: {failure}")
            result = {"side": side, "trigger": trigger, "session_s": session_s,
                      "query_s": query_s, **_summary(query)}
        finally:
            if job is not None:
                job.close()
            elif query.isActive:
                query.stop()
    spark.stop()
    print(json.dumps(result), flush=True)
    return 0


def _serve(query: Any) -> None:
    """Print READY, then run until a line (or the end) on stdin or the query's end."""
    print("READY", flush=True)
    stop = threading.Event()

    def wait_line() -> None:
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=wait_line, daemon=True).start()
    while not stop.is_set() and query.isActive:
        query.awaitTermination(0.5)
    if query.isActive:
        query.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
