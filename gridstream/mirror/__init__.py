"""The write-behind mirror and its sync endpoints (Kafka first). An in-memory log for
tests and examples is in ``gridstream.mirror.testing``."""

from __future__ import annotations

from gridstream.mirror.config import (
    PRODUCER_DEFAULTS,
    KafkaEndpointConfig,
    MirrorSettings,
    TopicSettings,
)
from gridstream.mirror.endpoint import SyncEndpoint
from gridstream.mirror.kafka import KafkaSyncEndpoint
from gridstream.mirror.policy import Reason, UndeliverableError, UndeliverablePolicy
from gridstream.mirror.service import HasLogReader, Mirror, MirrorMetrics, RetryPolicy

__all__ = [
    "PRODUCER_DEFAULTS",
    "HasLogReader",
    "KafkaEndpointConfig",
    "KafkaSyncEndpoint",
    "Mirror",
    "MirrorMetrics",
    "MirrorSettings",
    "Reason",
    "RetryPolicy",
    "SyncEndpoint",
    "TopicSettings",
    "UndeliverableError",
    "UndeliverablePolicy",
]
