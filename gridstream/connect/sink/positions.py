"""The sink's Kafka positions, also committed to a consumer group, for lag tools.

Spark keeps a sink's offsets in its checkpoint, which is the truth: a restart resumes
from there. Kafka's own tools (``kafka-consumer-groups.sh``, Burrow, the exporters)
read consumer groups, so after each completed batch the sink commits the batch's end
offsets to the group ``connect-<connector name>`` too (Kafka Connect's naming), and again
every hour while nothing moves (Kafka drops an empty group's offsets after
``offsets.retention.minutes``). The group trails the checkpoint by at most the runner's
report interval; nothing ever reads from it. A commit that fails is logged (once a
minute at most) and never fails the flow.

The sink's Kafka properties are the Java client's (Spark's Kafka source takes them):
where they hold settings the C client (librdkafka) does not know — a JAAS line, a
truststore — the group is not committed, which is said once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from gridstream.kafka.config import client_config, scrub
from gridstream.ops.lag import kafka_offsets

__all__ = ["GroupPositions", "group_id"]

log = logging.getLogger(__name__)
_WARN_EVERY_S = 60.0
_AGAIN_EVERY_S = 3600.0


def group_id(connector: str) -> str:
    """The consumer group a sink connector's positions are committed to."""
    return f"connect-{connector}"


class GroupPositions:
    """Commits the end offsets of a sink's completed batches to its consumer group."""

    def __init__(self, connector: str, bootstrap_servers: str,
                 properties: Mapping[str, Any]) -> None:
        self.group = group_id(connector)
        self._config = {**client_config(bootstrap_servers, properties),
                        "group.id": self.group, "enable.auto.commit": False,
                        "on_commit": self._on_commit}
        self._consumer: Consumer | None = None
        self._unusable = False
        self._committed: dict[tuple[str, str], int] = {}
        self._committed_at = 0.0
        self._warned_at = 0.0

    def progressed(self, progress: Mapping[str, Any] | None) -> None:
        """Commit the end offsets of the query's last completed batch (``progress``:
        ``StreamingQuery.lastProgress``), if they moved since the last commit (or an
        hour passed)."""
        if self._unusable:
            return
        if self._consumer is not None:
            self._consumer.poll(0)  # serves the results of earlier commits
        ends: dict[tuple[str, str], int] = {}
        for source in (progress or {}).get("sources", []):
            ends.update(kafka_offsets(source.get("endOffset")))
        now = time.monotonic()
        if not ends or (ends == self._committed and now - self._committed_at < _AGAIN_EVERY_S):
            return
        if self._consumer is None:
            try:
                self._consumer = Consumer(self._config)
            except (KafkaException, ValueError, TypeError) as exc:
                self._unusable = True
                log.warning("consumer group %r: the sink's positions are not committed there "
                            "(lag tools do not see it; the checkpoint is unaffected): its "
                            "Kafka properties do not suit the C client: %s", self.group,
                            scrub(str(exc), self._config))
                return
        offsets = [TopicPartition(topic, int(part), offset)
                   for (topic, part), offset in sorted(ends.items())]
        try:  # asynchronous: a broker away never holds up the runner
            self._consumer.commit(offsets=offsets, asynchronous=True)
        except (KafkaException, RuntimeError) as exc:
            self._warn(exc)
            return
        self._committed, self._committed_at = ends, now

    def _on_commit(self, err: Any, partitions: Any) -> None:
        if err is not None:
            self._warn(err)
            self._committed = {}  # commit again at the next report

    def _warn(self, problem: object) -> None:
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            log.warning("cannot commit a sink's positions to consumer group %r (lag tools "
                        "see older ones; the checkpoint is unaffected): %s", self.group,
                        scrub(str(problem), self._config))

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.poll(0)
                consumer.close()
            except (KafkaException, RuntimeError) as exc:
                log.warning("consumer group %r: closing its committer failed: %s", self.group,
                            scrub(str(exc), self._config))
