"""Create topics on demand and read the limits that decide whether a record fits.

A topic just created is not at once visible everywhere: the broker answering the next
request may not have its metadata yet (``UNKNOWN_TOPIC_OR_PART``) or a partition may
have no leader yet. ``ensure_topics`` therefore returns only once every wanted topic's
metadata shows all its partitions with a leader (bounded by ``timeout_s``), and
``topic_max_message_bytes`` retries an unknown topic within its bound too. Even then the
leader may not serve the partition yet (``NOT_LEADER_FOR_PARTITION`` for a moment after
the metadata names it): ``watermark_offsets`` asks again within its bound.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.cimpl import NewTopic

from gridstream.errors import KafkaClientError
from gridstream.kafka.errors import error_of, kafka_error

__all__ = ["TopicSpec", "ensure_topics", "topic_max_message_bytes", "wait_for_topics",
           "watermark_offsets"]

_POLL_S = 0.1
_NOT_SERVED_YET = frozenset({
    KafkaError._UNKNOWN_PARTITION,  # the client's metadata: no leader known yet
    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.OFFSET_NOT_AVAILABLE,  # a new leader whose high watermark lags its epoch
})
"""What a partition answers until its leader serves it (a topic just created, a leader
just elected)."""


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A topic to create if missing. ``-1`` lets the broker pick its defaults."""

    name: str
    partitions: int = -1
    replication_factor: int = -1
    config: Mapping[str, str] = field(default_factory=dict)


def ensure_topics(admin: AdminClient, specs: Iterable[TopicSpec], timeout_s: float = 30.0) -> None:
    """Create the topics that do not exist yet (an existing topic is left as it is), then
    wait until every wanted topic is usable (``wait_for_topics``)."""
    wanted = {s.name: s for s in specs}
    if not wanted:
        return
    try:
        existing = set(admin.list_topics(timeout=timeout_s).topics)
    except KafkaException as exc:
        raise kafka_error("cannot list topics", exc) from exc
    missing = [s for name, s in wanted.items() if name not in existing]
    if missing:
        new = [
            NewTopic(s.name, num_partitions=s.partitions,
                     replication_factor=s.replication_factor, config=dict(s.config))
            for s in missing
        ]
        for name, future in admin.create_topics(new, operation_timeout=timeout_s).items():
            try:
                future.result(timeout=timeout_s)
            except KafkaException as exc:
                err = error_of(exc)
                if err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                raise kafka_error(f"cannot create topic {name!r}", exc) from exc
    wait_for_topics(admin, wanted.values(), timeout_s)


def wait_for_topics(admin: AdminClient, specs: Iterable[TopicSpec],
                    timeout_s: float = 30.0) -> None:
    """Wait until each topic's metadata shows it with all its partitions (at least
    ``partitions`` when given) and a leader for each; ``KafkaClientError`` naming the
    topic and what was missing after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    for spec in specs:
        while True:
            why = _not_ready(admin, spec, max(deadline - time.monotonic(), 0.1))
            if why is None:
                break
            if time.monotonic() >= deadline:
                raise KafkaClientError(
                    f"topic {spec.name!r} is not usable {timeout_s}s after its creation: {why}",
                    code=None, retriable=True)
            time.sleep(_POLL_S)


def _not_ready(admin: AdminClient, spec: TopicSpec, timeout_s: float) -> str | None:
    """Why ``spec``'s topic is not usable yet (None when it is)."""
    try:
        metadata = admin.list_topics(spec.name, timeout=timeout_s).topics.get(spec.name)
    except KafkaException as exc:
        err = error_of(exc)
        if err is not None and err.retriable():
            return f"metadata request failed: {err.name()}"
        raise kafka_error(f"cannot describe topic {spec.name!r}", exc) from exc
    if metadata is None:
        return "not in the metadata"
    if metadata.error is not None:
        if metadata.error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART,
                                     KafkaError.LEADER_NOT_AVAILABLE) \
                or metadata.error.retriable():
            return metadata.error.name()
        raise kafka_error(f"cannot describe topic {spec.name!r}", metadata.error)
    partitions = metadata.partitions
    if not partitions or len(partitions) < spec.partitions:
        return f"{len(partitions)} of {max(spec.partitions, 1)} partitions visible"
    leaderless = sorted(p for p, info in partitions.items()
                        if info.leader < 0 or info.error is not None)
    if leaderless:
        return f"partitions {leaderless} have no leader"
    return None


def topic_max_message_bytes(admin: AdminClient, topic: str, timeout_s: float = 30.0) -> int | None:
    """The topic's ``max.message.bytes`` (None if it cannot be read); a topic the broker
    does not know yet (just created) is asked for again until ``timeout_s``."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            futures: dict[Any, Any] = admin.describe_configs([resource])
            entries = next(iter(futures.values())).result(timeout=timeout_s)
            break
        except KafkaException as exc:
            err = error_of(exc)
            unknown = err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            if not unknown or time.monotonic() >= deadline:
                raise kafka_error(f"cannot describe topic {topic!r}", exc) from exc
            time.sleep(_POLL_S)
    entry = entries.get("max.message.bytes")
    if entry is None or entry.value is None:
        return None
    return int(entry.value)


def watermark_offsets(consumer: Consumer, tp: TopicPartition, timeout_s: float
                      ) -> tuple[int, int]:
    """``(low, high)`` of ``tp`` as its leader has them now (``read_uncommitted``: the
    log end; ``read_committed``: the last stable offset). A partition that is not served
    yet (a topic just created, a leader just elected) is asked again until ``timeout_s``;
    any other error, or that one past the bound, is raised as the client raised it. The
    caller knows the topic exists (a missing one would be waited for to the bound)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            low, high = consumer.get_watermark_offsets(
                tp, timeout=max(deadline - time.monotonic(), _POLL_S), cached=False)
            return int(low), int(high)
        except KafkaException as exc:
            err = error_of(exc)
            if err is None or err.code() not in _NOT_SERVED_YET \
                    or time.monotonic() >= deadline:
                raise
            time.sleep(_POLL_S)
