"""Malformed envelopes (fail / dead-letter) and an unavailable Cassandra, on real services.

A failed batch must leave its offsets uncommitted, so the same checkpoint restarted
with a fix (policy or store) processes exactly those records.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from gridstream.errors import StoreError
from gridstream.feeds import FeedConfig, StoreFeed
from gridstream.spark import MalformedEnvelopeError, TypeRegistry
from gridstream.spark.dead_letter import H_OFFSET, H_REASON, H_TOPIC
from gridstream.spark.sinks import CassandraSink
from gridstream.stores.cassandra import CassandraConfig
from tests.integration.support.spark_checks import check_cassandra, check_sql
from tests.integration.support.spark_workload import ORDER, PERSON, Workload, produce


def _pipeline(bootstrap: str, tmp: Path, topic: str, sink: dict[str, Any],
              **extra: Any) -> StoreFeed:
    config = FeedConfig.model_validate({
        "name": "errors", "topics": [topic], "checkpoint": str(tmp / "ckpt"),
        "trigger": "available_now", "sink": sink, **extra,
    })
    return StoreFeed(config, TypeRegistry.of([PERSON]), bootstrap_servers=bootstrap)


def _run(spark: Any, pipeline: StoreFeed) -> BaseException | None:
    from pyspark.errors import StreamingQueryException

    query = pipeline.start(spark)
    with contextlib.suppress(StreamingQueryException):
        query.awaitTermination(600)
    assert not query.isActive
    return query.exception()


def _commits(checkpoint: Path) -> list[str]:
    folder = checkpoint / "commits"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _dead_letters(bootstrap: str, topic: str, expected: int = 1) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    found: list[Any] = []
    for _ in range(30):
        found += [m for m in consumer.consume(100, timeout=1.0) if m.error() is None]
        if len(found) >= expected:
            break
    consumer.close()
    return found


def test_malformed_envelope_fails_then_dead_letters_from_the_same_offsets(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    topic, dlq = topic_factory(1), topic_factory(1)
    workload = Workload(seed=21)
    produce(kafka_bootstrap, {PERSON.name: topic, ORDER: topic}, workload.run(30, orders=3))
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, b'{"op": "EXPLODE", "type": "x"}', b"bad-1")
    producer.produce(topic, b"not json at all", b"bad-2", headers=[("trace", b"t-1")])
    producer.produce(topic, b"\x81\xa2op\xa5WRITE", b"bad-3", headers=[("gs.codec", b"msgpack")])
    producer.flush(30)
    produce(kafka_bootstrap, {PERSON.name: topic, ORDER: topic}, workload.run(30, orders=3))
    db = tmp_path / "store.db"
    sink = {"kind": "sql", "url": f"sqlite:///{db}"}

    failing = _pipeline(kafka_bootstrap, tmp_path, topic, sink)
    assert _run(spark, failing) is not None
    assert isinstance(failing.failure, MalformedEnvelopeError)
    assert failing.failure.count == 3 and failing.failure.offset == 30
    assert _commits(tmp_path / "ckpt") == []  # offsets not advanced
    assert not db.exists() or db.stat().st_size == 0 or not _has_rows(db)

    lenient = _pipeline(kafka_bootstrap, tmp_path, topic, sink,
                        errorHandlingPolicy="dead_letter", dead_letter_topic=dlq)
    assert _run(spark, lenient) is None
    assert sum(r.dead_lettered for r in lenient.reports) == 3
    check_sql(f"sqlite:///{db}", workload)
    letters = _dead_letters(kafka_bootstrap, dlq, expected=3)
    assert sorted(m.key() for m in letters) == [b"bad-1", b"bad-2", b"bad-3"]
    for message in letters:
        # the stream reads no headers: these come from reading the bad offsets again
        headers = dict(message.headers() or [])
        assert headers[H_TOPIC].decode() == topic
        assert int(headers[H_OFFSET]) in (30, 31, 32)
        assert headers[H_REASON]
        if message.key() == b"bad-2":
            assert message.value() == b"not json at all" and headers["trace"] == b"t-1"
        if message.key() == b"bad-3":
            assert headers["gs.codec"] == b"msgpack"
            assert headers[H_REASON].startswith(b"record codec is not json")


def test_parquet_change_log_fails_in_its_write_then_dead_letters_after_it(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    """The single-pass sink: the write itself fails on a malformed record (nothing
    published), and under dead_letter the counts come from the write's observation."""
    topic, dlq = topic_factory(2), topic_factory(1)
    workload = Workload(seed=23)
    ops = workload.run(40, orders=2)
    produce(kafka_bootstrap, {PERSON.name: topic, ORDER: topic}, ops[:20])
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, b'{"op": "EXPLODE", "type": "x"}', b"bad-1", partition=0)
    producer.produce(topic, b"not json at all", b"bad-2", partition=1)
    producer.produce(topic, None, b"bad-3", partition=1)
    producer.flush(30)
    produce(kafka_bootstrap, {PERSON.name: topic, ORDER: topic}, ops[20:])
    log = tmp_path / "changes"
    sink = {"kind": "parquet", "path": str(log)}

    failing = _pipeline(kafka_bootstrap, tmp_path, topic, sink)
    assert _run(spark, failing) is not None
    failure = failing.failure
    assert isinstance(failure, MalformedEnvelopeError), repr(failure)
    assert failure.count == 3 and failure.topic == topic
    assert (failure.partition, failure.offset) == min(
        [(0, _offset_of(kafka_bootstrap, topic, 0, b"bad-1")),
         (1, _offset_of(kafka_bootstrap, topic, 1, b"bad-2"))])
    assert _commits(tmp_path / "ckpt") == []
    assert not list(log.glob("type=*/date=*/topic=*/*.parquet"))  # nothing published

    lenient = _pipeline(kafka_bootstrap, tmp_path, topic, sink,
                        errorHandlingPolicy="dead_letter", dead_letter_topic=dlq)
    assert _run(spark, lenient) is None
    assert sum(r.records for r in lenient.reports) == len(ops) + 3
    assert sum(r.malformed for r in lenient.reports) == 3
    assert sum(r.dead_lettered for r in lenient.reports) == 3
    assert sum(r.result.applied for r in lenient.reports) == len(ops)
    assert list(log.glob("type=*/date=*/topic=*/*.parquet"))  # the pattern checked above
    changes = spark.read.parquet(str(log))
    assert changes.count() == len(ops)
    assert {r["version"] for r in changes.select("version").collect()} == \
        {op.version for op in ops}
    letters = _dead_letters(kafka_bootstrap, dlq, expected=3)
    assert sorted(m.key() for m in letters) == [b"bad-1", b"bad-2", b"bad-3"]


