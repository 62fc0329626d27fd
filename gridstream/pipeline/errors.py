"""The error policy at the sink: rows with ``_gs_error`` set.

``fail`` stops the query (a Python pass raises ``RecordError`` itself; a JVM decode's
error raises in the JVM), ``log`` leaves them out (logged by the Python pass, counted in
the batch report), ``dead_letter`` sends the input's raw key and value to the dead-letter
topic with the headers ``gs.error.reason``, ``gs.error.stage``, ``gs.error.topic``,
``gs.error.partition``, ``gs.error.offset`` and ``gs.error.pipeline``. A Kafka sink
routes them in the same write (a per-row ``topic`` column: under ``EXACTLY_ONCE`` the
dead letters are in the same transactions); a ``foreachBatch`` sink splits its batch
with ``split_batch``, which writes the dead letters with Spark's Kafka batch writer
before the sink applies the good rows: outside any transaction, so they are
at-least-once under every guarantee (a re-run batch writes them again).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridstream.spark.dead_letter import H_PIPELINE, H_STAGE, error_headers

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from gridstream.pipeline.base import RunContext

__all__ = ["ERRORS", "dead_letter_headers", "route_to_kafka", "split_batch"]

ERRORS = ("fail", "log", "dead_letter")
_WHERE = r"^(.*)\[(-?\d+)\]@(-?\d+)$"
"""``_gs_where`` of a Kafka record: ``topic[partition]@offset``."""


def dead_letter_headers(context: RunContext) -> Column:
    """The dead-letter headers of an error row (from its hidden columns)."""
    import pyspark.sql.functions as F

    where = F.col("_gs_where")
    kafka = where.rlike(_WHERE)
    return error_headers(
        F.col("_gs_error"),
        F.when(kafka, F.regexp_extract(where, _WHERE, 1)).otherwise(where),
        F.when(kafka, F.regexp_extract(where, _WHERE, 2)),
        F.when(kafka, F.regexp_extract(where, _WHERE, 3)),
        origin=(H_PIPELINE, context.name),
        more={H_STAGE: F.coalesce(F.col("_gs_stage"), F.lit("decode"))})


def route_to_kafka(df: DataFrame, context: RunContext, topic: str) -> DataFrame:
    """``key``, ``value``, ``topic``, ``headers`` for a Kafka write: good rows to
    ``topic``, error rows (under ``dead_letter``) to the dead-letter topic with their raw
    bytes and the error headers."""
    import pyspark.sql.functions as F

    if context.errors != "dead_letter":
        return df.select("key", "value", F.lit(topic).alias("topic"))
    assert context.dead_letter_topic is not None
    bad = F.col("_gs_error").isNotNull()
    empty = F.array().cast("array<struct<key:string,value:binary>>")
    return df.select(
        F.when(bad, F.col("_gs_raw_key")).otherwise(F.col("key")).alias("key"),
        F.when(bad, F.col("_gs_raw_value")).otherwise(F.col("value")).alias("value"),
        F.when(bad, F.lit(context.dead_letter_topic)).otherwise(F.lit(topic)).alias("topic"),
        F.when(bad, dead_letter_headers(context)).otherwise(empty).alias("headers"))


def split_batch(batch: DataFrame, context: RunContext) -> tuple[DataFrame, int]:
    """For a ``foreachBatch`` sink: the batch's good rows, and how many error rows it
    had (written to the dead-letter topic first under ``dead_letter``; under ``fail``
    the first one raises)."""
    import pyspark.sql.functions as F

    bad = batch.where(F.col("_gs_error").isNotNull())
    count = bad.count()
    if count and context.errors == "fail":
        from gridstream.errors import RecordError

        first = bad.select("_gs_where", "_gs_stage", "_gs_error").first()
        assert first is not None
        raise RecordError(str(first["_gs_error"]), where=str(first["_gs_where"]),
                          stage=str(first["_gs_stage"] or "decode"))
    if count and context.errors == "dead_letter":
        assert context.dead_letter_topic is not None
        letters = bad.select(F.col("_gs_raw_key").alias("key"),
                             F.col("_gs_raw_value").alias("value"),
                             dead_letter_headers(context).alias("headers"))
        writer = letters.write.format("kafka").option("topic", context.dead_letter_topic)
        for key, value in {"kafka.acks": "all", **context.dead_letter_options}.items():
            writer = writer.option(key, value)
        writer.save()
    return batch.where(F.col("_gs_error").isNull()), count

