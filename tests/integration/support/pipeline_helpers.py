"""Producing input and reading output for the pipeline API's integration tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition


def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes | None]],
            ) -> int:
    """Write ``(key, value)`` records; returns how many."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    count = 0
    for key, value in records:
        producer.produce(topic, key=key, value=value)
        count += 1
        if count % 10_000 == 0:
            producer.flush(30)
    assert producer.flush(30) == 0
    return count


def read(bootstrap: str, topic: str, *, committed: bool = True,
         ) -> list[tuple[Any, Any, dict[str, Any]]]:
    """Every record of ``topic`` up to its current end: ``(key, value, headers)``;
    ``read_committed`` unless ``committed=False``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed" if committed
                         else "read_uncommitted"})
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        parts = [TopicPartition(topic, p, 0) for p in meta.partitions]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=30)[1]
                for tp in parts}
        consumer.assign(parts)
        out: list[tuple[Any, Any, dict[str, Any]]] = []
        done = {p for p, end in ends.items() if end == 0}
        while len(done) < len(ends):
            msg = consumer.poll(5)
            if msg is None:
                positions = consumer.position(parts)
                done |= {tp.partition for tp in positions if tp.offset >= ends[tp.partition]}
                continue
            assert msg.error() is None, msg.error()
            headers: dict[str, Any] = dict(msg.headers() or [])
            out.append((msg.key(), msg.value(), headers))
            partition, offset = int(msg.partition() or 0), int(msg.offset() or 0)
            if offset + 1 >= ends[partition]:
                done.add(partition)
        return out
    finally:
        consumer.close()


def props(bootstrap: str, **more: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "key.deserializer": "StringDeserializer",
            "value.deserializer": "StringDeserializer", "auto.offset.reset": "earliest",
            **more}


def out_props(bootstrap: str, **more: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "key.serializer": "StringSerializer",
            "value.serializer": "StringSerializer", **more}


def shout(kv: tuple[str, str]) -> tuple[str, str]:
    """A step of the run-file test: the value in capitals."""
    return (kv[0], kv[1].upper())


def no_x(kv: tuple[str, str]) -> bool:
    """A step of the run-file test: values other than 'x'."""
    return kv[1] != "x"