def _offset_of(bootstrap: str, topic: str, partition: int, key: bytes) -> int:
    from confluent_kafka import TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-find",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    try:
        for _ in range(30):
            for message in consumer.consume(500, timeout=1.0):
                if message.error() is None and message.key() == key:
                    return int(message.offset())
    finally:
        consumer.close()
    raise AssertionError(f"{key!r} not found in {topic}[{partition}]")


class _OpenedThenLost(CassandraSink):
    """A Cassandra sink whose store disappears after ``open``."""

    def open(self, spark: Any) -> None:
        pass


def _has_rows(db: Path) -> bool:
    import sqlite3

    with sqlite3.connect(db) as conn:
        tables = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        return any(conn.execute(f'SELECT COUNT(*) FROM "{t[0]}"').fetchone()[0] for t in tables)


def test_cassandra_unavailable_fails_the_batch_and_a_restart_recovers(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], keyspace: str,
        cassandra_session: Any, tmp_path: Path) -> None:
    topic = topic_factory(2)
    workload = Workload(seed=9)
    produce(kafka_bootstrap, {PERSON.name: topic, ORDER: topic}, workload.run(150))
    down = _pipeline(kafka_bootstrap, tmp_path, topic, {
        "kind": "cassandra", "keyspace": keyspace, "port": 1, "connect_timeout_s": 2})
    with pytest.raises(StoreError):
        down.start(spark)  # the sink cannot even open: nothing is read
    assert _commits(tmp_path / "ckpt") == []

    # Cassandra goes away after the sink opened: the batch itself fails, uncommitted.
    config = CassandraConfig(keyspace=keyspace, port=1, connect_timeout_s=2)
    lost = _pipeline(kafka_bootstrap, tmp_path, topic, {"kind": "cassandra", "keyspace": keyspace})
    lost.sink = _OpenedThenLost(config, lost.types)
    assert _run(spark, lost) is not None
    assert isinstance(lost.failure, StoreError)
    assert _commits(tmp_path / "ckpt") == []

    recovered = _pipeline(kafka_bootstrap, tmp_path, topic,
                          {"kind": "cassandra", "keyspace": keyspace})
    assert _run(spark, recovered) is None
    assert check_cassandra(cassandra_session, keyspace, workload) > 0


