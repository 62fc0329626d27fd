"""A hand-made pipeline flow for the grid sink tests: Spark's Kafka source, one fused
``mapInArrow`` pass (decode the JSON key and value, a step, the sink's ``encode``) with
the hidden columns of ``gridstream.pipeline.base``, as the pipeline compiler builds it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

from gridstream.pipeline.base import Flow, Sink

OUT = ("key", "value", "_gs_ts", "_gs_where", "_gs_error", "_gs_stage", "_gs_raw_key",
       "_gs_raw_value")
OUT_DDL = ("key string, value binary, _gs_ts timestamp, _gs_where string, _gs_error string, "
           "_gs_stage string, _gs_raw_key binary, _gs_raw_value binary")

Step = Callable[[Any], Iterable[Any]]


def entries(item: tuple[Any, Any]) -> list[Any]:
    return [item]


def fused(sink: Sink, step: Step) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            out: dict[str, list[Any]] = {c: [] for c in OUT}
            cols = [batch.column(c).to_pylist() for c in
                    ("key", "value", "topic", "partition", "offset", "timestamp")]
            for key, value, topic, partition, offset, ts in zip(*cols, strict=True):
                where = f"{topic}[{partition}]@{offset}"
                stage = "decode"
                rows: list[dict[str, Any]] = []
                try:
                    item = (orjson.loads(key), None if value is None else orjson.loads(value))
                    stage = "map"
                    produced = list(step(item))
                    stage = "encode"
                    rows = [sink.encode(p) for p in produced]
                except Exception as exc:  # noqa: BLE001 - every failure goes to the policy
                    for name, cell in zip(OUT, (None, None, ts, where,
                                                f"{type(exc).__name__}: {exc}", stage, key,
                                                value), strict=True):
                        out[name].append(cell)
                    continue
                for row in rows:
                    for name, cell in zip(OUT, (row["key"], row["value"], ts, where, None,
                                                None, None, None), strict=True):
                        out[name].append(cell)
            yield pa.RecordBatch.from_pydict(out, schema=pa.schema([
                ("key", pa.string()), ("value", pa.binary()),
                ("_gs_ts", pa.timestamp("us", tz="UTC")), ("_gs_where", pa.string()),
                ("_gs_error", pa.string()), ("_gs_stage", pa.string()),
                ("_gs_raw_key", pa.binary()), ("_gs_raw_value", pa.binary())]))

    return run


def kafka_options(bootstrap: str, topic: str, max_offsets: int | None = None
                  ) -> dict[str, str]:
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
               "startingOffsets": "earliest"}
    if max_offsets is not None:
        options["maxOffsetsPerTrigger"] = str(max_offsets)
    return options


def kafka_flow(spark: Any, bootstrap: str, topic: str, sink: Sink, step: Step = entries,
               max_offsets: int | None = None) -> Flow:
    df = spark.readStream.format("kafka").options(
        **kafka_options(bootstrap, topic, max_offsets)).load()
    return Flow(df.mapInArrow(fused(sink, step), OUT_DDL), "entry")


def kafka_batch(spark: Any, bootstrap: str, topic: str, sink: Sink, step: Step = entries
                ) -> Any:
    """The same pass over everything ``topic`` holds now (a static DataFrame: one
    micro-batch's rows, for calling the sink's batch function directly)."""
    df = spark.read.format("kafka").options(**kafka_options(bootstrap, topic)).load()
    return df.mapInArrow(fused(sink, step), OUT_DDL)
