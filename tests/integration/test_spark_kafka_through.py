"""The exactly-once writer with a pass fused into its tasks (``Through``), on the real
broker and Spark: each task runs the pass over a Kafka source's rows and writes what
it gives; a re-run batch is known by its tasks' origins (topic-partition, offsets,
count), ranked in the JVM: committed slots are skipped, a re-run with other offsets
is refused, and no row is written twice."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from gridstream.errors import SparkError
from gridstream.spark.kafka_through import Through
from gridstream.spark.kafka_writer import KafkaExactlyOnceWriter
from tests.integration.support.pipeline_helpers import produce
from tests.integration.test_spark_kafka_writer_crash import read_all


class _Doubled:
    """The pass: each value doubled; a value ``bad`` left out (counted)."""

    def __call__(self, batches: Iterator[Any]) -> Iterator[tuple[Any, int]]:
        import pyarrow as pa

        for batch in batches:
            pairs = [(k, v) for k, v in zip(batch.column("key").to_pylist(),
                                            batch.column("value").to_pylist(), strict=True)
                     if v != b"bad"]
            yield pa.RecordBatch.from_pydict({
                "key": pa.array([k for k, _ in pairs], pa.binary()),
                "value": pa.array([str(2 * int(v)).encode() for _, v in pairs], pa.binary()),
            }), batch.num_rows - len(pairs)


def _through(topic: str | None = None) -> Through:
    return Through(_Doubled(), "partition", "offset",
                   topic_column=None if topic else "topic", topic=topic)


def _batch(spark: Any, bootstrap: str, topic: str, ends: dict[int, int]) -> Any:
    """A Kafka batch of ``topic``: each partition's records from 0 to ``ends``."""
    import json

    offsets = json.dumps({topic: {str(p): end for p, end in ends.items()}})
    starts = json.dumps({topic: {str(p): 0 for p in ends}})
    return (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", starts)
            .option("endingOffsets", offsets).load()
            .select("key", "value", "topic", "partition", "offset"))


def _source(bootstrap: str, make: Callable[..., str], n: int, bad: frozenset[int] = frozenset(),
            ) -> tuple[str, dict[int, int]]:
    topic = make(3)
    produce(bootstrap, topic, ((f"k{i}".encode(), b"bad" if i in bad else str(i).encode())
                               for i in range(n)))
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(3)}
    finally:
        consumer.close()
    return topic, ends


def _doubled(bootstrap: str, topic: str) -> list[int]:
    seen, records = read_all(bootstrap, topic)
    assert records == sum(seen.values())
    return sorted(int(v) for v, n in seen.items() for _ in range(n))


def _writer(bootstrap: str, topic: str, query_id: str | None = None,
            ) -> KafkaExactlyOnceWriter:
    return KafkaExactlyOnceWriter(bootstrap, name="through", topic=topic,
                                  query_id=query_id or uuid.uuid4().hex)


def test_the_pass_runs_in_the_tasks_and_a_rerun_is_skipped_by_origin(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    source, ends = _source(kafka_bootstrap, topic_factory, 300, frozenset({7, 99}))
    sink = topic_factory(2)
    writer = _writer(kafka_bootstrap, sink)
    batch = _batch(spark, kafka_bootstrap, source, ends)
    first = writer.write(batch, 0, _through())
    again = writer.write(batch, 0, _through())   # Spark re-runs batch 0
    assert (first.written, first.skipped, first.dropped) == (298, 0, 2)
    # the skipped slots report what their markers say was left out
    assert (again.written, again.skipped, again.dropped) == (0, 298, 2)
    assert again.counting_s > 0   # ranked by origin, in the JVM
    assert _doubled(kafka_bootstrap, sink) == sorted(2 * i for i in range(300)
                                                     if i not in (7, 99))


def test_a_batch_committed_in_part_writes_only_the_slots_left(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    """A failed run committed one slot of batch 0 (its rows and its marker, by origin,
    in one transaction, as its task would): the re-run skips that slot wherever its
    rows are now and writes the others."""
    from gridstream.spark._kafka_slots import Marker, marker_key, marker_partition
    from gridstream.spark.kafka_through import origin_content

    source, ends = _source(kafka_bootstrap, topic_factory, 300)
    sink = topic_factory(2)
    writer = _writer(kafka_bootstrap, sink)
    query = writer.query_id
    assert query is not None
    batch = _batch(spark, kafka_bootstrap, source, ends)
    writer._prepare(batch, query, 3)
    part = max(ends, key=lambda p: ends[p])
    taken = [r for r in batch.collect() if r.partition == part]
    rows = len(taken)
    assert rows == ends[part] > 0
    content = origin_content(source, part, 0, rows - 1, rows)
    producer = Producer({"bootstrap.servers": kafka_bootstrap,
                         "transactional.id": writer.transactional_id(query, 5)})
    producer.init_transactions(30)
    producer.begin_transaction()
    for row in taken:
        producer.produce(sink, str(2 * int(row.value)).encode(), bytes(row.key))
    marker = Marker(query, 5, 0, 0, rows, content)
    producer.produce(writer.marker_topic, marker.encode(), marker_key(query, 5),
                     partition=marker_partition(query, 5, writer._partitions))
    producer.commit_transaction(30)
    again = _writer(kafka_bootstrap, sink, query).write(batch, 0, _through())
    assert (again.written, again.skipped) == (300 - rows, rows), part
    assert _doubled(kafka_bootstrap, sink) == sorted(2 * i for i in range(300))


def _ends(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's end: records written, committed or not (and markers)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex})
    try:
        parts = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30,
                                                  cached=False)[1] for p in parts}
    finally:
        consumer.close()


def test_a_rerun_over_other_offsets_is_refused_before_any_task_writes(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    source, ends = _source(kafka_bootstrap, topic_factory, 300)
    sink = topic_factory(2)
    writer = _writer(kafka_bootstrap, sink)
    shorter = {p: max(end - 10, 1) for p, end in ends.items()}
    done = writer.write(_batch(spark, kafka_bootstrap, source, shorter), 0, _through())
    before = _ends(kafka_bootstrap, sink)
    with pytest.raises(SparkError, match="another slot layout"):
        writer.write(_batch(spark, kafka_bootstrap, source, ends), 0, _through())
    assert _ends(kafka_bootstrap, sink) == before   # not even an aborted write
    seen, records = read_all(kafka_bootstrap, sink)
    assert records == done.written == sum(shorter.values())


def test_a_source_of_one_topic_names_it_once(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    """The origin's topic given once (no topic column) knows a re-run as well."""
    source, ends = _source(kafka_bootstrap, topic_factory, 120)
    sink = topic_factory(1)
    writer = _writer(kafka_bootstrap, sink)
    batch = _batch(spark, kafka_bootstrap, source, ends).drop("topic")
    first = writer.write(batch, 0, _through(source))
    again = writer.write(batch, 0, _through(source))
    assert (first.written, again.skipped) == (120, 120)
    assert _doubled(kafka_bootstrap, sink) == sorted(2 * i for i in range(120))
