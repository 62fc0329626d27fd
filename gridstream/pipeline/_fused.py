"""A Kafka sink's pass run in its writer's own tasks (``KafkaSink.fuses``): the
``Through`` the writers take, the counts its tasks report, and the at-least-once
query (micro-batches and real-time mode alike)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gridstream.pipeline import serde
from gridstream.pipeline.base import ORIGIN_PARTS, LastPass, RunContext
from gridstream.pipeline.streaming import OBSERVED, configure

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

    from gridstream.kafka import KafkaProperties
    from gridstream.spark.kafka_through import Through

__all__ = ["counted", "fused_through", "start_at_least_once"]


def counted(written: int, left_out: int) -> dict[str, int]:
    """A fused batch's counts as the JVM would observe them after its pass."""
    return {"rows": written + left_out, "errors": left_out}


def fused_through(last: LastPass) -> Through:
    """The sink's pass as the writers run it, over the origin's parts."""
    from gridstream.spark.kafka_through import Through

    topic, partition, offset = ORIGIN_PARTS
    topic_column = topic if topic in last.input.columns else None
    return Through(serde.KeyValues(last.fn), partition, offset, topic_column,
                   None if topic_column else last.origin_topic)


def start_at_least_once(last: LastPass, context: RunContext, properties: KafkaProperties,
                        topic: str) -> StreamingQuery:
    """The query whose tasks run the pass and produce what it gives with the worker's
    idempotent producer (``properties``), each Arrow batch as it comes, flushed before
    the task ends and so before its batch's offsets are committed (at least once). The
    query's sink is Spark's ``noop``, its rows the tasks' counts (``OBSERVED``): no
    ``foreachBatch`` (real-time mode has none; in micro-batches its Python call-back,
    the batch's plan made again and its counts collected to the driver cost every
    batch), the same query in both modes."""
    import pyspark.sql.functions as F

    from gridstream.spark.kafka_through import producing

    counts = producing(last.input, fused_through(last), properties, topic,
                       _checked(properties))
    written, dropped = (F.coalesce(F.sum(c), F.lit(0)) for c in ("records", "dropped"))
    counts = counts.observe(OBSERVED, (written + dropped).alias("rows"),
                            dropped.alias("errors"))
    return configure(counts.writeStream.format("noop"), context).start()


def _checked(properties: KafkaProperties) -> float | None:
    """The producer's properties checked (before the query starts: a bad one is said
    now); how long a task waits for its records' acknowledgements (None: for ever)."""
    from gridstream.spark.kafka_through import check_producer

    check_producer(properties)
    # librdkafka gives up on a record after its delivery timeout (0: never): wait past it
    delivery_ms = float(properties.get_str("delivery.timeout.ms") or
                        properties.get_str("message.timeout.ms") or 300_000)
    return delivery_ms / 1000 + 30 if delivery_ms > 0 else None
