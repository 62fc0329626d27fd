"""OperationConsumer against a real topic: a committed position that retention deleted
fails loudly unless a reset is chosen; ``commit()`` covers only returned records."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from gridstream.consumer import OffsetOutOfRangeError, OperationConsumer, OperationRecord
from gridstream.mirror import Mirror
from gridstream.mirror.testing import InMemoryLog
from gridstream.operations import PropertySpec, TypeDescriptor
from tests.integration.support.mirror_helpers import kafka_endpoint

MakeTopic = Callable[..., str]


def _fill(kafka_bootstrap: str, topic: str, n: int) -> None:
    log = InMemoryLog([TypeDescriptor(name="Row", id_property="id", topic=topic,
                                      fixed=(PropertySpec("id", "str"),))])
    for i in range(n):
        log.write("Row", str(i), {"id": str(i)})
    mirror = Mirror(log, kafka_endpoint(kafka_bootstrap), name=f"it-{uuid.uuid4().hex[:8]}")
    while mirror.run_once():
        pass
    mirror.stop()


def _read(consumer: OperationConsumer, n: int, polls: int = 30) -> list[OperationRecord]:
    got: list[OperationRecord] = []
    for _ in range(polls):
        got.extend(consumer.consume(n - len(got), timeout_s=1.0))
        if len(got) >= n:
            break
    return got


def _group() -> str:
    return f"gs-test-{uuid.uuid4().hex[:8]}"


def test_a_position_lost_to_retention_fails_loudly(kafka_bootstrap: str,
                                                   topic_factory: MakeTopic) -> None:
    topic = topic_factory(1)
    _fill(kafka_bootstrap, topic, 10)
    group = _group()
    with OperationConsumer(kafka_bootstrap, topics=[topic], group_id=group) as consumer:
        got = _read(consumer, 3)
        assert [r.id for r in got] == ["0", "1", "2"]
        consumer.commit()
    committed = got[-1].offset + 1
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    cut = committed + 4  # the records after the committed position are deleted
    for future in admin.delete_records([TopicPartition(topic, 0, cut)]).values():
        future.result(timeout=30)

    with OperationConsumer(kafka_bootstrap, topics=[topic], group_id=group) as consumer, \
            pytest.raises(OffsetOutOfRangeError) as raised:
        _read(consumer, 1)
    assert (raised.value.topic, raised.value.partition, raised.value.offset) == \
        (topic, 0, committed)

    # opting in jumps to the earliest record still there
    with OperationConsumer(kafka_bootstrap, topics=[topic], group_id=group,
                           on_offset_out_of_range="earliest") as consumer:
        resumed = _read(consumer, 1)
    assert resumed and resumed[0].offset >= cut

    # a group that never committed starts at the earliest record, without an error
    with OperationConsumer(kafka_bootstrap, topics=[topic], group_id=_group()) as consumer:
        fresh = _read(consumer, 1)
    assert fresh and fresh[0].offset == resumed[0].offset


def test_commit_covers_only_records_returned(kafka_bootstrap: str,
                                             topic_factory: MakeTopic) -> None:
    topic = topic_factory(1)
    _fill(kafka_bootstrap, topic, 10)
    group = _group()
    with OperationConsumer(kafka_bootstrap, topics=[topic], group_id=group) as consumer:
        seen: list[str] = []
        for record in consumer:  # prefetches a batch, yields one at a time
            seen.append(record.id)
            if len(seen) == 3:
                break
        consumer.commit()
    with OperationConsumer(kafka_bootstrap, topics=[topic], group_id=group) as consumer:
        rest = _read(consumer, 7)
    assert [r.id for r in rest] == [str(i) for i in range(3, 10)]
