"""Secrets stay out of reprs; producer defaults layer under user properties; the
consumer's undecodable-record policy; the mirror command line."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gridstream.consumer import OperationConsumer, UndecodableRecordError
from gridstream.errors import ConfigError
from gridstream.kafka import KafkaProperties, redact
from gridstream.mirror import KafkaEndpointConfig, KafkaSyncEndpoint, TopicSettings
from gridstream.mirror.cli import _properties, build_parser
from gridstream.operations import OpType
from gridstream.protocol import Envelope, create_codec

SECRET = "hunter2-do-not-print"

SECRET_VALUE = "pw-never-shown-7"


def test_secrets_never_appear_in_reprs() -> None:
    props = {"sasl.password": SECRET, "sasl.username": "u", "ssl.key.password": SECRET,
             "sasl.oauthbearer.client.secret": SECRET}
    endpoint = KafkaSyncEndpoint(KafkaEndpointConfig(bootstrap_servers="127.0.0.1:1",
                                                     producer_properties=props))
    consumer = OperationConsumer("127.0.0.1:1", topics=["t"], group_id="g",
                                 consumer_properties=props)
    for text in (repr(endpoint), repr(consumer), repr(KafkaProperties(props)),
                 str(redact(props)), str(dict(KafkaProperties(props)))):
        assert SECRET not in text
    assert KafkaProperties(props).client_config()["sasl.password"] == SECRET


def test_defaults_are_safe_and_explicit_fields_win() -> None:
    endpoint = KafkaSyncEndpoint(KafkaEndpointConfig(
        bootstrap_servers="explicit:9092", producer_properties={
            "bootstrap.servers": "ignored:9092", "compression.type": "zstd", "linger.ms": 20}))
    config = endpoint._props.client_config()
    assert config["bootstrap.servers"] == "explicit:9092"
    assert config["acks"] == "all" and config["enable.idempotence"] is True
    assert (config["compression.type"], config["linger.ms"]) == ("zstd", 20)
    with pytest.raises(ConfigError):
        KafkaSyncEndpoint(KafkaEndpointConfig())


def test_transactional_id_is_stable_per_mirror_unless_named() -> None:
    endpoint = KafkaSyncEndpoint(KafkaEndpointConfig(bootstrap_servers="b:9092"))
    endpoint.mirror_name = "orders"
    assert endpoint.transactional_id == "gridstream-mirror-orders"
    named = KafkaSyncEndpoint(KafkaEndpointConfig(
        bootstrap_servers="b:9092", producer_properties={"transactional.id": "p"},
        transactional_id="explicit", transaction_timeout_ms=9000))
    assert named.transactional_id == "explicit"
    assert named.transactional_ids == ("explicit", "explicit.1")
    single = KafkaSyncEndpoint(KafkaEndpointConfig(
        bootstrap_servers="b:9092", transactional_id="one", transactional_producers=1))
    assert single.transactional_ids == ("one",)
    with pytest.raises(ValidationError):
        KafkaEndpointConfig(bootstrap_servers="b:9092", transactional_producers=3)
    assert named._props["transaction.timeout.ms"] == 9000


class FakeMessage:
    def __init__(self, value: bytes | None, offset: int = 5) -> None:
        self._value, self._offset = value, offset

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return 1

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"k"

    def headers(self) -> list[tuple[str, bytes]]:
        return [("gs.codec", b"json")]

    def value(self) -> bytes | None:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return (1, 1234)


def _consumer(policy: str) -> OperationConsumer:
    return OperationConsumer("127.0.0.1:1", topics=["t"], group_id="g", on_decode_error=policy)


def test_undecodable_records_fail_with_their_position_or_are_counted() -> None:
    with pytest.raises(UndecodableRecordError) as raised:
        _consumer("fail")._record(FakeMessage(b"not json"))  # type: ignore[arg-type]
    assert (raised.value.topic, raised.value.partition, raised.value.offset) == ("t", 1, 5)
    skipping = _consumer("skip")
    assert skipping._record(FakeMessage(b"{}")) is None  # type: ignore[arg-type]
    assert skipping.skipped == 1 and skipping.last_decode_error is not None
    assert skipping._next == {("t", 1): 6}  # a skipped record still advances the commit
    assert skipping._record(FakeMessage(None, 6)) is None  # type: ignore[arg-type]
    assert skipping.tombstones == 1


def test_records_carry_the_envelope_and_position() -> None:
    envelope = Envelope(op=OpType.WRITE, type="T", id="a", version=3, ts=1, partition=0,
                        data={"x": 1})
    payload = create_codec("json").encode(envelope, None)
    record = _consumer("fail")._record(FakeMessage(payload))  # type: ignore[arg-type]
    assert record is not None
    assert (record.op, record.id, record.version, record.data) == (OpType.WRITE, "a", 3,
                                                                   {"x": 1})
    assert (record.topic, record.partition, record.offset, record.timestamp_ms) == \
        ("t", 1, 5, 1234)


def test_mirror_command_line() -> None:
    args: Any = build_parser().parse_args(["--data-dir", "d", "--name", "m", "-X",
                                           "linger.ms=7", "--mode", "at-least-once"])
    assert (args.name, args.mode, _properties(args.producer_property)) == \
        ("m", "at-least-once", {"linger.ms": "7"})
    with pytest.raises(ConfigError):
        _properties(["novalue"])


def test_the_endpoints_options_are_one_strict_model() -> None:
    with pytest.raises(ValidationError, match="bootstrap_server"):
        KafkaEndpointConfig(bootstrap_server="b:9092")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="only used with codec 'avro'"):
        KafkaEndpointConfig(bootstrap_servers="b:9092", subject_strategy="topic")
    with pytest.raises(ValidationError, match="only used with schema_registry_url"):
        KafkaEndpointConfig.model_validate({"codec": "avro", "basic.auth.user.info": "u:p"})
    with pytest.raises(ValidationError, match="greater than 0"):
        KafkaEndpointConfig(bootstrap_servers="b:9092", timeout_s=0)
    with pytest.raises(ConfigError, match="takes a KafkaEndpointConfig"):
        KafkaSyncEndpoint("b:9092")  # type: ignore[arg-type]
    config = KafkaEndpointConfig.model_validate({
        "bootstrap.servers": "b:9092", "codec": "avro",
        "schema.registry.url": f"http://u:{SECRET}@127.0.0.1:1",
        "producer_properties": {"sasl.password": SECRET}})
    assert SECRET not in repr(config) and SECRET not in str(config)
    assert config.registry_options()["schema_registry_url"].endswith("@127.0.0.1:1")


def test_a_codec_object_replaces_the_configs_codec_but_never_silently() -> None:
    codec = create_codec("msgpack")
    endpoint = KafkaSyncEndpoint(KafkaEndpointConfig(bootstrap_servers="b:9092"), codec=codec)
    assert endpoint.encoder.codec is codec
    assert type(KafkaSyncEndpoint(KafkaEndpointConfig(
        bootstrap_servers="b:9092", codec="msgpack")).encoder.codec) is type(codec)
    with pytest.raises(ConfigError, match="replaces the config's codec"):
        KafkaSyncEndpoint(KafkaEndpointConfig(bootstrap_servers="b:9092", codec="json"),
                          codec=codec)


def test_a_kafka_properties_object_reaches_the_producer_with_its_secrets() -> None:
    # a KafkaProperties reads a secret as "***": the config takes its client config
    props = KafkaProperties({"sasl.password": SECRET_VALUE, "linger.ms": 1})
    config = KafkaEndpointConfig(bootstrap_servers="b:9092", producer_properties=props)
    endpoint = KafkaSyncEndpoint(config)
    assert endpoint._props.client_config()["sasl.password"] == SECRET_VALUE
    assert SECRET_VALUE not in repr(config) and SECRET_VALUE not in repr(endpoint)
    callback = print
    with_callback = KafkaEndpointConfig(bootstrap_servers="b:9092",
                                        producer_properties={"error_cb": callback})
    assert with_callback.producer_properties["error_cb"] is callback


def test_topic_settings_take_any_config_value_as_text() -> None:
    settings = TopicSettings(config={"retention.ms": 86_400_000})  # type: ignore[dict-item]
    assert settings.config == {"retention.ms": "86400000"}
    assert TopicSettings(config=None).config == {}  # type: ignore[arg-type]
