"""The sink's Kafka positions, also committed to a consumer group, for lag tools.

Spark keeps a sink's offsets in its checkpoint, which is the truth: a restart resumes
from there. Kafka's own tools (``kafka-consumer-groups.sh``, Burrow, the exporters)
read consumer groups, so after each completed batch the sink commits the batch's end
offsets to the group ``connect-<connector name>`` too (Kafka Connect's naming). The group
trails the checkpoint by at most the runner's report interval; nothing ever reads from
it. A commit that fails is logged (once a minute at most) and never fails the flow.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from gridstream.kafka.config import shared_config
from gridstream.spark.kafka_source import client_options, kafka_offsets

__all__ = ["GroupPositions", "group_id"]

log = logging.getLogger(__name__)
_WARN_EVERY_S = 60.0


def group_id(connector: str) -> str:
    """The consumer group a sink connector's positions are committed to."""
    return f"connect-{connector}"


class GroupPositions:
    """Commits the end offsets of a sink's completed batches to its consumer group."""

    def __init__(self, connector: str, bootstrap_servers: str,
                 properties: Mapping[str, Any]) -> None:
        self.group = group_id(connector)
        options = client_options(bootstrap_servers, properties)
        self._config = {**shared_config({k.removeprefix("kafka."): v
                                         for k, v in options.items()}),
                        "group.id": self.group, "enable.auto.commit": False,
                        "on_commit": self._on_commit}
        self._consumer: Consumer | None = None
        self._committed: dict[tuple[str, str], int] = {}
        self._warned_at = 0.0

    def progressed(self, progress: Mapping[str, Any] | None) -> None:
        """Commit the end offsets of the query's last completed batch (``progress``:
        ``StreamingQuery.lastProgress``), if they moved since the last commit."""
        if not progress:
            return
        ends: dict[tuple[str, str], int] = {}
        for source in progress.get("sources", []):
            ends.update(kafka_offsets(source.get("endOffset")))
        if not ends or ends == self._committed:
            return
        offsets = [TopicPartition(topic, int(part), offset)
                   for (topic, part), offset in sorted(ends.items())]
        try:  # asynchronous: a broker away never holds up the runner
            if self._consumer is None:
                self._consumer = Consumer(self._config)
            self._consumer.commit(offsets=offsets, asynchronous=True)
            self._consumer.poll(0)  # serves the results of earlier commits
        except (KafkaException, ValueError, RuntimeError) as exc:
            self._warn(exc)
            return
        self._committed = ends

    def _on_commit(self, err: Any, partitions: Any) -> None:
        if err is not None:
            self._warn(err)
            self._committed = {}  # commit again at the next batch

    def _warn(self, problem: object) -> None:
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            log.warning("cannot commit a sink's positions to consumer group %r (lag tools "
                        "see older ones; the checkpoint is unaffected): %s", self.group,
                        problem)

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()
