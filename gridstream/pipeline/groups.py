"""Consumer-group offsets, only when asked: under ``NONE`` with ``group.id`` and
``enable.auto.commit=true`` a query starts from the group's committed offsets (when it
has no checkpoint position) and commits the offsets of each batch it finished."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from gridstream.errors import ConfigError
from gridstream.kafka.errors import kafka_error

if TYPE_CHECKING:
    from gridstream.pipeline.base import RunContext
    from gridstream.pipeline.kafka import KafkaSource

__all__ = ["commit_offsets", "starting_offsets"]

_TIMEOUT_S = 30.0


def _consumer(source: KafkaSource) -> Consumer:
    config = {**source.client.client_config(), "bootstrap.servers": source.bootstrap,
              "group.id": str(source.group_id), "enable.auto.commit": False}
    config.pop("auto.offset.reset", None)
    try:
        return Consumer(config)
    except KafkaException as exc:
        raise kafka_error("invalid kafka consumer configuration", exc, config) from exc


def starting_offsets(source: KafkaSource, context: RunContext) -> str:
    """Spark's ``startingOffsets`` JSON: each partition's committed offset, else
    ``auto.offset.reset`` (-2 earliest, -1 latest)."""
    if source.topics is None:
        raise ConfigError("committed group offsets need topics, not a pattern")
    consumer = _consumer(source)
    default = -2 if source.starting_offsets == "earliest" else -1
    try:
        wanted = []
        for topic in source.topics:
            meta = consumer.list_topics(topic, timeout=_TIMEOUT_S).topics[topic]
            wanted += [TopicPartition(topic, p) for p in meta.partitions]
        committed = consumer.committed(wanted, timeout=_TIMEOUT_S)
    except KafkaException as exc:
        raise kafka_error("cannot read the group's committed offsets", exc) from exc
    finally:
        consumer.close()
    offsets: dict[str, dict[str, int]] = {}
    for tp in committed:
        offsets.setdefault(tp.topic, {})[str(tp.partition)] = (
            tp.offset if tp.offset >= 0 else default)
    return json.dumps(offsets)


def commit_offsets(source: KafkaSource, end: Mapping[str, Any]) -> None:
    """Commit a finished batch's end offsets (``{"topic": {"0": 12}}``) for the group."""
    partitions = [TopicPartition(t, int(p), int(o)) for t, parts in end.items()
                  for p, o in parts.items()]
    if not partitions:
        return
    consumer = _consumer(source)
    try:
        consumer.commit(offsets=partitions, asynchronous=False)
    except KafkaException as exc:
        raise kafka_error("cannot commit the group's offsets", exc) from exc
    finally:
        consumer.close()