def test_envelope_checks_in_the_jvm(spark: Any) -> None:
    from gridstream.spark import decode_envelopes

    good = ('{"op":"WRITE","type":"T","id":%s,"version":3,"ts":1,"partition":0,'
            '"data":{"a":{"b":[1,2]}},"removed":[]}')
    cases: list[tuple[bytes | None, str | None]] = [
        ((good % '"007"').encode(), None),
        ((good % "42").encode(), None),
        (b'{"op":"REMOVE","type":"T","id":"x","version":4,"ts":1,"partition":0,"data":null}',
         None),
        (None, "tombstone"),
        (b"[1, 2]", "not a JSON envelope"),
        (b"nope", "not a JSON envelope"),
        (b'{"op":"BOOM","type":"T","id":"x","version":1,"ts":1,"partition":0}', "'op'"),
        (b'{"op":"WRITE","id":"x","version":1,"ts":1,"partition":0}', "'type'"),
        (b'{"op":"WRITE","type":"T","version":1,"ts":1,"partition":0}', "'id' is missing"),
        (b'{"op":"WRITE","type":"T","id":1.5,"version":1,"ts":1,"partition":0}', "'id' must"),
        (b'{"op":"WRITE","type":"T","id":"x","version":"9","ts":1,"partition":0}', "'version'"),
        (b'{"op":"WRITE","type":"T","id":"x","version":1,"partition":0}', "'ts'"),
        (b'{"op":"WRITE","type":"T","id":"x","version":1,"ts":1}', "'partition'"),
        (b'{"op":"WRITE","type":"T","id":"x","version":1,"ts":1,"partition":0,"data":5}',
         "'data'"),
        ((good % '{"a":1}').encode(), "'id' must"),
        ((good % "[1]").encode(), "'id' must"),
        ((good % "true").encode(), "'id' must"),
        ((good % "123456789012345678901234").encode(), "'id' must"),
        ((good % '"{not an object"').encode(), None),
        ((good % '"-1"').encode(), None),
        (b'{"op":"WRITE","type":"","id":"x","version":1,"ts":1,"partition":0}', "'type'"),
        (b'{"op":"WRITE","type":"T","id":"x","version":1,"ts":1,"partition":0,"data": {"a":1}}',
         None),
        (b'{"op":"WRITE","type":"T","id":"x","version":1,"ts":1,"partition":0,"data":[1]}',
         "'data'"),
    ]
    rows = [("t", 0, i, b"k", value, []) for i, (value, _) in enumerate(cases)]
    frame = spark.createDataFrame(rows, "topic STRING, partition INT, offset BIGINT, key BINARY, "
                                        "value BINARY, headers ARRAY<STRUCT<key: STRING, "
                                        "value: BINARY>>")
    decoded = {r["offset"]: r for r in decode_envelopes(frame).collect()}
    for i, (_, reason) in enumerate(cases):
        error = decoded[i]["error"]
        if reason is None:
            assert error is None, (i, error)
        else:
            assert error is not None and reason in error, (i, error)
    assert (decoded[0]["id"], decoded[0]["id_int"]) == ("007", False)
    assert (decoded[1]["id"], decoded[1]["id_int"]) == ("42", True)
    assert (decoded[19]["id"], decoded[19]["id_int"]) == ("-1", False)
    assert decoded[0]["data"] == '{"a":{"b":[1,2]}}'
    codec = spark.createDataFrame([("t", 0, 0, b"k", (good % '"a"').encode(),
                                    [("gs.codec", b"msgpack")])], frame.schema)
    assert "codec" in decode_envelopes(codec).first()["error"]
