"""Undeliverable operations: a clear error under ``fail``, a dead letter under
``dead_letter``, never a silent drop."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from gridstream.mirror import (
    KafkaEndpointConfig,
    KafkaSyncEndpoint,
    Mirror,
    Reason,
    UndeliverableError,
)
from gridstream.mirror.kafka import committed_position
from gridstream.mirror.testing import InMemoryLog
from gridstream.operations import Operation, OpType, TypeDescriptor
from gridstream.protocol import OperationDecoder
from tests.integration.support.mirror_helpers import consume_all, kafka_endpoint

MakeTopic = Callable[..., str]


def _bad_log(topic: str, small_topic: str, *cases: str) -> InMemoryLog:
    """One good write, then the bad operation of each case, then one more good write."""
    good = TypeDescriptor(name="Good", id_property="id", topic=topic)
    small = TypeDescriptor(name="Small", id_property="id", topic=small_topic)
    doc = TypeDescriptor(name="Doc", id_property="id")
    log = InMemoryLog([good, small, doc])
    log.write("Good", "g1", {"id": "g1"})
    bad: dict[str, Operation] = {
        "unknown_type": Operation(OpType.WRITE, "Ghost", "x", 0, {"id": "x"}, 0, 0),
        "no_topic": Operation(OpType.WRITE, "Doc", "x", 0, {"id": "x"}, 0, 0),
        "unserializable": Operation(OpType.WRITE, "Good", "x", 0, {"v": object()}, 0, 0),
        "oversized": Operation(OpType.WRITE, "Small", "x", 0, {"v": "y" * 20_000}, 0, 0),
    }
    for case in cases:
        log.append([bad[case]])
    log.write("Good", "g2", {"id": "g2"})
    return log


CASES = ["unknown_type", "no_topic", "unserializable", "oversized"]


@pytest.mark.parametrize("case", CASES)
def test_fail_policy_stops_with_a_clear_error(kafka_bootstrap: str, topic_factory: MakeTopic,
                                              case: str) -> None:
    topic, small = topic_factory(1), topic_factory(1, max_message_bytes=8192)
    log = _bad_log(topic, small, case)
    name = f"it-{uuid.uuid4().hex[:10]}"
    mirror = Mirror(log, kafka_endpoint(kafka_bootstrap), name=name, max_batch_ms=0,
                    max_batch_operations=1)
    assert mirror.run_once() == 1
    with pytest.raises(UndeliverableError) as raised:
        mirror.run_once()
    error = raised.value
    assert error.reason == Reason(case) and error.entity_id == "x" and error.version == 1
    assert case in str(error) and "Good" not in str(error).split(":")[0]
    assert log.acks[name] == 1 and committed_position(kafka_bootstrap, name) == 1
    mirror.stop()
    assert [r.id for r in consume_all(kafka_bootstrap, [topic], 1, settle_s=1.0)] == ["g1"]


def test_dead_letter_policy_sends_each_with_its_reason(kafka_bootstrap: str,
                                                       topic_factory: MakeTopic) -> None:
    topic, small, dlq = topic_factory(1), topic_factory(1, max_message_bytes=8192), \
        topic_factory(1)
    log = _bad_log(topic, small, *CASES)
    endpoint = KafkaSyncEndpoint(KafkaEndpointConfig(
        bootstrap_servers=kafka_bootstrap, on_undeliverable="dead_letter",
        dead_letter_topic=dlq))
    name = f"it-{uuid.uuid4().hex[:10]}"
    mirror = Mirror(log, endpoint, name=name)
    while mirror.run_once():
        pass
    mirror.stop()
    assert endpoint.dead_lettered == {case: 1 for case in CASES}
    assert committed_position(kafka_bootstrap, name) == log.end_seq() == 6
    letters = _raw(kafka_bootstrap, dlq, 4)
    assert sorted(h["gs.dlq.reason"] for h, _ in letters) == sorted(CASES)
    for headers, value in letters:
        assert headers["gs.dlq.mirror"] == name and headers["gs.dlq.error"]
        envelope = OperationDecoder().decode(value, [(k, v.encode()) for k, v in headers.items()])
        assert envelope.id == "x" and envelope.version in (1, 2, 3, 4)
        if headers["gs.dlq.reason"] in ("oversized", "unserializable"):
            assert envelope.data is None and headers["gs.dlq.topic"]
    good = consume_all(kafka_bootstrap, [topic], 2, settle_s=1.0)
    assert [str(r.id) for r in good] == ["g1", "g2"]


def _raw(bootstrap: str, topic: str, n: int) -> list[tuple[dict[str, Any], bytes]]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    out: list[tuple[dict[str, Any], bytes]] = []
    try:
        for _ in range(60):
            for msg in consumer.consume(10, timeout=1.0):
                assert msg.error() is None
                headers = {k: (v or b"").decode() for k, v in msg.headers() or []}
                out.append((headers, msg.value() or b""))
            if len(out) >= n:
                break
    finally:
        consumer.close()
    return out
