"""Settings of the Kafka endpoint: producer defaults, record timestamps, topics."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["PRODUCER_DEFAULTS", "RECORD_TIMESTAMPS", "TopicSettings"]

PRODUCER_DEFAULTS: Mapping[str, str | int | bool] = {
    "acks": "all",
    "enable.idempotence": True,
    "compression.type": "lz4",
    "linger.ms": 5,
    "partitioner": "murmur2_random",
}
"""Safe defaults under the user's producer properties (murmur2 matches Java clients)."""

RECORD_TIMESTAMPS = ("send", "commit")
"""``send``: a record's timestamp is when the mirror produced it (librdkafka's time, so
time-based retention counts from delivery); ``commit``: the operation's commit time.
The commit time is always in the ``gs.ts`` header and the envelope's ``ts``."""


@dataclass(frozen=True, slots=True)
class TopicSettings:
    """How topics are created on demand (``-1``: the broker's default)."""

    create: bool = True
    partitions: int = -1
    replication_factor: int = -1
    config: Mapping[str, str] | None = None
