"""A Spark driver running one map pipeline, as a process of its own for the tests that
SIGKILL it (``test_pipeline_kills.py``).

``python -m tests.integration.support.pipeline_child CONFIG.json``; the file holds
``{"engine": "pipeline"|"direct", "sink": "kafka"|"map", "guarantee": "...",
"bootstrap": "...", "source": "...", "target": "...", "checkpoint": "...",
"trigger": "1 second"|"available_now", "max_offsets": N, "grid": {...}}``.

``engine="pipeline"`` runs ``gridstream.pipeline``: Kafka source → ``map`` (the
records' ``mapped`` value, or its grid value) → Kafka sink or grid map sink.
``engine="direct"`` runs the same map in Spark SQL into the exactly-once writer (or
Spark's Kafka sink under ``AT_LEAST_ONCE``): the harness's own check, with no pipeline
API. Prints ``spark ready``, ``batch start N`` when a trigger with data begins,
``batch N: R rows`` after each batch (each with the time), ``finished`` when an
``available_now`` run ends.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from gridstream.spark import get_spark
from tests.integration.support.pipeline_check import MAPPED_SQL, grid_value, mapped


def _kafka_props(config: dict[str, Any]) -> dict[str, Any]:
    return {"bootstrap.servers": config["bootstrap"],
            "key.deserializer": "StringDeserializer",
            "value.deserializer": "StringDeserializer",
            "auto.offset.reset": "earliest"}


def pipeline_job(config: dict[str, Any]) -> Any:
    from gridstream.pipeline import Guarantee, KafkaSinks, KafkaSources, Pipeline, entry
    from gridstream.pipeline.grids import GridSinks

    pipeline = Pipeline.create(name="kills")
    stage = pipeline.read_from(KafkaSources.kafka(
        _kafka_props(config), config["source"], max_offsets_per_trigger=config["max_offsets"]))
    if config["sink"] == "kafka":
        out = {"bootstrap.servers": config["bootstrap"], "key.serializer": "StringSerializer",
               "value.serializer": "StringSerializer"}
        stage.map(lambda kv: entry(kv[0], mapped(kv[1]))).write_to(
            KafkaSinks.kafka(out, config["target"]))
    else:
        stage.map(lambda kv: entry(kv[0], grid_value(kv[1]))).write_to(
            GridSinks.map(config["grid"], config["target"]))
    trigger = config["trigger"]
    return pipeline.job(guarantee=Guarantee(config["guarantee"]),
                        checkpoint=config["checkpoint"], trigger=trigger)


def direct_query(spark: Any, config: dict[str, Any]) -> Any:
    from gridstream.spark.kafka_writer import KafkaExactlyOnceWriter

    rows = (spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", config["bootstrap"])
            .option("subscribe", config["source"]).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", config["max_offsets"]).load()
            .selectExpr("key", f"CAST({MAPPED_SQL} AS BINARY) AS value"))
    trigger = config["trigger"]
    if config["guarantee"] == "EXACTLY_ONCE":
        writer = KafkaExactlyOnceWriter(
            config["bootstrap"], name="kills", topic=config["target"],
            trigger=None if trigger == "available_now" else trigger)
        stream = rows.writeStream.foreachBatch(writer)
    else:
        stream = (rows.writeStream.format("kafka")
                  .option("kafka.bootstrap.servers", config["bootstrap"])
                  .option("topic", config["target"]))
    stream = stream.option("checkpointLocation", config["checkpoint"])
    if trigger == "available_now":
        stream = stream.trigger(availableNow=True)
    else:
        stream = stream.trigger(processingTime=trigger)
    return stream.start()


def watch(query: Any) -> None:
    """Print the batch lines while the query runs."""
    last, active = None, False
    while query.isActive:
        status = query.status
        now = bool(status.get("isTriggerActive")) and bool(status.get("isDataAvailable"))
        if now and not active:
            progress = query.lastProgress
            number = 0 if progress is None else progress["batchId"] + 1
            print(f"batch start {number} at {time.time():.2f}", flush=True)
        active = now
        progress = query.lastProgress
        if progress is not None and progress.get("batchId") != last:
            last = progress.get("batchId")
            print(f"batch {last}: {progress.get('numInputRows')} rows at {time.time():.2f}",
                  flush=True)
        time.sleep(0.05)


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[0]).read_text())
    spark = get_spark(app_name=f"pipeline-kills-{config['engine']}")
    print("spark ready", flush=True)
    job = None
    try:
        if config["engine"] == "pipeline":
            job = pipeline_job(config)
            query = job.start(spark)
        else:
            query = direct_query(spark, config)
        watch(query)
        failure = query.exception() if job is None else (job.failure)
        if failure is not None:
            print(f"FAILED: {failure}", flush=True)
            return 1
        print("finished", flush=True)
        return 0
    finally:
        if job is not None:
            job.close()
        spark.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
