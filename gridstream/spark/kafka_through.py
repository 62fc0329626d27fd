"""A Python pass fused into the Kafka writers' tasks (``Through``).

A pipeline whose last Python pass feeds the exactly-once writer would otherwise run two
Python passes a task: the pass (``mapInArrow``), its rows back into the JVM, then the
writer's own (``mapInArrow`` again, into a second Python worker) that produces them.
Fused, the writer's task runs the pass over its input rows and produces what the pass
gives, in the one Python worker. At least once, ``producing`` does the same with the
worker's idempotent producer, flushed before the task ends, instead of handing the
pass's rows back to Spark's Kafka sink (the query's tasks are then the writer's).

The input rows are a Kafka source's (Spark plans one task per topic-partition offset
range, the same range for a batch whatever run reads it: the offsets are in the
checkpoint), so a task's rows are known by their *origin*, not by hashes of what it
wrote: the topic-partition, the first and last offset and the count of its input
records (``origin_content``). The driver ranks a re-run batch's partitions by the same
text, computed in the JVM (``origin_contents``), with no Python pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gridstream.errors import ConfigError, SparkError
from gridstream.kafka.errors import kafka_error
from gridstream.spark import _producers, worker
from gridstream.spark._produce_rows import produce_batch

if TYPE_CHECKING:
    import pyarrow as pa
    from confluent_kafka import Producer
    from pyspark.sql import DataFrame

    from gridstream.kafka import KafkaProperties

__all__ = ["COUNTS", "Through", "check_producer", "origin_content", "origin_contents",
           "producing"]

Fused = Callable[[Iterator["pa.RecordBatch"]], Iterator[tuple["pa.RecordBatch", int]]]
"""A task's input batches → the rows to write (``key``, ``value``; optional ``topic``,
``partition``, ``headers``) and, with each, how many rows its error policy left out."""


def origin_content(topic: str, partition: int, first: int, last: int, records: int) -> str:
    """A task's input, by its origin (one topic-partition's offsets ``first``..``last``,
    ``records`` records)."""
    return f"{records}:{topic}[{partition}]@{first}-{last}"


@dataclass(frozen=True)
class Through:
    """The pass ``fn`` over a Kafka source's rows, whose origin columns are
    ``partition`` and ``offset`` and ``topic_column`` (or, without one, every row's
    topic is ``topic``). Picklable: shipped to the executors."""

    fn: Fused
    partition: str
    offset: str
    topic_column: str | None = None
    topic: str | None = None

    def __post_init__(self) -> None:
        if (self.topic_column is None) == (self.topic is None):
            raise ValueError("give the origin's topic column or its one topic")

    def content(self, batches: Iterator[pa.RecordBatch]) -> str:
        """The input's origin; nothing written (the pass does not run)."""
        origin = _Origin(self)
        for batch in batches:
            origin.add(batch)
        return origin.text()

    def write(self, batches: Iterator[pa.RecordBatch], producer: Producer,
              topic: str | None) -> tuple[str, int, int]:
        """The pass over the input; its rows produced (``Rows.write``)."""
        origin = _Origin(self)
        written, dropped = self.produce(origin.tracked(batches), producer, topic)
        return origin.text(), written, dropped

    def produce(self, batches: Iterator[pa.RecordBatch], producer: Producer,
                topic: str | None) -> tuple[int, int]:
        """The pass over ``batches``, each of its batches produced: the records written
        and the rows left out. A pass that leaves input unread fails (its rows would be
        lost)."""
        written = dropped = 0
        for rows, left_out in self.fn(batches):
            produce_batch(producer, topic, rows)
            written += rows.num_rows
            dropped += left_out
        if any(batch.num_rows for batch in batches):
            raise SparkError("the pass fused into the Kafka writer's task left input rows "
                             "unread: refusing to lose them")
        return written, dropped


