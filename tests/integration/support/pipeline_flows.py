"""Hand-made flows for the stateful steps' tests: a Kafka topic of JSON objects read as
a structured flow (the hidden columns as the pipeline's Kafka source sets them), and a
producer of records with chosen timestamps."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from gridstream.pipeline.base import Flow


def kafka_row_flow(spark: Any, bootstrap: str, topic: str, ddl: str, **options: str) -> Flow:
    """The topic's JSON values parsed to the columns of ``ddl``; a value that does not
    parse becomes an error row (``_gs_error`` set, visible columns null)."""
    import pyspark.sql.functions as F

    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topic).option("startingOffsets", "earliest")
           .options(**options).load())
    parsed = raw.select(
        F.from_json(F.col("value").cast("string"), ddl).alias("v"),
        F.col("value").cast("string").startswith("{").alias("ok"),
        F.col("timestamp").alias("_gs_ts"),
        F.format_string("%s[%d]@%d", "topic", "partition", "offset").alias("_gs_where"),
        F.col("key").alias("_gs_raw_key"), F.col("value").alias("_gs_raw_value"),
    )
    fields = [f.strip().split(" ", 1)[0] for f in ddl.split(",")]
    df = parsed.select(
        *(F.when(F.col("ok"), F.col(f"v.{f}")).alias(f) for f in fields),
        "_gs_ts", "_gs_where",
        F.when(~F.col("ok"), F.lit("not a JSON object")).alias("_gs_error"),
        F.when(~F.col("ok"), F.lit("decode")).alias("_gs_stage"),
        "_gs_raw_key", "_gs_raw_value",
    )
    return Flow(df, "row")


def produce(bootstrap: str, topic: str, records: Iterable[tuple[int, dict[str, Any] | bytes]],
            partition: int = 0) -> None:
    """``(timestamp ms, value)`` records, in order, to one partition."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for ts, value in records:
        data = value if isinstance(value, bytes) else orjson.dumps(value)
        producer.produce(topic, data, partition=partition, timestamp=ts)
    assert producer.flush(30) == 0
