"""Create topics on demand and read the limits that decide whether a record fits."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.cimpl import NewTopic

from gridstream.kafka.errors import kafka_error

__all__ = ["TopicSpec", "ensure_topics", "topic_max_message_bytes"]


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A topic to create if missing. ``-1`` lets the broker pick its defaults."""

    name: str
    partitions: int = -1
    replication_factor: int = -1
    config: Mapping[str, str] = field(default_factory=dict)


def ensure_topics(admin: AdminClient, specs: Iterable[TopicSpec], timeout_s: float = 30.0) -> None:
    """Create the topics that do not exist yet; an existing topic is left as it is."""
    wanted = {s.name: s for s in specs}
    if not wanted:
        return
    existing = set(admin.list_topics(timeout=timeout_s).topics)
    missing = [s for name, s in wanted.items() if name not in existing]
    if not missing:
        return
    new = [
        NewTopic(s.name, num_partitions=s.partitions, replication_factor=s.replication_factor,
                 config=dict(s.config))
        for s in missing
    ]
    for name, future in admin.create_topics(new, operation_timeout=timeout_s).items():
        try:
            future.result(timeout=timeout_s)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue
            raise kafka_error(f"cannot create topic {name!r}", exc) from exc


def topic_max_message_bytes(admin: AdminClient, topic: str, timeout_s: float = 30.0) -> int | None:
    """The topic's ``max.message.bytes`` (None if it cannot be read)."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        futures: dict[Any, Any] = admin.describe_configs([resource])
        entries = next(iter(futures.values())).result(timeout=timeout_s)
    except KafkaException as exc:
        raise kafka_error(f"cannot describe topic {topic!r}", exc) from exc
    entry = entries.get("max.message.bytes")
    if entry is None or entry.value is None:
        return None
    return int(entry.value)
