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
from gridstream.kafka.errors import kafka_error

__all__ = ["DEFAULT_OFFSETS_TOPIC", "committed_position", "decode_position", "encode_position",
           "partition_for", "read_position"]

DEFAULT_OFFSETS_TOPIC = "__gridstream_mirror_offsets"
SHARED_PREFIXES = ("bootstrap.servers", "security.", "sasl.", "ssl.", "client.", "socket.",
                    "broker.", "api.version", "metadata.", "reconnect.", "debug", "log_level",
                    "connections.max.idle.ms", "topic.metadata")
"""Client properties a plain consumer of the offsets topic shares with the producer."""


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


def read_position(config: Mapping[str, Any], topic: str, mirror_name: str,
                  timeout_s: float = 30.0, expected_log: str | None = None) -> int | None:
    """The last committed position of ``mirror_name`` (None if it has none yet)."""
    try:
        consumer = Consumer({
            **config, "group.id": f"gridstream-mirror-position-{mirror_name}",
            "enable.auto.commit": False, "isolation.level": "read_committed",
            "auto.offset.reset": "earliest", "enable.partition.eof": False,
        })
    except KafkaException as exc:
        raise kafka_error("invalid kafka consumer configuration", exc, config) from exc
    try:
        return _scan(consumer, topic, mirror_name, timeout_s, expected_log)
    except KafkaException as exc:
        raise kafka_error(f"cannot read the position of mirror {mirror_name!r}", exc,
                          config) from exc
    finally:
        consumer.close()


def _scan(consumer: Consumer, topic: str, mirror_name: str, timeout_s: float,
          expected_log: str | None) -> int | None:
    metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if metadata is None or metadata.error is not None or not metadata.partitions:
        raise EndpointError(f"offsets topic {topic!r} is not available")
    partition = partition_for(mirror_name, len(metadata.partitions))
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                               timeout=timeout_s, cached=False)
    if high <= low:
        return None
    consumer.assign([TopicPartition(topic, partition, low)])
    key = mirror_name.encode()
    found: bytes | None = None
    deadline = time.monotonic() + timeout_s
    while True:
        for msg in consumer.consume(1000, timeout=0.5):
            if msg.error() is not None:
                raise KafkaException(msg.error())
            if msg.key() == key and msg.value() is not None:
                found = msg.value()
        position = consumer.position([TopicPartition(topic, partition)])[0].offset
        if position >= high:
            return None if found is None else decode_position(found, expected_log)
        if time.monotonic() > deadline:
            raise EndpointError(f"timed out reading offsets topic {topic!r} to its end "
                                f"(at {position}, end {high})")


def committed_position(bootstrap_servers: str, mirror_name: str, *,
                       offsets_topic: str = DEFAULT_OFFSETS_TOPIC,
                       properties: Mapping[str, Any] | None = None,
                       timeout_s: float = 30.0) -> int | None:
    """The last committed position of a mirror, read without fencing it (for monitoring
    and tests)."""
    config = KafkaProperties(properties).layered({}, {"bootstrap.servers": bootstrap_servers})
    shared = {k: v for k, v in config.client_config().items() if k.startswith(SHARED_PREFIXES)}
    return read_position(shared, offsets_topic, mirror_name, timeout_s)
