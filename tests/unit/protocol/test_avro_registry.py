"""The mirror's Avro codec over a Confluent-compatible registry (a small fake here; the
integration tests use the stack's registry and confluent-kafka's AvroDeserializer)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import fastavro
import orjson
import pytest

from gridstream.errors import CodecError, ConfigError
from gridstream.operations import Operation, OpType, PropertySpec, TypeDescriptor
from gridstream.protocol import Envelope, OperationEncoder, create_codec
from gridstream.protocol.avro import (
    AvroCodec,
    LocalSchemaRegistry,
    RegistrySchemas,
    envelope_of_record,
)
from tests.support.fake_registry import FakeRegistry

PERSON = TypeDescriptor(
    name="com.example.Person", id_property="id",
    fixed=(PropertySpec("id", "str"), PropertySpec("born", "datetime"),
           PropertySpec("balance", "decimal"), PropertySpec("tags", "list")))


def _envelope(**data: Any) -> Envelope:
    return Envelope(op=OpType.WRITE, type=PERSON.name, id="p-1", version=4, ts=1000,
                    partition=0, data={"id": "p-1", **data})


@pytest.mark.parametrize(("strategy", "subject"), [
    ("record", "gridstream.protocol.com_example_PersonEnvelope"),
    ("topic", "people-value"),
    ("topic_record", "people-gridstream.protocol.com_example_PersonEnvelope"),
])
def test_the_subject_follows_the_strategy_and_the_id_is_the_registrys(
        strategy: str, subject: str) -> None:
    fake = FakeRegistry()
    codec = AvroCodec(RegistrySchemas(fake), subject_strategy=strategy)
    raw = codec.encode_for(_envelope(tags=[1, "a"]), PERSON, "people")
    assert raw[:5] == b"\x00\x00\x00\x00\x01"  # magic 0, then the registry's id 1
    assert fake.calls == [("register", subject)]
    codec.encode_for(_envelope(), PERSON, "people")
    assert fake.calls == [("register", subject)]  # cached


def test_a_reader_with_only_the_registry_decodes_what_the_writer_wrote() -> None:
    fake = FakeRegistry()
    writer = AvroCodec(RegistrySchemas(fake), subject_strategy="topic")
    envelope = _envelope(born=dt.datetime(2024, 5, 1, 12, tzinfo=dt.UTC),
                         balance=Decimal("1.50"), tags=["x", 2], dyn={"a": 1})
    raw = writer.encode_for(envelope, PERSON, "people")
    reader = AvroCodec(RegistrySchemas(fake))
    assert reader.decode(raw, {}) == envelope
    assert ("register", "gridstream.protocol.com_example_PersonEnvelope") not in fake.calls


def test_decoding_never_registers_in_a_real_registry() -> None:
    fake = FakeRegistry()
    with pytest.raises(CodecError, match="unknown avro schema id 9"):
        AvroCodec(RegistrySchemas(fake)).decode(b"\x00\x00\x00\x00\x09", {PERSON.name: PERSON})
    assert [c for c in fake.calls if c[0] == "register"] == []


def test_a_refused_schema_is_a_codec_error_asked_once() -> None:
    fake = FakeRegistry(refuse_subject="people-value")
    codec = AvroCodec(RegistrySchemas(fake), subject_strategy="topic")
    for _ in range(3):
        with pytest.raises(CodecError, match="incompatible"):
            codec.encode_for(_envelope(), PERSON, "people")
    assert fake.calls == [("register", "people-value")]


def test_a_topic_strategy_without_a_topic_is_a_codec_error() -> None:
    codec = AvroCodec(RegistrySchemas(FakeRegistry()), subject_strategy="topic")
    with pytest.raises(CodecError, match="needs the record's topic"):
        codec.encode(_envelope(), PERSON)
    with pytest.raises(CodecError, match="needs the record's topic"):
        codec.encode_for(_envelope(), PERSON, "")


def test_the_operation_encoder_names_the_topic() -> None:
    fake = FakeRegistry()
    encoder = OperationEncoder(AvroCodec(RegistrySchemas(fake), subject_strategy="topic"))
    op = Operation(OpType.WRITE, PERSON.name, "p-1", 3, {"id": "p-1"}, 0, 5)
    encoder.encode(op, PERSON, "t1")
    assert fake.calls == [("register", "t1-value")]


def test_bad_options_are_config_errors_and_the_secret_stays_hidden() -> None:
    with pytest.raises(ConfigError, match="subject strategy"):
        AvroCodec(subject_strategy="topic-name")
    with pytest.raises(ConfigError, match="only used with a schema registry URL"):
        AvroCodec(basic_auth_user_info="user:s3cret")
    with pytest.raises(ConfigError, match="not both"):
        AvroCodec(LocalSchemaRegistry(), schema_registry_url="http://127.0.0.1:1")
    codec = create_codec("avro", schema_registry_url="http://u:pw-1@127.0.0.1:1/apis",
                         basic_auth_user_info="user:s3cret")
    assert "s3cret" not in repr(codec) and "pw-1" not in repr(codec)
    assert "127.0.0.1:1/apis" in repr(codec)


def test_envelope_of_record_restores_what_another_reader_decoded() -> None:
    fake = FakeRegistry()
    codec = AvroCodec(RegistrySchemas(fake))
    envelope = _envelope(born=dt.datetime(2024, 5, 1, tzinfo=dt.UTC), tags=[1, {"b": 2}],
                         dyn=[3])
    raw = codec.encode(envelope, PERSON)
    schema = orjson.loads(fake.schemas[1])
    import io
    record = fastavro.schemaless_reader(io.BytesIO(raw[5:]), fastavro.parse_schema(schema),
                                        None)
    assert envelope_of_record(record, schema) == envelope
    with pytest.raises(CodecError, match="not a gridstream envelope schema"):
        envelope_of_record(record, {"type": "record", "name": "X", "fields": []})


class _Answers:
    """A stand-in for confluent-kafka's client: each read gives ``found`` or raises."""

    def __init__(self, found: object) -> None:
        self.found = found

    def _answer(self, *_: object) -> object:
        if isinstance(self.found, Exception):
            raise self.found
        return self.found

    lookup_schema = get_schema = get_latest_version = _answer


