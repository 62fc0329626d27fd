"""The mirror's position in Kafka: one compacted record per mirror, written inside the
same transaction as the batch it follows, read back with ``read_committed``."""

from __future__ import annotations

import time
import zlib
from collections.abc import Mapping
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaException, TopicPartition

from gridstream.errors import EndpointError, MirrorError
from gridstream.kafka import KafkaProperties
from gridstream.kafka.admin import watermark_offsets
from gridstream.kafka.config import shared_config
from gridstream.kafka.errors import kafka_error

__all__ = ["DEFAULT_OFFSETS_TOPIC", "OPEN_TRANSACTION_WAIT_S", "committed_position",
           "decode_position", "encode_position", "partition_for", "read_position"]

DEFAULT_OFFSETS_TOPIC = "__gridstream_mirror_offsets"


def partition_for(mirror_name: str, partitions: int) -> int:
    """The offsets-topic partition of a mirror (independent of the client partitioner)."""
    return zlib.crc32(mirror_name.encode()) % max(partitions, 1)


def encode_position(mirror_name: str, next_seq: int, log_id: str | None = None) -> bytes:
    body: dict[str, Any] = {"mirror": mirror_name, "next_seq": next_seq,
                            "ts": int(time.time() * 1000)}
    if log_id:
        body["log"] = log_id
    return orjson.dumps(body)


def decode_position(value: bytes, expected_log: str | None = None) -> int:
    """The record's ``next_seq``; refuses a position stored for another log."""
    try:
        raw = orjson.loads(value)
        next_seq = raw["next_seq"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise MirrorError("malformed mirror position record") from exc
    if not isinstance(next_seq, int):
        raise MirrorError("malformed mirror position record: next_seq is not an integer")
    stored_log = raw.get("log")
    if expected_log and stored_log and stored_log != expected_log:
        raise MirrorError(
            f"mirror {raw.get('mirror')!r} holds a position ({next_seq}) for another "
            f"operation log ({stored_log}, this one is {expected_log}); give this mirror a "
            "new name, or delete the old position, rather than skip operations")
    return next_seq


OPEN_TRANSACTION_WAIT_S = 90.0
"""How long reading a position waits for an open transaction in the offsets partition
to be resolved: longer than the default ``transaction.timeout.ms`` (60 s) plus the
broker's check for timed-out transactions (every 10 s by default)."""


def read_position(config: Mapping[str, Any], topic: str, mirror_name: str,
                  timeout_s: float = 30.0, expected_log: str | None = None,
                  open_transaction_wait_s: float = OPEN_TRANSACTION_WAIT_S) -> int | None:
    """The last committed position of ``mirror_name`` (None if it has none yet).

    The offsets partition is read, ``read_committed``, up to its real end (the high
    watermark, not the last stable offset): a transaction left open there — by another
    mirror sharing the partition that died mid-batch — hides everything after its first
    record, including this mirror's newer positions, until the broker aborts it (its
    ``transaction.timeout.ms``) or its owner restarts and fences it. The read waits for
    that up to ``open_transaction_wait_s``, then fails saying so, rather than resume
    from an older position and deliver operations twice."""
    group = f"gridstream-mirror-position-{mirror_name}"
    base = {**config, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "enable.partition.eof": False}
    try:
        consumer = Consumer({**base, "isolation.level": "read_committed"})
    except KafkaException as exc:
        raise kafka_error("invalid kafka consumer configuration", exc, config) from exc
    try:
        ends = Consumer({**base, "isolation.level": "read_uncommitted"})
    except KafkaException as exc:
        consumer.close()
        raise kafka_error("invalid kafka consumer configuration", exc, config) from exc
    try:
        return _scan(consumer, ends, topic, mirror_name, timeout_s, expected_log,
                     max(open_transaction_wait_s, timeout_s))
    except KafkaException as exc:
        raise kafka_error(f"cannot read the position of mirror {mirror_name!r}", exc,
                          config) from exc
    finally:
        ends.close()
        consumer.close()


def _scan(consumer: Consumer, ends: Consumer, topic: str, mirror_name: str,
          timeout_s: float, expected_log: str | None, wait_s: float) -> int | None:
    metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if metadata is None or metadata.error is not None or not metadata.partitions:
        raise EndpointError(f"offsets topic {topic!r} is not available")
    partition = partition_for(mirror_name, len(metadata.partitions))
    tp = TopicPartition(topic, partition)
    low, high = watermark_offsets(ends, tp, timeout_s)
    if high <= low:
        return None
    consumer.assign([TopicPartition(topic, partition, low)])
    key = mirror_name.encode()
    found: bytes | None = None
    deadline = time.monotonic() + wait_s
    while True:
        for msg in consumer.consume(1000, timeout=0.5):
            if msg.error() is not None:
                raise KafkaException(msg.error())
            if msg.key() == key:
                found = msg.value()  # a tombstone (None) deletes the position
        position = consumer.position([tp])[0].offset
        if position >= high:
            return None if found is None else decode_position(found, expected_log)
        if time.monotonic() > deadline:
            _, stable = watermark_offsets(consumer, tp, timeout_s)
            if stable < high:
                raise EndpointError(
                    f"cannot read the position of mirror {mirror_name!r}: a transaction "
                    f"left open in {topic!r} partition {partition} (from offset {stable}; "
                    f"the partition ends at {high}) still hides the newer positions after "
                    f"{wait_s:.0f}s. Another mirror sharing this offsets topic probably died "
                    "inside a transaction: restart it (that fences it and aborts the "
                    "transaction) or wait for its transaction.timeout.ms to pass, then retry")
            raise EndpointError(f"timed out reading offsets topic {topic!r} to its end "
                                f"(at {position}, end {high})")


def committed_position(bootstrap_servers: str, mirror_name: str, *,
                       offsets_topic: str = DEFAULT_OFFSETS_TOPIC,
                       properties: Mapping[str, Any] | None = None,
                       timeout_s: float = 30.0,
                       open_transaction_wait_s: float = OPEN_TRANSACTION_WAIT_S) -> int | None:
    """The last committed position of a mirror, read without fencing it (for monitoring
    and tests)."""
    config = KafkaProperties(properties).layered({}, {"bootstrap.servers": bootstrap_servers})
    shared = shared_config(config.client_config())
    return read_position(shared, offsets_topic, mirror_name, timeout_s,
                         open_transaction_wait_s=open_transaction_wait_s)
