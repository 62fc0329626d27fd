"""Mirror → real Kafka → consumer: exactly once, per-entity order, whole transactions."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

import pytest

from gridstream.consumer import OperationConsumer, OperationRecord
from gridstream.errors import KafkaClientError
from gridstream.mirror import KafkaEndpointConfig, KafkaSyncEndpoint, Mirror
from gridstream.mirror.kafka import committed_position
from gridstream.mirror.testing import InMemoryLog
from gridstream.operations import PropertySpec, TypeDescriptor
from gridstream.reconcile import compare
from gridstream.reconcile.readers import from_records
from tests.integration.support.mirror_helpers import (
    assert_exactly_once,
    consume_all,
    kafka_endpoint,
    random_workload,
)

MakeTopic = Callable[..., str]


def _type(topic: str) -> TypeDescriptor:
    return TypeDescriptor(name="Account", id_property="id", topic=topic,
                          fixed=(PropertySpec("id", "str"), PropertySpec("n", "int"),
                                 PropertySpec("pad", "str")))


def _drain(mirror: Mirror) -> None:
    while mirror.run_once():
        pass


def _name() -> str:
    return f"it-{uuid.uuid4().hex[:10]}"


def test_each_operation_exactly_once_in_entity_order(kafka_bootstrap: str,
                                                     topic_factory: MakeTopic) -> None:
    topic = topic_factory(3)
    log = InMemoryLog([_type(topic)])
    bulks = random_workload(log, "Account", 3000)
    mirror = Mirror(log, kafka_endpoint(kafka_bootstrap), name=_name(),
                    max_batch_operations=250, max_batch_ms=0)
    _drain(mirror)
    mirror.stop()
    records = consume_all(kafka_bootstrap, [topic], 3000)
    assert_exactly_once(records, bulks)
    logged = from_records("log", [op for b in bulks for op in b.operations], log.types())
    folded = from_records("kafka", records, log.types())
    result = compare(logged, folded)
    assert result.matches, (result.summary(), result.first)
    assert len(folded.entities) > 10
    first = records[0]
    assert first.key == str(first.id).encode()
    names = {k for k, _ in first.headers}
    assert {"gs.op", "gs.type", "gs.version", "gs.partition", "gs.codec"} <= names


def test_the_content_checks_fail_when_one_value_differs(kafka_bootstrap: str,
                                                        topic_factory: MakeTopic) -> None:
    topic = topic_factory(2)
    log = InMemoryLog([_type(topic)])
    bulks = random_workload(log, "Account", 200)
    mirror = Mirror(log, kafka_endpoint(kafka_bootstrap), name=_name())
    _drain(mirror)
    mirror.stop()
    records = consume_all(kafka_bootstrap, [topic], 200)
    assert_exactly_once(records, bulks)
    ops = [op for b in bulks for op in b.operations]
    last = {(op.type_name, str(op.id)): op for op in ops}
    victim = next(op for op in reversed(ops) if not op.op.is_delete
                  and last[(op.type_name, str(op.id))] is op)
    index = next(i for i, r in enumerate(records) if r.version == victim.version)
    record = records[index]
    assert record.data is not None
    changed = {**record.data, "n": 1000}
    tampered = list(records)
    tampered[index] = dataclasses.replace(record, envelope=record.envelope._replace(data=changed))
    with pytest.raises(AssertionError, match=f"Account {victim.id} version {victim.version}: "
                                             "n logged"):
        assert_exactly_once(tampered, bulks)
    result = compare(from_records("log", ops, log.types()),
                     from_records("kafka", tampered, log.types()))
    assert not result.matches and result.different == 1 and result.first is not None
    assert (result.first.id, result.first.path, result.first.place) == \
        (str(victim.id), "n", "1000")


def test_restart_and_crash_between_commit_and_ack_deliver_once(
        kafka_bootstrap: str, topic_factory: MakeTopic) -> None:
    topic = topic_factory(3)
    log = InMemoryLog([_type(topic)])
    bulks = random_workload(log, "Account", 1200)
    name = _name()
    first = Mirror(log, kafka_endpoint(kafka_bootstrap), name=name, max_batch_operations=100)
    for _ in range(4):
        first.run_once()
    first.stop()
    # a batch committed to Kafka whose log acknowledgement never happened (crash)
    acked = log.acks[name]
    endpoint = kafka_endpoint(kafka_bootstrap)
    endpoint.open(name)
    crashed = log.read(acked, 100)
    endpoint.write_batch(crashed, log.types())
    endpoint.close()
    assert committed_position(kafka_bootstrap, name) == crashed[-1].next_seq
    assert log.acks[name] == acked
    second = Mirror(log, kafka_endpoint(kafka_bootstrap), name=name)
    assert second.open() == crashed[-1].next_seq
    _drain(second)
    second.stop()
    assert log.acks[name] == log.end_seq()
    assert_exactly_once(consume_all(kafka_bootstrap, [topic], 1200), bulks)


def test_a_restarted_mirror_fences_its_zombie(kafka_bootstrap: str,
                                              topic_factory: MakeTopic) -> None:
    topic = topic_factory(1)
    log = InMemoryLog([_type(topic)])
    log.write("Account", "a", {"id": "a"})
    name = _name()
    zombie = kafka_endpoint(kafka_bootstrap)
    zombie.open(name)
    successor = kafka_endpoint(kafka_bootstrap)
    successor.open(name)
    with pytest.raises(KafkaClientError) as raised:
        zombie.write_batch(log.read(0, 10), log.types())
    assert raised.value.code is not None and not raised.value.retriable
    successor.write_batch(log.read(0, 10), log.types())
    successor.close()
    zombie.close()
    assert len(consume_all(kafka_bootstrap, [topic], 1)) == 1


@pytest.mark.parametrize("codec", ["msgpack", "avro"])
def test_other_codecs_reach_the_consumer(kafka_bootstrap: str, topic_factory: MakeTopic,
                                         codec: str) -> None:
    topic = topic_factory(2)
    log = InMemoryLog([_type(topic)])
    bulks = random_workload(log, "Account", 300)
    mirror = Mirror(log, KafkaSyncEndpoint(KafkaEndpointConfig(bootstrap_servers=kafka_bootstrap,
                                                                codec=codec)), name=_name())
    _drain(mirror)
    mirror.stop()
    records = consume_all(kafka_bootstrap, [topic], 300, types=log.types())
    assert_exactly_once(records, bulks)
    assert {dict(r.headers)["gs.codec"] for r in records} == {codec.encode()}


def test_at_least_once_mode_delivers_without_transactions(kafka_bootstrap: str,
                                                          topic_factory: MakeTopic) -> None:
    topic = topic_factory(3)
    log = InMemoryLog([_type(topic)])
    bulks = random_workload(log, "Account", 500)
    endpoint = KafkaSyncEndpoint(KafkaEndpointConfig(bootstrap_servers=kafka_bootstrap,
                                                     exactly_once=False))
    mirror = Mirror(log, endpoint, name=_name())
    _drain(mirror)
    assert endpoint.position() is None
    mirror.stop()
    records = consume_all(kafka_bootstrap, [topic], 500, read_committed=False)
    assert_exactly_once(records, bulks)


def test_consumer_commits_only_when_told(kafka_bootstrap: str,
                                         topic_factory: MakeTopic) -> None:
    topic = topic_factory(1)
    log = InMemoryLog([_type(topic)])
    for i in range(10):
        log.write("Account", str(i), {"id": str(i)})
    mirror = Mirror(log, kafka_endpoint(kafka_bootstrap), name=_name())
    _drain(mirror)
    mirror.stop()
    group = f"gs-test-{uuid.uuid4().hex[:8]}"

    def read(n: int, commit_first: int = 0) -> list[int]:
        consumer = OperationConsumer(kafka_bootstrap, topics=[topic], group_id=group)
        got: list[OperationRecord] = []
        with consumer:
            while len(got) < n:
                got.extend(consumer.consume(n - len(got), timeout_s=1.0))
            if commit_first:
                consumer.commit(got[:commit_first])
        return [r.version for r in got]

    assert read(10, commit_first=4) == list(range(10))
    assert read(6) == list(range(4, 10))  # committed after the 4th record only


def test_undecodable_records_fail_loudly_or_are_skipped_and_counted(
        kafka_bootstrap: str, topic_factory: MakeTopic) -> None:
    from confluent_kafka import Producer

    from gridstream.consumer import UndecodableRecordError

    topic = topic_factory(1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, b"not an envelope", b"k")
    producer.produce(topic, b'{"op":"WRITE","type":"T","id":"a","version":1,"ts":1,'
                            b'"partition":0,"data":{}}', b"a")
    assert producer.flush(30) == 0
    strict = OperationConsumer(kafka_bootstrap, topics=[topic],
                               group_id=f"gs-test-{uuid.uuid4().hex[:8]}")
    with strict, pytest.raises(UndecodableRecordError) as raised:
        for _ in range(30):
            strict.consume(10, timeout_s=1.0)
    assert (raised.value.topic, raised.value.offset) == (topic, 0)
    lenient = OperationConsumer(kafka_bootstrap, topics=[topic], on_decode_error="skip",
                                group_id=f"gs-test-{uuid.uuid4().hex[:8]}")
    got: list[OperationRecord] = []
    with lenient:
        for _ in range(30):
            got.extend(lenient.consume(10, timeout_s=1.0))
            if got:
                break
    assert [r.id for r in got] == ["a"] and lenient.skipped == 1
