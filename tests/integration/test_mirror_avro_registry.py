"""The mirror's Avro codec with the stack's schema registry: Confluent wire format, read
back by confluent-kafka's own ``AvroDeserializer``; refusals follow the mirror's policy."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from gridstream.errors import MirrorError
from gridstream.mirror import KafkaEndpointConfig, KafkaSyncEndpoint, Mirror
from gridstream.mirror.testing import InMemoryLog
from gridstream.operations import Operation, OpType, PropertySpec, TypeDescriptor
from gridstream.protocol.avro import AvroCodec, envelope_of_record

MakeTopic = Callable[..., str]


def _type(topic: str, suffix: str) -> TypeDescriptor:
    return TypeDescriptor(
        name=f"it.Account{suffix}", id_property="id", topic=topic,
        fixed=(PropertySpec("id", "str"), PropertySpec("n", "int"),
               PropertySpec("score", "float"), PropertySpec("born", "datetime"),
               PropertySpec("day", "date"), PropertySpec("balance", "decimal"),
               PropertySpec("photo", "bytes"), PropertySpec("tags", "list"),
               PropertySpec("attrs", "dict"),
               PropertySpec("address", "object", (PropertySpec("city", "str"),
                                                  PropertySpec("zip", "int")))))


def _entry(n: int) -> dict[str, Any]:
    return {"id": f"a-{n}", "n": n, "score": n / 4,
            "born": dt.datetime(2020, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=n),
            "day": dt.date(2021, 1, 1) + dt.timedelta(days=n), "balance": Decimal(f"{n}.25"),
            "photo": bytes([n % 256, 7]), "tags": [n, "x"], "attrs": {"k": n},
            "address": {"city": f"c{n}", "zip": n}, "dyn": {"free": [n]}}


def _read(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    out: list[Any] = []
    try:
        for _ in range(600):
            if len(out) >= count:
                break
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                out.append(msg)
    finally:
        consumer.close()
    assert len(out) == count
    return out


@pytest.mark.parametrize("strategy", ["topic", "record", "topic_record"])
def test_confluent_avro_deserializer_reads_the_mirrors_values(
        kafka_bootstrap: str, topic_factory: MakeTopic, registry_url: str,
        strategy: str) -> None:
    topic = topic_factory(2)
    account = _type(topic, uuid.uuid4().hex[:8])
    log = InMemoryLog([account])
    entries = {n: _entry(n) for n in range(40)}
    log.append([Operation(OpType.WRITE, account.name, e["id"], 0, e, n % 2, 0)
                for n, e in entries.items()])
    log.append([Operation(OpType.PARTIAL_UPDATE, account.name, "a-3", 0,
                          {"id": "a-3", "n": 99}, 1, 0)])
    codec = AvroCodec(schema_registry_url=registry_url, subject_strategy=strategy)
    mirror = Mirror(log, KafkaSyncEndpoint(KafkaEndpointConfig(bootstrap_servers=kafka_bootstrap),
                                      codec=codec),
                    name=f"it-{uuid.uuid4().hex[:8]}")
    while mirror.run_once():
        pass
    mirror.stop()
    client = SchemaRegistryClient({"url": registry_url})
    deserializer = AvroDeserializer(client)
    messages = _read(kafka_bootstrap, topic, 41)
    schema_ids = {int.from_bytes(m.value()[1:5], "big") for m in messages}
    assert len(schema_ids) == 1 and all(m.value()[0] == 0 for m in messages)
    schema = orjson.loads(client.get_schema(schema_ids.pop()).schema_str)
    subject = {"topic": f"{topic}-value", "record": f"{schema['namespace']}.{schema['name']}",
               "topic_record": f"{topic}-{schema['namespace']}.{schema['name']}"}[strategy]
    assert client.get_latest_version(subject).schema_id == int.from_bytes(
        messages[0].value()[1:5], "big")
    seen: dict[str, dict[str, Any]] = {}
    for message in messages:
        record = deserializer(message.value(), SerializationContext(topic, MessageField.VALUE))
        assert isinstance(record, dict) and record["type"] == account.name
        envelope = envelope_of_record(record, schema)
        assert envelope.data is not None
        if envelope.op is OpType.WRITE:
            seen[str(envelope.id)] = dict(envelope.data)
        else:
            assert envelope.data == {"id": "a-3", "n": 99}
    expected = {e["id"]: e for e in entries.values()}
    assert seen == expected  # every property of every entry, as the grid holds it
    assert seen["a-1"]["photo"] == bytes([1, 7]) and seen["a-1"]["dyn"] == {"free": [1]}


def test_an_incompatible_schema_follows_the_mirrors_policy(
        kafka_bootstrap: str, topic_factory: MakeTopic, registry_url: str) -> None:
    topic = topic_factory(1)
    account = _type(topic, uuid.uuid4().hex[:8])
    client = SchemaRegistryClient({"url": registry_url})
    client.register_schema(f"{topic}-value", Schema(orjson.dumps(
        {"type": "record", "name": "Other", "fields": [{"name": "x", "type": "int"}]}).decode(),
        "AVRO"))
    client.set_compatibility(f"{topic}-value", "FULL")
    log = InMemoryLog([account])
    log.append([Operation(OpType.WRITE, account.name, "a-1", 0, _entry(1), 0, 0)])

    def mirror(policy: str) -> Mirror:
        codec = AvroCodec(schema_registry_url=registry_url, subject_strategy="topic")
        return Mirror(log, KafkaSyncEndpoint(KafkaEndpointConfig(
            bootstrap_servers=kafka_bootstrap, on_undeliverable=policy,
            dead_letter_topic=f"{topic}-dlq"), codec=codec),
                      name=f"it-{uuid.uuid4().hex[:8]}")

    failing = mirror("fail")
    with pytest.raises(MirrorError, match="incompatible"):
        while failing.run_once():
            pass
    failing.stop()
    dead = mirror("dead_letter")
    while dead.run_once():
        pass
    dead.stop()
    [letter] = _read(kafka_bootstrap, f"{topic}-dlq", 1)
    headers = {k: v for k, v in letter.headers()}
    assert b"incompatible" in b"".join(v for v in headers.values() if v)


def test_an_unreachable_registry_fails_the_batch_as_retriable(
        kafka_bootstrap: str, topic_factory: MakeTopic) -> None:
    from gridstream.errors import EndpointError
    from gridstream.mirror.policy import UndeliverableError

    topic = topic_factory(1)
    account = _type(topic, uuid.uuid4().hex[:8])
    log = InMemoryLog([account])
    bulk = log.append([Operation(OpType.WRITE, account.name, "a-1", 0, _entry(1), 0, 0)])
    codec = AvroCodec(schema_registry_url="http://user:pw-5@127.0.0.1:9/apis/ccompat/v7",
                      subject_strategy="topic")
    for exactly_once in (True, False):
        endpoint = KafkaSyncEndpoint(KafkaEndpointConfig(
            bootstrap_servers=kafka_bootstrap, exactly_once=exactly_once), codec=codec)
        endpoint.open(f"it-{uuid.uuid4().hex[:8]}")
        try:
            with pytest.raises(EndpointError, match="127.0.0.1:9/apis") as caught:
                endpoint.write_batch([bulk], log.types())
        finally:
            endpoint.close()
        assert not isinstance(caught.value, UndeliverableError)
        assert getattr(caught.value, "retriable", True) and "pw-5" not in str(caught.value)
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    assert [m for m in consumer.consume(10, timeout=3) if m.error() is None] == []
    consumer.close()
