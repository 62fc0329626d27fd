"""The driver's scan of one query's commit markers (the exactly-once Kafka writer).

Every partition of the marker topic is read, so markers are found whatever partition
count they were written under. One ``read_committed`` consumer reads all the partitions
at once, and a ``read_uncommitted`` one gives their real ends; both live as long as the
scan. Reads are incremental: a partition is read from where the last scan ended.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from gridstream.errors import SparkError
from gridstream.kafka.admin import watermark_offsets
from gridstream.kafka.config import shared_config
from gridstream.spark._kafka_slots import Marker

__all__ = ["MarkerScan"]


class MarkerScan:
    """The last committed marker of each slot of query ``query_id``."""

    def __init__(self, config: Mapping[str, Any], topic: str, query_id: str) -> None:
        self.config, self.topic, self.query_id = config, topic, query_id
        self.prefix = f"{query_id}/".encode()
        self._committed: Consumer | None = None
        self._ends: Consumer | None = None
        self._next: dict[int, int] = {}
        """Per partition, the offset the next scan reads from."""
        self._values: dict[int, dict[bytes, bytes]] = {}
        """Per partition, the last committed value of each of the query's keys."""
        self._partitions = 0
        """The partition count the consumers were made for."""

    def _consumers(self, partitions: int) -> tuple[Consumer, Consumer]:
        """The two consumers; new ones when the topic has gained partitions since (a
        consumer's metadata would not serve a new partition before its next refresh)."""
        if partitions != self._partitions:
            self._close_consumers()
        if self._committed is None or self._ends is None:
            base = shared_config(self.config)
            base.update({"group.id": "gridstream-spark-markers", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": False})
            self._ends = Consumer({**base, "isolation.level": "read_uncommitted"})
            self._committed = Consumer({**base, "isolation.level": "read_committed"})
            self._partitions = partitions
        return self._committed, self._ends

    def markers(self, partitions: int, wait_s: float) -> dict[int, Marker]:
        """``{slot: marker}``: the last committed marker of each slot of the query, the
        partitions read to their real ends (an open transaction there is waited for, up
        to ``wait_s``: the transaction timeout and a margin, after which the broker has
        aborted it)."""
        committed, ends = self._consumers(partitions)
        deadline = time.monotonic() + min(wait_s, 30.0)  # one bound for every partition
        starts: list[TopicPartition] = []
        highs: dict[int, int] = {}
        for partition in range(partitions):
            tp = TopicPartition(self.topic, partition)
            low, high = watermark_offsets(ends, tp, max(deadline - time.monotonic(), 0.1))
            start = max(self._next.get(partition, low), low)
            if start < high:
                starts.append(TopicPartition(self.topic, partition, start))
            highs[partition] = max(high, start)
        if starts:
            self._read(committed, starts, highs, wait_s)
        for partition, high in highs.items():
            self._next[partition] = high
        return self._found()

    def _read(self, committed: Consumer, starts: list[TopicPartition], highs: dict[int, int],
              wait_s: float) -> None:
        committed.assign(starts)
        pending = {tp.partition for tp in starts}
        deadline = time.monotonic() + wait_s
        try:
            while pending:
                for msg in committed.consume(1000, timeout=0.2):
                    if msg.error() is not None:
                        raise KafkaException(msg.error())
                    key, value = msg.key(), msg.value()
                    if key is None or not key.startswith(self.prefix):
                        continue
                    values = self._values.setdefault(int(msg.partition() or 0), {})
                    if value is not None:
                        values[key] = value
                    else:  # a tombstone: no marker
                        values.pop(key, None)
                positions = committed.position(
                    [TopicPartition(self.topic, p) for p in sorted(pending)])
                pending -= {tp.partition for tp in positions
                            if tp.offset >= highs[tp.partition]}
                if pending and time.monotonic() > deadline:
                    raise SparkError(
                        f"cannot read marker partition(s) {sorted(pending)} of "
                        f"{self.topic!r} to their end within {wait_s:g}s: a transaction "
                        "there stayed open longer than this writer's transaction timeout "
                        "(a writer sharing the marker topic with a larger "
                        "transaction.timeout.ms?)")
        finally:
            committed.unassign()

    def _found(self) -> dict[int, Marker]:
        found: dict[int, Marker] = {}
        for partition in sorted(self._values):  # a tie goes to the lowest partition
            for value in self._values[partition].values():
                marker = Marker.decode(value)
                if marker.query != self.query_id:
                    continue
                known = found.get(marker.slot)
                if known is None or marker.batch > known.batch:  # stale: another partition
                    found[marker.slot] = marker
        return found

    def _close_consumers(self) -> None:
        consumers = (self._committed, self._ends)
        self._committed = self._ends = None
        self._partitions = 0
        for consumer in consumers:
            if consumer is not None:
                try:
                    consumer.close()
                except KafkaException:  # closing: the other one is closed all the same
                    continue

    def close(self) -> None:
        self._close_consumers()
        self._next.clear()
        self._values.clear()
