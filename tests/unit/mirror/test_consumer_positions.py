"""What ``OperationConsumer.commit()`` commits: only positions of records returned to
the caller (never a prefetched record, never one that failed to decode)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from gridstream.consumer import OperationConsumer, UndecodableRecordError
from gridstream.errors import ConfigError, KafkaClientError
from gridstream.operations import OpType
from gridstream.protocol import Envelope, create_codec


class Msg:
    def __init__(self, partition: int, offset: int, value: bytes | None) -> None:
        self._partition, self._offset, self._value = partition, offset, value

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes]]:
        return [("gs.codec", b"json")]

    def timestamp(self) -> tuple[int, int]:
        return (1, 1)


class FakeKafka:
    """Hands out the queued messages, as many as asked; records commits."""

    def __init__(self, messages: list[Msg]) -> None:
        self.messages = messages
        self.commits: list[dict[tuple[str, int], int]] = []

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Msg]:
        out, self.messages = self.messages[:num_messages], self.messages[num_messages:]
        return out

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> list[Any]:
        self.commits.append({(tp.topic, tp.partition): tp.offset for tp in offsets})
        return []

    def close(self) -> None:
        pass


def _good(partition: int, offset: int) -> Msg:
    envelope = Envelope(op=OpType.WRITE, type="T", id=f"{partition}-{offset}",
                        version=offset + 1, ts=1, partition=0, data={"x": offset})
    return Msg(partition, offset, create_codec("json").encode(envelope, None))


def _consumer(messages: list[Msg], policy: str = "fail") -> tuple[OperationConsumer, FakeKafka]:
    consumer = OperationConsumer("127.0.0.1:1", topics=["t"], group_id="g",
                                 on_decode_error=policy)
    kafka = FakeKafka(messages)
    consumer._consumer = kafka  # type: ignore[assignment]
    return consumer, kafka


def test_commit_after_iterating_covers_only_the_records_yielded() -> None:
    consumer, kafka = _consumer([_good(0, i) for i in range(10)])
    it = iter(consumer)
    first = next(it)
    second = next(it)
    assert (first.offset, second.offset) == (0, 1)
    consumer.commit()
    assert kafka.commits == [{("t", 0): 2}]  # not 10: eight records are only prefetched


def test_fail_policy_commits_nothing_past_an_undecodable_record() -> None:
    messages = [_good(0, 0), _good(1, 0), _good(0, 1), Msg(0, 2, b"not json"), _good(0, 3),
                _good(1, 1)]
    consumer, kafka = _consumer(messages)
    returned = consumer.consume(100, timeout_s=0)
    assert [(r.partition, r.offset) for r in returned] == [(0, 0), (1, 0), (0, 1)]
    with pytest.raises(UndecodableRecordError) as raised:
        consumer.consume(100, timeout_s=0)
    assert (raised.value.partition, raised.value.offset) == (0, 2)
    with pytest.raises(UndecodableRecordError):  # again: the record is never passed
        consumer.consume(100, timeout_s=0)
    consumer.commit()
    assert kafka.commits == [{("t", 0): 2, ("t", 1): 1}]


def test_fail_policy_with_nothing_decoded_first_raises_at_once() -> None:
    consumer, kafka = _consumer([Msg(0, 0, b"{}"), _good(0, 1)])
    with pytest.raises(UndecodableRecordError):
        consumer.consume(10, timeout_s=0)
    consumer.commit()
    assert kafka.commits == []


def test_consume_returns_at_most_max_records_and_keeps_the_rest() -> None:
    consumer, kafka = _consumer([_good(0, i) for i in range(5)])
    consumer._fill(5, 0)  # a fetch larger than what the caller takes next
    assert [r.offset for r in consumer.consume(2, timeout_s=0)] == [0, 1]
    consumer.commit()
    assert [r.offset for r in consumer.consume(10, timeout_s=0)] == [2, 3, 4]
    consumer.commit()
    assert kafka.commits == [{("t", 0): 2}, {("t", 0): 5}]


def test_skip_policy_and_tombstones_advance_the_commit() -> None:
    consumer, kafka = _consumer([_good(0, 0), Msg(0, 1, b"bad"), Msg(0, 2, None)], "skip")
    assert [r.offset for r in consumer.consume(10, timeout_s=0)] == [0]
    consumer.commit()
    assert kafka.commits == [{("t", 0): 3}]
    assert (consumer.skipped, consumer.tombstones) == (1, 1)


def test_reset_is_an_explicit_choice() -> None:
    assert OperationConsumer("b:1", topics=["t"], group_id="g")._props[
        "auto.offset.reset"] == "error"
    assert OperationConsumer("b:1", topics=["t"], group_id="g",
                             on_offset_out_of_range="earliest")._props[
        "auto.offset.reset"] == "earliest"
    with pytest.raises(ConfigError):
        OperationConsumer("b:1", topics=["t"], group_id="g",
                          consumer_properties={"auto.offset.reset": "earliest"})
    with pytest.raises(ConfigError):
        OperationConsumer("b:1", topics=["t"], group_id="g", on_offset_out_of_range="skip")


class FlakyCommitKafka(FakeKafka):
    """The group coordinator is still loading for the first commits (a retriable error)."""

    def __init__(self, messages: list[Msg], failures: int) -> None:
        super().__init__(messages)
        self.failures = failures

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> list[Any]:
        if self.failures:
            self.failures -= 1
            raise KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                            retriable=True))
        return super().commit(offsets, asynchronous)


def test_a_retriable_commit_error_is_tried_again() -> None:
    consumer = OperationConsumer("127.0.0.1:1", topics=["t"], group_id="g")
    kafka = FlakyCommitKafka([_good(0, i) for i in range(3)], failures=2)
    consumer._consumer = kafka  # type: ignore[assignment]
    assert len(consumer.consume(10)) == 3
    consumer.commit()
    assert kafka.commits == [{("t", 0): 3}]


def test_a_fatal_commit_error_is_raised_at_once() -> None:
    class Fatal(FakeKafka):
        def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> list[Any]:
            raise KafkaException(KafkaError(KafkaError.ILLEGAL_GENERATION, retriable=False))

    consumer = OperationConsumer("127.0.0.1:1", topics=["t"], group_id="g")
    consumer._consumer = Fatal([_good(0, 0)])  # type: ignore[assignment]
    consumer.consume(10)
    with pytest.raises(KafkaClientError) as err:
        consumer.commit()
    assert err.value.code == "ILLEGAL_GENERATION"


def test_consume_cli_with_max_commits_only_what_it_printed(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from gridstream import consumer as consumer_module

    kafka = FakeKafka([_good(0, i) for i in range(10)])

    def fake_open(self: OperationConsumer) -> OperationConsumer:
        self._consumer = kafka  # type: ignore[assignment]
        return self

    monkeypatch.setattr(OperationConsumer, "open", fake_open)
    assert consumer_module.main(["--topic", "t", "--group", "g", "--max", "3",
                                 "--commit"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 3
    # the 7 records not printed stay uncommitted: the group reads them next time
    assert kafka.commits and kafka.commits[-1] == {("t", 0): 3}
    assert max(o for c in kafka.commits for o in c.values()) == 3
