"""Malformed envelopes: fail the batch, or write them to a dead-letter topic.

Never dropped silently. Under ``fail`` the batch raises ``MalformedEnvelopeError`` (the
query stops and Spark does not commit the batch's offsets, so a fixed pipeline restarts
at the same records). Under ``dead_letter`` each bad record goes to the dead-letter topic
with its original key, value and headers, plus headers saying why and where it came
from: ``gs.error.reason``, ``gs.error.topic``, ``gs.error.partition``,
``gs.error.offset``, ``gs.error.pipeline``. Spark's Kafka writer is at-least-once: a
re-run batch may write a dead letter twice; ``(gs.error.topic, gs.error.partition,
gs.error.offset)`` identifies it. The batch's offsets are committed only after both its
dead letters and its valid records are written, in whichever order the pipeline writes
them, so a crash in between loses neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING

from gridstream.kafka.where import kafka_where
from gridstream.spark.envelope import MalformedEnvelopeError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "H_OFFSET",
    "H_PARTITION",
    "H_CACHE",
    "H_CONNECTOR",
    "H_KEY",
    "H_PIPELINE",
    "H_REASON",
    "H_STAGE",
    "H_TOPIC",
    "ErrorPolicy",
    "error_headers",
    "raise_first",
    "write_dead_letters",
]

H_REASON, H_TOPIC, H_PARTITION = "gs.error.reason", "gs.error.topic", "gs.error.partition"
H_OFFSET, H_PIPELINE = "gs.error.offset", "gs.error.pipeline"
H_STAGE, H_CONNECTOR = "gs.error.stage", "gs.error.connector"
H_CACHE, H_KEY = "gs.error.cache", "gs.error.key"
"""The headers of every dead letter gridstream writes (feeds, pipelines, connectors):
the reason, where the record was read, which flow and stage refused it."""


class ErrorPolicy(StrEnum):
    """What a pipeline does with a record that is not a valid envelope."""

    FAIL = "fail"
    DEAD_LETTER = "dead_letter"


def raise_first(bad: DataFrame, count: int, pipeline: str) -> None:
    """Raise ``MalformedEnvelopeError`` for the first bad record (lowest offset)."""
    first = bad.orderBy("topic", "kafka_partition", "offset").select(
        "topic", "kafka_partition", "offset", "error").first()
    if first is None:
        return
    raise MalformedEnvelopeError(
        f"pipeline {pipeline!r}: {count} malformed record(s); first at "
        f"{kafka_where(first['topic'], first['kafka_partition'], first['offset'])}: "
        f"{first['error']}",
        topic=first["topic"], partition=int(first["kafka_partition"]),
        offset=int(first["offset"]), count=count,
    )


def _header(name: str, value: Column) -> Column:
    import pyspark.sql.functions as F

    return F.struct(F.lit(name).alias("key"), F.encode(value.cast("string"), "UTF-8")
                    .alias("value"))


def error_headers(reason: Column, topic: Column, partition: Column, offset: Column, *,
                  origin: tuple[str, str],
                  more: Mapping[str, Column] | None = None) -> Column:
    """The headers a dead letter adds (an array of Kafka header structs): the reason,
    where the record came from, ``origin`` (header name, value: the pipeline or
    connector), and each ``more`` entry (header name → column)."""
    import pyspark.sql.functions as F

    return F.array(
        _header(H_REASON, reason),
        _header(H_TOPIC, topic),
        _header(H_PARTITION, partition),
        _header(H_OFFSET, offset),
        _header(origin[0], F.lit(origin[1])),
        *(_header(name, column) for name, column in (more or {}).items()),
    )


def write_dead_letters(bad: DataFrame, topic: str, pipeline: str,
                       kafka_options: Mapping[str, str], *, origin_header: str = H_PIPELINE,
                       more_headers: Mapping[str, str] | None = None) -> None:
    """Write the bad records to ``topic`` (Spark's Kafka batch writer, acks=all).

    ``bad`` has the columns ``key``, ``value``, ``headers``, ``error``, ``topic``,
    ``kafka_partition`` and ``offset``; ``pipeline`` goes into the header
    ``origin_header`` (a connector names itself in ``gs.error.connector``), and each
    ``more_headers`` entry (header name → column of ``bad``) adds a header."""
    import pyspark.sql.functions as F

    empty = F.array().cast("array<struct<key:string,value:binary>>")
    added = error_headers(
        F.col("error"), F.col("topic"), F.col("kafka_partition"), F.col("offset"),
        origin=(origin_header, pipeline),
        more={name: F.col(column) for name, column in (more_headers or {}).items()})
    letters = bad.select(
        F.col("key"), F.col("value"),
        F.concat(F.coalesce(F.col("headers"), empty), added).alias("headers"),
    )
    writer = letters.write.format("kafka").option("topic", topic)
    for key, value in {"kafka.acks": "all", **kafka_options}.items():
        writer = writer.option(key, value)
    writer.save()
