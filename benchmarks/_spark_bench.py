"""Shared parts of the Spark store-pipeline benchmarks: workload, topic, timing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gridstream.operations import Operation, OpType, PropertySpec, TypeDescriptor
from gridstream.protocol import OperationEncoder

BOOTSTRAP = "127.0.0.1:9092"
ITEM = TypeDescriptor(
    name="bench.Item",
    id_property="id",
    fixed=(
        PropertySpec("id", "str"), PropertySpec("name", "str"), PropertySpec("qty", "int"),
        PropertySpec("price", "float"), PropertySpec("active", "bool"),
        PropertySpec("address", "object", (PropertySpec("city", "str"),
                                           PropertySpec("zip", "str"))),
    ),
)


def item(i: int) -> dict[str, Any]:
    """One entry (~150 bytes of JSON) with a nested object."""
    return {"id": f"item-{i}", "name": f"name-{i % 977}", "qty": i % 1000,
            "price": (i % 10_000) / 100, "active": i % 3 == 0,
            "address": {"city": f"city-{i % 50}", "zip": f"{i % 99999:05d}"}}


def operations(rows: int) -> list[Operation]:
    """``rows`` WRITEs of distinct entities, versions 1..rows."""
    return [Operation(OpType.WRITE, ITEM.name, f"item-{i}", i + 1, item(i), 0,
                      1_700_000_000_000 + i) for i in range(rows)]


def make_topic(partitions: int = 2) -> str:
    topic = f"gs-bench-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                  replication_factor=1)])[topic].result(30)
    return topic


def delete_topic(topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for future in admin.delete_topics([topic]).values():
        future.result(30)


def produce(topic: str, ops: list[Operation], encoder: OperationEncoder | None = None) -> None:
    """Produce the envelopes as the mirror does (JSON unless ``encoder`` says otherwise,
    key = id, gs.* headers)."""
    encoder = encoder or OperationEncoder()
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 20,
                         "enable.idempotence": True, "compression.type": "lz4"})
    for op in ops:
        msg = encoder.encode(op, ITEM, topic)
        while True:
            try:
                producer.produce(topic, msg.value, msg.key, headers=list(msg.headers))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    producer.flush(60)


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def read_to_end(topic: str, bootstrap: str = BOOTSTRAP) -> Iterator[Any]:
    """Every record of ``topic`` a ``read_committed`` consumer sees, each partition read
    to its end (``AssertionError`` if one gives nothing for 10 s before its end)."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        parts = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        open_parts = set(parts)
        idle_since = time.monotonic()
        while open_parts:
            # short waits: consume() returns early only once it has 10 000 records
            msgs = consumer.consume(10_000, timeout=0.2)
            if not msgs:
                if time.monotonic() - idle_since > 10:
                    raise AssertionError(f"{topic}: no end of partitions {sorted(open_parts)}")
                continue
            idle_since = time.monotonic()
            for m in msgs:
                err = m.error()
                if err is None:
                    yield m
                elif err.code() == KafkaError._PARTITION_EOF:
                    open_parts.discard(m.partition())
                else:
                    raise KafkaException(err)
    finally:
        consumer.close()
