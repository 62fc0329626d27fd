"""Producing an exactly-once task's Arrow rows (``value``; optional ``key``, ``topic``,
``partition``, ``headers``) in the producer's open transaction, and the exact sums of its
rows' hashes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gridstream.errors import SparkError

if TYPE_CHECKING:
    import pyarrow as pa
    from confluent_kafka import Producer

__all__ = ["produce_batch", "produce_waiting", "total"]


def total(column: pa.Array) -> int:
    """The exact sum of an integer column (in Arrow, as decimals: no overflow)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    total = pc.sum(column.cast(pa.decimal128(38, 0))).as_py()
    return 0 if total is None else int(total)


def _constant(column: pa.Array) -> tuple[bool, Any]:
    """Whether every row of ``column`` holds one value (nulls included), and which."""
    import pyarrow.compute as pc

    if len(column) == 0 or column.null_count == len(column):
        return True, None
    if column.null_count == 0 and pc.count_distinct(column).as_py() == 1:
        return True, column[0].as_py()
    return False, None


def produce_batch(producer: Producer, default_topic: str | None, batch: pa.RecordBatch) -> None:
    """Produce the batch's rows: one topic, no partitions and no headers (the usual
    batch) in a loop of ``produce(topic, value, key)``; any other row by row."""
    import pyarrow.compute as pc

    names = batch.schema.names
    rows = batch.num_rows
    if not rows:
        return
    values = batch.column("value").to_pylist()
    keys = batch.column("key").to_pylist() if "key" in names else [None] * rows
    topic, topics = default_topic, None
    if "topic" in names:
        same, value = _constant(batch.column("topic"))
        if not same:
            topics = batch.column("topic").to_pylist()
        elif value:  # a null or empty topic: the writer's
            topic = value
    parts = None
    if "partition" in names and batch.column("partition").null_count < rows:
        parts = batch.column("partition").to_pylist()
    heads = None
    if "headers" in names and batch.column("headers").null_count < rows and pc.max(
            pc.list_value_length(batch.column("headers"))).as_py():
        heads = batch.column("headers").to_pylist()
    if topics is None and parts is None and heads is None:
        if topic is None:
            raise SparkError("the batch's rows have no topic and the writer no topic")
        produce = producer.produce
        for k, v in zip(keys, values, strict=True):
            try:
                produce(topic, v, k)
            except BufferError:
                produce_waiting(producer, topic, v, k)
        return
    topics = topics or [topic] * rows
    parts = parts or [None] * rows
    heads = heads or [None] * rows
    for k, v, t, p, h in zip(keys, values, topics, parts, heads, strict=True):
        kwargs: dict[str, Any] = {"partition": -1 if p is None else p}
        if h:
            kwargs["headers"] = [(e["key"], e["value"]) for e in h]
        produce_waiting(producer, t or default_topic, v, k, **kwargs)


def produce_waiting(producer: Producer, topic: str | None, value: Any, key: Any,
                    **kwargs: Any) -> None:
    """``producer.produce``, waiting (serving delivery reports) while its queue is full."""
    if topic is None:
        raise SparkError("a row has no topic and the writer no default topic")
    while True:
        try:
            producer.produce(topic, value, key, **kwargs)
            return
        except BufferError:
            producer.poll(0.05)
