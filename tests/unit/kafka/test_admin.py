"""A topic just created is waited for until its metadata shows every partition with a
leader, and describing its configuration retries while the broker does not know it."""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from gridstream.errors import KafkaClientError
from gridstream.kafka import TopicSpec, ensure_topics, topic_max_message_bytes
from gridstream.kafka import admin as admin_module


@pytest.fixture(autouse=True)
def _fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin_module, "_POLL_S", 0.001, raising=False)


@dataclass
class _Partition:
    leader: int
    error: KafkaError | None = None


@dataclass
class _Topic:
    partitions: dict[int, _Partition]
    error: KafkaError | None = None


@dataclass
class _Metadata:
    topics: dict[str, _Topic]


@dataclass
class _Entry:
    value: str


@dataclass
class SlowAdmin:
    """Like a broker whose metadata lags a creation: the topic is unknown, then has
    leaderless partitions, then is ready; its configuration is unknown at first too."""

    unknown_calls: int = 3
    leaderless_calls: int = 3
    unknown_configs: int = 2
    created: dict[str, int] = field(default_factory=dict)
    polls: dict[str, int] = field(default_factory=dict)
    describes: dict[str, int] = field(default_factory=dict)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> _Metadata:
        if topic is None:
            return _Metadata({})
        n = self.polls[topic] = self.polls.get(topic, 0) + 1
        if n <= self.unknown_calls:
            return _Metadata({topic: _Topic({}, KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))})
        leader = -1 if n <= self.unknown_calls + self.leaderless_calls else 1
        count = self.created[topic]
        return _Metadata({topic: _Topic({p: _Partition(leader if p else 1)
                                         for p in range(count)})})

    def create_topics(self, new: list[Any], operation_timeout: float = 0) -> dict[str, Any]:
        out = {}
        for topic in new:
            self.created[topic.topic] = topic.num_partitions
            future: Future[None] = Future()
            future.set_result(None)
            out[topic.topic] = future
        return out

    def describe_configs(self, resources: list[Any]) -> dict[Any, Any]:
        name = resources[0].name
        n = self.describes[name] = self.describes.get(name, 0) + 1
        future: Future[dict[str, _Entry]] = Future()
        if n <= self.unknown_configs or self.polls.get(name, 0) <= (
                self.unknown_calls + self.leaderless_calls):
            future.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
        else:
            future.set_result({"max.message.bytes": _Entry("123456")})
        return {resources[0]: future}


def test_created_topics_are_waited_for_until_every_partition_has_a_leader() -> None:
    fake = SlowAdmin()
    names = [f"t{i}" for i in range(20)]
    for name in names:
        ensure_topics(fake, [TopicSpec(name, 3, 1)], timeout_s=10)
        # ensure_topics returned: the metadata showed all three partitions led
        assert fake.polls[name] == fake.unknown_calls + fake.leaderless_calls + 1
        assert topic_max_message_bytes(fake, name, 10) == 123456


def test_describing_an_unknown_topic_retries_within_its_bound() -> None:
    fake = SlowAdmin(unknown_calls=0, leaderless_calls=0, unknown_configs=3)
    fake.created["t"] = 1
    fake.polls["t"] = 1
    assert topic_max_message_bytes(fake, "t", 10) == 123456
    assert fake.describes["t"] == 4


def test_a_topic_that_never_becomes_usable_fails_with_the_reason() -> None:
    fake = SlowAdmin(unknown_calls=10**9)
    with pytest.raises(KafkaClientError, match="UNKNOWN_TOPIC_OR_PART"):
        ensure_topics(fake, [TopicSpec("t", 2, 1)], timeout_s=0.5)


class _LeaderNotServing:
    """A consumer whose partition's leader answers ``code`` ``failures`` times first."""

    def __init__(self, code: int, failures: int) -> None:
        self.code, self.failures, self.calls = code, failures, 0

    def get_watermark_offsets(self, tp: Any, timeout: float, cached: bool) -> tuple[int, int]:
        assert cached is False and timeout > 0
        self.calls += 1
        if self.calls <= self.failures:
            raise KafkaException(KafkaError(self.code))
        return 3, 17


@pytest.mark.parametrize("code", [KafkaError.NOT_LEADER_FOR_PARTITION,
                                  KafkaError.LEADER_NOT_AVAILABLE,
                                  KafkaError.UNKNOWN_TOPIC_OR_PART,
                                  KafkaError._UNKNOWN_PARTITION,
                                  KafkaError.OFFSET_NOT_AVAILABLE])
def test_watermarks_of_a_partition_not_served_yet_are_asked_again(code: int) -> None:
    """The exactly-once writer's marker scan failed its batch on a marker topic created
    a moment before: NOT_LEADER_FOR_PARTITION from the broker the metadata named."""
    from confluent_kafka import TopicPartition

    consumer = _LeaderNotServing(code, failures=3)
    assert admin_module.watermark_offsets(consumer, TopicPartition("t", 0), 5.0) == (3, 17)
    assert consumer.calls == 4


def test_watermarks_raise_other_errors_and_give_up_at_the_bound() -> None:
    from confluent_kafka import TopicPartition

    other = _LeaderNotServing(KafkaError.TOPIC_AUTHORIZATION_FAILED, failures=1)
    with pytest.raises(KafkaException) as raised:
        admin_module.watermark_offsets(other, TopicPartition("t", 0), 5.0)
    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert other.calls == 1
    never = _LeaderNotServing(KafkaError.NOT_LEADER_FOR_PARTITION, failures=10**9)
    started = time.monotonic()
    with pytest.raises(KafkaException) as raised:
        admin_module.watermark_offsets(never, TopicPartition("t", 0), 0.05)
    assert time.monotonic() - started < 1.0 and never.calls > 1
    assert raised.value.args[0].code() == KafkaError.NOT_LEADER_FOR_PARTITION
