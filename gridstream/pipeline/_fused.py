"""A Kafka sink's pass run in its writer's own tasks (``KafkaSink.fuses``): the
``Through`` the writers take, the counts its tasks report, and the at-least-once
query."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gridstream.pipeline import serde
from gridstream.pipeline.base import ORIGIN_PARTS, LastPass, RunContext
from gridstream.pipeline.streaming import OBSERVED, configure

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
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


def start_at_least_once(last: LastPass, context: RunContext,
                        on_batch: Callable[[int, dict[str, Any]], None],
                        properties: KafkaProperties, topic: str) -> StreamingQuery:
    """The query whose tasks run the pass and produce with the worker's idempotent
    producer (``properties``), flushed before each task ends."""
    from gridstream.spark.kafka_through import check_producer, write_at_least_once

    # librdkafka gives up on a record after its delivery timeout (0: never): wait past it
    delivery_ms = float(properties.get_str("delivery.timeout.ms") or
                        properties.get_str("message.timeout.ms") or 300_000)
    flush_s = delivery_ms / 1000 + 30 if delivery_ms > 0 else None
    check_producer(properties)  # before the query starts: a bad property is said now
    through = fused_through(last)

    def batch(batch_df: DataFrame, batch_id: int) -> None:
        written, dropped = write_at_least_once(batch_df, through, properties, topic, flush_s)
        on_batch(batch_id, {"written": written, OBSERVED: counted(written, dropped)})

    return configure(last.input.writeStream.foreachBatch(batch), context).start()