class _Origin:
    """The topic-partition and offset range of the batches a task reads."""

    def __init__(self, through: Through) -> None:
        self.through = through
        self.where: tuple[str, int] | None = None
        self.first: int | None = None
        self.last: int | None = None
        self.records = 0

    def tracked(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            self.add(batch)
            yield batch

    def add(self, batch: pa.RecordBatch) -> None:
        import pyarrow.compute as pc

        if not batch.num_rows:
            return
        through = self.through
        partitions = pc.min_max(batch.column(through.partition)).as_py()
        offsets = pc.min_max(batch.column(through.offset)).as_py()
        topics = {"min": through.topic, "max": through.topic}
        if through.topic_column is not None:
            topics = pc.min_max(batch.column(through.topic_column)).as_py()
        where = (str(topics["min"]), int(partitions["min"]))
        if (topics["max"], partitions["max"]) != (topics["min"], partitions["min"]):
            raise _mixed(where, (str(topics["max"]), int(partitions["max"])))
        if self.where is not None and where != self.where:
            raise _mixed(self.where, where)
        self.where = where
        low, high = int(offsets["min"]), int(offsets["max"])
        self.first = low if self.first is None else min(self.first, low)
        self.last = high if self.last is None else max(self.last, high)
        self.records += batch.num_rows

    def text(self) -> str:
        if self.where is None or self.first is None or self.last is None:
            return "0"
        return origin_content(*self.where, self.first, self.last, self.records)


def _mixed(one: tuple[str, int], other: tuple[str, int]) -> SparkError:
    return SparkError(f"an exactly-once task's input spans {one[0]}[{one[1]}] and "
                      f"{other[0]}[{other[1]}]: a fused pass needs one Kafka "
                      "topic-partition's records a task")


def origin_contents(df: DataFrame, through: Through) -> list[tuple[int, int, str]]:
    """Each partition of the batch ``df``: its rows and origin content, in the JVM (one
    pass, no Python)."""
    import pyspark.sql.functions as F

    topic = F.col(through.topic_column) if through.topic_column else F.lit(through.topic)
    stats = (df.select(F.spark_partition_id().alias("p"), topic.alias("t"),
                       F.col(through.partition).alias("k"), F.col(through.offset).alias("o"))
             .groupBy("p")
             .agg(F.count(F.lit(1)).alias("n"), F.min("t").alias("t0"),
                  F.max("t").alias("t1"), F.min("k").alias("k0"), F.max("k").alias("k1"),
                  F.min("o").alias("o0"), F.max("o").alias("o1")).collect())
    found = []
    for r in stats:
        if (r.t0, r.k0) != (r.t1, r.k1):
            raise _mixed((str(r.t0), int(r.k0)), (str(r.t1), int(r.k1)))
        found.append((int(r.p), int(r.n), origin_content(str(r.t0), int(r.k0), int(r.o0),
                                                         int(r.o1), int(r.n))))
    return found


COUNTS = "records LONG, dropped LONG"
"""A producing task's row: the records it wrote and the rows it left out."""


def check_producer(properties: KafkaProperties) -> None:
    """``ConfigError`` for producer properties librdkafka refuses (on the driver, before
    any task; the producer made to check them is closed at once)."""
    from confluent_kafka import KafkaException, Producer

    config = properties.client_config()
    try:
        _producers.close_producer(Producer(config))
    except KafkaException as exc:
        raise ConfigError("KafkaSinks.kafka: the writer's producer (confluent-kafka) refuses "
                          f"its properties: {kafka_error('librdkafka', exc, config)}") from exc


def producing(df: DataFrame, through: Through, properties: KafkaProperties, topic: str,
              flush_s: float | None) -> DataFrame:
    """``df`` through tasks that run the pass and produce what it gives to ``topic``
    with their worker's idempotent producer (``properties``: layered, secrets never
    printed), each task's records flushed before it ends: a record not acknowledged
    within ``flush_s`` (None: librdkafka's own delivery timeout) fails the task (Spark's
    retry, or the query, writes the batch again: at least once). A row a task, of its
    ``records`` written and ``dropped`` left out."""
    return df.mapInArrow(lambda batches: _produce_task(through, properties, topic, flush_s,
                                                       iter(batches)), COUNTS)


def _produce_task(through: Through, properties: KafkaProperties, topic: str,
                  flush_s: float | None, batches: Iterator[pa.RecordBatch],
                  ) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa
    from confluent_kafka import KafkaException

    worker.prepare()
    config = properties.client_config()
    try:
        producer = _producers.idempotent(properties)
    except KafkaException as exc:
        raise kafka_error("invalid kafka producer configuration", exc, config) from exc
    _producers.undelivered(producer)  # nothing of an earlier task counts
    try:
        written, dropped = through.produce(batches, producer, topic)
    except KafkaException as exc:
        _producers.discard(producer)
        raise kafka_error(f"cannot produce to {topic!r}", exc, config) from exc
    except BaseException:
        # the task fails (a row under errors="fail", the user's pass): what it queued
        # goes with the producer, not into the next task's flush
        _producers.discard(producer)
        raise
    _producers.flush_delivered(producer, flush_s, f"the writer of {topic!r}", config)
    yield pa.RecordBatch.from_pydict({"records": pa.array([written], pa.int64()),
                                      "dropped": pa.array([dropped], pa.int64())})
