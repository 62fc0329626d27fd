"""Smoke proofs that the real parts fit: Kafka <-> Spark (with checkpoints), kcat, CQL."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer

Acked = dict[tuple[int, int], tuple[str, str]]


def _produce(bootstrap: str, topic: str, records: list[tuple[str, str]]) -> Acked:
    """Produce keyed records; return {(partition, offset): (key, value)} as acknowledged."""
    acked: Acked = {}

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None, err
        acked[(msg.partition(), msg.offset())] = (msg.key().decode(), msg.value().decode())

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key, value in records:
        producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    return acked


def _stream_to_parquet(spark: Any, bootstrap: str, topic: str, out: Path, checkpoint: Path) -> None:
    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value",
                    "partition", "offset")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None


def _read(spark: Any, out: Path) -> dict[tuple[int, int], tuple[str, str]]:
    rows = spark.read.parquet(str(out)).collect()
    result = {(r.partition, r.offset): (r.key, r.value) for r in rows}
    assert len(result) == len(rows), "a record was read twice"
    return result


def test_kafka_to_spark_stream_resumes_from_checkpoint(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path
) -> None:
    topic = topic_factory(partitions=3)
    first = _produce(kafka_bootstrap, topic, [(f"k{i % 17}", f"v{i}") for i in range(500)])
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    _stream_to_parquet(spark, kafka_bootstrap, topic, out, checkpoint)
    assert _read(spark, out) == first
    assert {p for p, _ in first} == {0, 1, 2}

    second = _produce(kafka_bootstrap, topic, [(f"k{i % 17}", f"w{i}") for i in range(200)])
    _stream_to_parquet(spark, kafka_bootstrap, topic, out, checkpoint)  # restart, same checkpoint
    assert _read(spark, out) == {**first, **second}


def test_spark_batch_write_to_kafka_read_back(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(partitions=2)
    rows = [(f"id-{i}", f"payload-{i}") for i in range(300)]
    (spark.createDataFrame(rows, "key STRING, value STRING")
     .write.format("kafka").option("kafka.bootstrap.servers", kafka_bootstrap)
     .option("topic", topic).save())
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: dict[str, str] = {}
    try:
        for _ in range(60):
            for msg in consumer.consume(500, timeout=1.0):
                assert msg.error() is None, msg.error()
                seen[msg.key().decode()] = msg.value().decode()
            if len(seen) == len(rows):
                break
    finally:
        consumer.close()
    assert seen == dict(rows)


def test_third_party_client_kcat(kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    kcat = shutil.which("kcat")
    assert kcat, "kcat is required (scripts/bootstrap.sh --tests installs it)"
    topic = topic_factory(partitions=1)
    meta = subprocess.run([kcat, "-b", kafka_bootstrap, "-L", "-t", topic], capture_output=True,
                          text=True, timeout=30, check=True)
    assert f'topic "{topic}" with 1 partitions' in meta.stdout
    subprocess.run([kcat, "-b", kafka_bootstrap, "-P", "-t", topic, "-K", ":"],
                   input="a:1\nb:2\n", text=True, timeout=30, check=True)
    out = subprocess.run([kcat, "-b", kafka_bootstrap, "-C", "-t", topic, "-e", "-q",
                          "-f", "%k=%s\n"], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.splitlines() == ["a=1", "b=2"]


def test_cql_round_trip(cassandra_session: Any, keyspace: str) -> None:
    cassandra_session.execute(f"CREATE TABLE {keyspace}.t (id int PRIMARY KEY, name text)")
    insert = cassandra_session.prepare(f"INSERT INTO {keyspace}.t (id, name) VALUES (?, ?)")
    for i in range(50):
        cassandra_session.execute(insert, (i, f"n{i}"))
    rows = cassandra_session.execute(f"SELECT id, name FROM {keyspace}.t")
    assert sorted((r.id, r.name) for r in rows) == [(i, f"n{i}") for i in range(50)]