def test_the_registry_reads_say_none_for_404_and_fail_for_anything_else() -> None:
    """lookup, schema and latest share one reading: 404 is "not there" (None), any other
    answer a ``RegistryError`` that names the action and not the credentials."""
    from types import SimpleNamespace

    from confluent_kafka.schema_registry.error import SchemaRegistryError

    from gridstream.errors import RegistryError
    from gridstream.protocol.registry import SchemaRegistryClientRegistry

    registry = SchemaRegistryClientRegistry("http://user:s3cret@localhost:1")
    reads = {"lookup": lambda: registry.lookup("s", '"string"'),
             "schema": lambda: registry.schema(7), "latest": lambda: registry.latest("s")}
    registry._client = _Answers(SchemaRegistryError(404, 40401, "not found"))
    assert {name: read() for name, read in reads.items()} == dict.fromkeys(reads)
    actions = {"lookup": "looking up a schema in subject 's'",
               "schema": "looking up schema id 7", "latest": "reading subject 's'"}
    for failure in (SchemaRegistryError(500, 50001, "down s3cret"), OSError("refused: http://user:s3cret@localhost:1")):
        registry._client = _Answers(failure)
        for name, read in reads.items():
            with pytest.raises(RegistryError, match=actions[name]) as caught:
                read()
            assert "s3cret" not in str(caught.value)
    avro = SimpleNamespace(schema_id=3, schema_type=None, schema_str='"int"')
    registry._client = _Answers(avro)
    assert registry.lookup("s", '"int"') == 3 and registry.schema(3) == '"int"'
    registry._client = _Answers(SimpleNamespace(schema=avro))
    assert registry.latest("s") == '"int"'
    registry._client = _Answers(SimpleNamespace(schema_type="JSON", schema_str="{}",
                                                schema=SimpleNamespace(schema_type="JSON")))
    assert registry.latest("s") is None
    with pytest.raises(CodecError, match="schema id 3 is a JSON schema, not Avro"):
        registry.schema(3)
