"""Reading a mirror's position back from the offsets partition (``_scan``), on fakes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from confluent_kafka import TopicPartition

from gridstream.mirror._offsets import _scan, encode_position, partition_for


class Msg:
    def __init__(self, key: bytes, value: bytes | None) -> None:
        self._key, self._value = key, value

    def error(self) -> None:
        return None

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes | None:
        return self._value


class FakeOffsetsPartition:
    """One partition of the offsets topic, read by both clients the scan uses."""

    def __init__(self, messages: list[Msg]) -> None:
        self.messages = messages
        self.at = 0

    def list_topics(self, topic: str, timeout: float) -> Any:
        meta = SimpleNamespace(error=None, partitions={0: None})
        return SimpleNamespace(topics={topic: meta})

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float,
                              cached: bool) -> tuple[int, int]:
        return 0, len(self.messages)

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.at = partitions[0].offset

    def consume(self, num_messages: int, timeout: float) -> list[Msg]:
        out = self.messages[self.at:self.at + num_messages]
        self.at += len(out)
        return out

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        tp = partitions[0]
        return [TopicPartition(tp.topic, tp.partition, self.at)]


def test_a_deleted_position_is_no_position() -> None:
    assert partition_for("m", 1) == 0
    kafka = FakeOffsetsPartition([Msg(b"m", encode_position("m", 42)),
                                  Msg(b"other", encode_position("other", 7)),
                                  Msg(b"m", None)])  # the position deleted (tombstone)
    assert _scan(kafka, kafka, "offsets", "m", 1.0, None, 1.0) is None  # type: ignore[arg-type]


def test_the_newest_position_wins() -> None:
    kafka = FakeOffsetsPartition([Msg(b"m", encode_position("m", 42)), Msg(b"m", None),
                                  Msg(b"m", encode_position("m", 50)),
                                  Msg(b"other", encode_position("other", 7))])
    assert _scan(kafka, kafka, "offsets", "m", 1.0, None, 1.0) == 50  # type: ignore[arg-type]
