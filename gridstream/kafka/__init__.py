"""Typed wrappers around the confluent-kafka clients: config, errors, topic admin."""

from __future__ import annotations

from gridstream.kafka.admin import (
    TopicSpec,
    ensure_topics,
    topic_max_message_bytes,
    wait_for_topics,
)
from gridstream.kafka.config import KafkaProperties, redact
from gridstream.kafka.errors import kafka_error

__all__ = [
    "KafkaProperties",
    "TopicSpec",
    "ensure_topics",
    "kafka_error",
    "redact",
    "topic_max_message_bytes",
    "wait_for_topics",
]
