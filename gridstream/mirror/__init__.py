"""The write-behind mirror and its sync endpoints (Kafka first)."""

from __future__ import annotations

from gridstream.mirror.endpoint import SyncEndpoint
from gridstream.mirror.kafka import PRODUCER_DEFAULTS, KafkaSyncEndpoint, TopicSettings
from gridstream.mirror.policy import Reason, UndeliverableError, UndeliverablePolicy
from gridstream.mirror.service import HasLogReader, Mirror, MirrorMetrics, RetryPolicy
from gridstream.mirror.testing import InMemoryLog

__all__ = [
    "PRODUCER_DEFAULTS",
    "HasLogReader",
    "InMemoryLog",
    "KafkaSyncEndpoint",
    "Mirror",
    "MirrorMetrics",
    "Reason",
    "RetryPolicy",
    "SyncEndpoint",
    "TopicSettings",
    "UndeliverableError",
    "UndeliverablePolicy",
]
