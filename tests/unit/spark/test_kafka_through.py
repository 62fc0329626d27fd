"""A pass fused into the exactly-once writer's tasks: the origin a task's rows are known
by, and the pipeline's key/value split of its pass's output."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from gridstream.errors import SparkError
from gridstream.spark.kafka_through import Through, origin_content


def _rows(partitions: list[int], offsets: list[int], topics: list[str] | None = None,
          ) -> pa.RecordBatch:
    columns: dict[str, Any] = {"partition": pa.array(partitions, pa.int32()),
                               "offset": pa.array(offsets, pa.int64()),
                               "value": pa.array([b"v"] * len(offsets), pa.binary())}
    if topics is not None:
        columns["topic"] = topics
    return pa.RecordBatch.from_pydict(columns)


def _through(**kwargs: Any) -> Through:
    def nothing(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[pa.RecordBatch, int]]:
        yield from ()
    return Through(nothing, "partition", "offset", **kwargs)


def test_a_tasks_rows_are_known_by_their_topic_partition_offsets_and_count() -> None:
    through = _through(topic="t")
    batches = [_rows([2, 2], [7, 9]), _rows([], []), _rows([2], [12])]
    assert through.content(iter(batches)) == origin_content("t", 2, 7, 12, 3) == \
        "3:t[2]@7-12"
    assert through.content(iter([])) == "0"
    named = _through(topic_column="topic")
    assert named.content(iter([_rows([0], [4], ["a"])])) == "1:a[0]@4-4"


@pytest.mark.parametrize("batches", [
    [_rows([0, 1], [1, 2])],                       # two partitions in a batch
    [_rows([0], [1]), _rows([1], [2])],            # ... in two batches
])
def test_rows_of_two_partitions_in_one_task_are_refused(batches: list[pa.RecordBatch]) -> None:
    with pytest.raises(SparkError, match="one Kafka topic-partition's records a task"):
        _through(topic="t").content(iter(batches))


def test_rows_of_two_topics_in_one_task_are_refused() -> None:
    with pytest.raises(SparkError, match=r"spans a\[0\] and b\[0\]"):
        _through(topic_column="topic").content(iter([_rows([0, 0], [1, 2], ["a", "b"])]))


def test_the_origins_topic_is_a_column_or_one_name() -> None:
    with pytest.raises(ValueError, match="topic column or its one topic"):
        _through()
    with pytest.raises(ValueError, match="topic column or its one topic"):
        _through(topic="t", topic_column="topic")


def test_the_pipelines_pass_gives_the_writer_key_and_value_and_counts_error_rows() -> None:
    from gridstream.pipeline.serde import KeyValues

    out = pa.RecordBatch.from_pydict({
        "key": pa.array([b"a", None, b"c"], pa.binary()),
        "value": pa.array([b"1", None, b"3"], pa.binary()),
        "_gs_error": pa.array([None, "ValueError: x", None], pa.string()),
        "_gs_stage": pa.array([None, "map#1", None], pa.string())})
    clean = out.select(["key", "value"])

    def the_pass(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from batches

    got = list(KeyValues(the_pass)(iter([out, clean])))
    assert [(b.to_pylist(), n) for b, n in got] == [
        ([{"key": b"a", "value": b"1"}, {"key": b"c", "value": b"3"}], 1),
        (clean.to_pylist(), 0)]


def test_producer_properties_librdkafka_refuses_are_a_config_error_without_secrets() -> None:
    from gridstream.errors import ConfigError
    from gridstream.kafka import KafkaProperties
    from gridstream.spark.kafka_through import check_producer

    bad = KafkaProperties({"bootstrap.servers": "127.0.0.1:1", "buffer.memory": "5",
                           "sasl.password": "hunter2-secret"})
    with pytest.raises(ConfigError, match='No such configuration property: "buffer.memory"'
                       ) as refused:
        check_producer(bad)
    assert "hunter2-secret" not in str(refused.value)
    check_producer(KafkaProperties({"bootstrap.servers": "127.0.0.1:1", "linger.ms": 5}))


def test_a_pass_that_leaves_input_unread_fails_the_task() -> None:
    """Its rows would never be written: the task fails instead."""
    def first_only(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[pa.RecordBatch, int]]:
        yield next(batches).select(["value"]), 0

    class _Producer:
        sent: list[object] = []

        def produce(self, topic: str, value: object, key: object) -> None:
            self.sent.append(value)

    through = Through(first_only, "partition", "offset", topic="t")
    batches = iter([_rows([0], [1]), _rows([0], [2])])
    with pytest.raises(SparkError, match="left input rows unread"):
        through.write(batches, _Producer(), "out")  # type: ignore[arg-type]
    assert _Producer.sent == [b"v"]
    written, dropped = Through(first_only, "partition", "offset", topic="t").produce(
        iter([_rows([0], [1]), _rows([], [])]), _Producer(), "out")  # type: ignore[arg-type]
    assert (written, dropped) == (1, 0) and _Producer.sent == [b"v", b"v"]


def test_an_at_least_once_task_whose_records_are_not_delivered_fails() -> None:
    """No broker answers: the flush finds the records failed (librdkafka's delivery
    timeout) and the task fails with the client's error; the failed producer is not
    kept for the next task."""
    from gridstream.errors import KafkaClientError
    from gridstream.kafka import KafkaProperties
    from gridstream.spark import _producers
    from gridstream.spark.kafka_through import _produce_task

    def values(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[pa.RecordBatch, int]]:
        for batch in batches:
            yield batch.select(["value"]), 0

    properties = KafkaProperties({"bootstrap.servers": "127.0.0.1:1",
                                  "message.timeout.ms": 300, "sasl.password": "hunter2-x"})
    through = Through(values, "partition", "offset", topic="t")
    with pytest.raises(KafkaClientError,
                       match=r"the writer of 'out': 2 record\(s\) not delivered") as failed:
        list(_produce_task(through, properties, "out", 10.0,
                           iter([_rows([0, 0], [1, 2])])))
    assert "hunter2-x" not in str(failed.value)
    # every record failed, none is queued: the message names no wait it did not make
    assert "still queued" not in str(failed.value) and "10s" not in str(failed.value)
    assert not _producers._PLAIN   # dropped from the pool



def test_the_at_least_once_producer_keeps_the_sinks_secrets_and_no_transaction() -> None:
    """The secrets reach the producer as they are (a masked ``***`` would fail to
    authenticate, after the delivery timeout), and never its repr."""
    from gridstream.pipeline import KafkaSinks

    sink = KafkaSinks.kafka({"bootstrap.servers": "b:9092", "sasl.password": "hunter2-y",
                             "transactional.id": "x", "transaction.timeout.ms": 9000,
                             "linger.ms": 20}, "out")
    properties = sink.at_least_once_properties()
    config = properties.client_config()
    assert config["sasl.password"] == "hunter2-y" and config["linger.ms"] == 20
    assert config["bootstrap.servers"] == "b:9092" and config["acks"] == "all"
    assert "transactional.id" not in config and "transaction.timeout.ms" not in config
    assert "hunter2-y" not in repr(properties)


def test_a_producer_dropped_from_the_pool_before_its_flush_fails_it() -> None:
    """Its records' failures can no longer be told: never taken as delivered."""
    from gridstream.errors import KafkaClientError
    from gridstream.kafka import KafkaProperties
    from gridstream.spark import _producers

    properties = KafkaProperties({"bootstrap.servers": "127.0.0.1:1"})
    producer = _producers.idempotent(properties)
    assert _producers.undelivered(producer) == []
    _producers.discard(producer)
    assert _producers.undelivered(producer) is None
    with pytest.raises(KafkaClientError, match="closed before its records were acknowledged"):
        _producers.flush_delivered(_Flushed(), 1.0, "the writer", {})


class _Flushed:
    """A producer that flushed everything (and is in no pool)."""

    def flush(self, timeout: float | None = None) -> int:
        return 0
