"""The Avro converter against the stack's registry, and its interoperability with
confluent-kafka's own ``AvroSerializer`` / ``AvroDeserializer``."""

from __future__ import annotations

import struct
import subprocess
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from gridstream.connect.config import ConverterConfig
from gridstream.connect.converters import Converter, build_converter
from gridstream.errors import CodecError, ConnectorError
from gridstream.runtime.artifacts import ensure_artifacts
from gridstream.runtime.java import find_java


def _topic() -> str:
    return f"gs-conv-{uuid.uuid4().hex[:12]}"


def _avro(url: str, **options: Any) -> Converter:
    return build_converter(ConverterConfig(value="avro", schema_registry_url=url, **options))


def _schema_id(data: bytes | None) -> int:
    assert data is not None and data[0] == 0
    (schema_id,) = struct.unpack(">I", data[1:5])
    return int(schema_id)


PERSON = {"type": "record", "name": "Person", "namespace": "gridstream.test", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "address", "type": ["null", {"type": "record", "name": "Address", "fields": [
        {"name": "city", "type": "string"}]}], "default": None}]}


def _declare(tmp_path: Path, schema: dict[str, Any], name: str = "person.avsc") -> str:
    path = tmp_path / name
    path.write_bytes(orjson.dumps(schema))
    return str(path)


def test_confluent_deserializer_reads_what_the_converter_writes(
        registry_url: str, client: SchemaRegistryClient, tmp_path: Path) -> None:
    topic = _topic()
    ctx = SerializationContext(topic, MessageField.VALUE)
    deserializer = AvroDeserializer(client)
    inferred = {"name": "Ada", "age": 36, "score": 1.5, "active": True, "nick": None,
                "address": {"city": "London"}, "orders": [{"id": 1}, {"id": 2}]}
    data = _avro(registry_url).encode_value(topic, "people", inferred)
    assert deserializer(data, ctx) == inferred
    assert client.get_latest_version(f"{topic}-value").schema_id == _schema_id(data)

    other = _topic()
    declared = {"id": 7, "name": "Ada", "tags": ["x"], "address": {"city": "Paris"}}
    converter = _avro(registry_url, avro_schemas={"people": _declare(tmp_path, PERSON)})
    data = converter.encode_value(other, "people", declared)
    assert deserializer(data, SerializationContext(other, MessageField.VALUE)) == declared


def test_the_converter_reads_what_the_confluent_serializer_writes(
        registry_url: str, client: SchemaRegistryClient) -> None:
    topic = _topic()
    serializer = AvroSerializer(client, orjson.dumps(PERSON).decode())
    record = {"id": 7, "name": "Ada", "tags": ["a", "b"], "address": None}
    data = serializer(record, SerializationContext(topic, MessageField.VALUE))
    assert _avro(registry_url).decode_value(topic, data) == record


def test_an_added_optional_field_is_backward_compatible(
        registry_url: str, client: SchemaRegistryClient, tmp_path: Path) -> None:
    topic = _topic()
    subject = f"{topic}-value"
    v1 = _avro(registry_url, avro_schemas={"people": _declare(tmp_path, PERSON)})
    old = v1.encode_value(topic, "people", {"id": 1, "name": "a", "tags": []})
    client.set_compatibility(subject, "BACKWARD")

    added = {**PERSON, "fields": [*PERSON["fields"],
                                  {"name": "email", "type": ["null", "string"],
                                   "default": None}]}
    v2 = _avro(registry_url, avro_schemas={"people": _declare(tmp_path, added, "v2.avsc")})
    new = v2.encode_value(topic, "people", {"id": 2, "name": "b", "tags": ["t"],
                                            "email": "b@example.com"})
    assert _schema_id(new) != _schema_id(old)
    assert client.get_versions(subject) == [1, 2]
    reader = _avro(registry_url)
    assert reader.decode_value(topic, old) == {"id": 1, "name": "a", "tags": [],
                                                "address": None}
    assert reader.decode_value(topic, new) == {"id": 2, "name": "b", "tags": ["t"],
                                                "address": None, "email": "b@example.com"}


def test_an_incompatible_change_is_a_codec_error_with_the_registry_reason(
        registry_url: str, client: SchemaRegistryClient, tmp_path: Path) -> None:
    topic = _topic()
    subject = f"{topic}-value"
    _avro(registry_url).encode_value(topic, "people", {"id": 1})  # id: ["null", "long"]
    client.set_compatibility(subject, "BACKWARD")
    converter = _avro(registry_url)
    with pytest.raises(CodecError, match=f"refused the schema for subject '{subject}' as "
                                         "incompatible") as refused:
        converter.encode_value(topic, "people", {"id": "text"})
    assert len(str(refused.value)) > len("... as incompatible: ")
    breaking = {**PERSON, "fields": [{"name": "id", "type": "string"}]}
    declared = _avro(registry_url, avro_schemas={"people": _declare(tmp_path, breaking)},
                     subject_name_strategy="topic")
    with pytest.raises(CodecError, match="incompatible"):
        declared.encode_value(topic, "people", {"id": "x"})
    assert client.get_versions(subject) == [1]
    # a value that keeps the registered types still goes through
    assert _schema_id(converter.encode_value(topic, "people", {"id": None})) == \
        client.get_latest_version(subject).schema_id


def test_inferred_schemas_evolve_compatibly(registry_url: str,
                                            client: SchemaRegistryClient) -> None:
    topic = _topic()
    subject = f"{topic}-value"
    empty = {"type": "record", "name": "c", "namespace": "gridstream.connect", "fields": []}
    client.register_schema(subject, Schema(orjson.dumps(empty).decode(), "AVRO"))
    client.set_compatibility(subject, "BACKWARD")
    writer = _avro(registry_url)
    values = [{"a": None}, {"a": 5}, {"a": None, "b": ["x"]}, {"b": []}, {"a": 7, "b": None}]
    encoded = [writer.encode_value(topic, "c", v) for v in values]
    # a later run (no memory of its own) learns the types from the latest version
    encoded.append(_avro(registry_url).encode_value(topic, "c", {"a": None, "b": None}))
    reader = _avro(registry_url)
    assert [reader.decode_value(topic, d) for d in encoded] == [*values,
                                                                {"a": None, "b": None}]


def test_a_batch_re_run_by_a_fresh_converter_writes_the_same_bytes(
        registry_url: str, client: SchemaRegistryClient) -> None:
    """A None field took the type the worker had seen (or the subject's latest version):
    a batch re-run in a fresh worker wrote other schema ids, which the exactly-once
    writer refuses on every restart."""
    topic = _topic()
    client.set_compatibility(f"{topic}-value", "BACKWARD")
    batch: list[dict[str, Any]] = [
        {"a": None, "b": None}, {"a": 1, "b": {"x": 1}}, {"a": None, "b": {"x": 2, "y": None}},
        {"a": 2, "b": {"x": 1, "y": "s"}}, {"a": None, "b": None}]
    first = _avro(registry_url)
    encoded = [first.encode_value(topic, "c", v) for v in batch]
    assert _schema_id(encoded[-1]) == _schema_id(encoded[0])  # the earliest that fits
    for _ in range(2):
        again = _avro(registry_url)
        assert [again.encode_value(topic, "c", v) for v in batch] == encoded
    reader = _avro(registry_url)
    assert [reader.decode_value(topic, d) for d in encoded] == batch


def test_decode_errors(registry_url: str) -> None:
    topic = _topic()
    converter = _avro(registry_url)
    data = converter.encode_value(topic, "c", {"a": 1})
    assert data is not None
    with pytest.raises(CodecError, match="magic byte"):
        converter.decode_value(topic, b"\x01" + data[1:])
    with pytest.raises(CodecError, match="unknown to the registry"):
        converter.decode_value(topic, b"\x00" + struct.pack(">I", 2**31 - 7) + data[5:])


@pytest.mark.parametrize("strategy", ["record", "topic_record"])
def test_subject_name_strategies(registry_url: str, client: SchemaRegistryClient,
                                 strategy: str) -> None:
    topic, cache = _topic(), f"c_{uuid.uuid4().hex[:8]}"
    data = _avro(registry_url, subject_name_strategy=strategy).encode_value(topic, cache,
                                                                            {"a": 1})
    name = f"gridstream.connect.{cache}"
    subject = name if strategy == "record" else f"{topic}-{name}"
    assert client.get_latest_version(subject).schema_id == _schema_id(data)


def test_an_unreachable_registry_is_a_connector_error_without_credentials() -> None:
    converter = _avro("http://user:s3cret@127.0.0.1:9/apis/ccompat/v7")
    with pytest.raises(ConnectorError) as failed:
        converter.encode_value("t", "c", {"a": 1})
    assert not isinstance(failed.value, CodecError)
    assert "127.0.0.1:9" in str(failed.value) and "s3cret" not in str(failed.value)
    with pytest.raises(ConnectorError):
        converter.decode_value("t", b"\x00\x00\x00\x00\x01\x02")


# ------------------------------------------------------------------------- json_schema


def _connect_json(lines: list[bytes]) -> list[str]:
    """Kafka Connect's JsonConverter (the stack's Kafka jars) on ``lines``: one
    ``OK <json>`` / ``ERROR ...`` line each, then ``CONNECT <json>``."""
    jars = ensure_artifacts("kafka", quiet=True)
    source = Path(__file__).parent / "support" / "ConnectJsonCheck.java"
    proc = subprocess.run(
        [str(find_java()), "-cp", f"{jars}/*", str(source)],
        input=b"".join(line + b"\n" for line in lines), capture_output=True, timeout=300,
        check=False)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return proc.stdout.decode().splitlines()


def test_kafka_connect_json_converter_reads_and_writes_json_schema_envelopes() -> None:
    converter = build_converter(ConverterConfig(value="json_schema"))
    values: list[dict[str, Any]] = [
        {"name": "Ada", "age": 36, "score": 1.5, "active": True, "nick": None},
        {"address": {"city": "London", "zip": None}, "tags": ["a", "b"], "empty": [],
         "nulls": [None], "matrix": [[1, 2], [], [3]], "big": 2**63 - 1},
        {"orders": [{"id": 1, "total": 2.5}, {"id": 2, "total": None}, None]},
    ]
    envelopes = [converter.encode_value("t", "people", v) for v in values]
    merged = {"items": [{"a": 1}, {"b": "x"}]}  # struct elements with different fields
    envelopes.append(converter.encode_value("t", "people", merged))
    lines = _connect_json([e for e in envelopes if e is not None])
    assert len(lines) == len(envelopes) + 1, lines
    assert all(line.startswith("OK ") for line in lines[:-1]), lines
    # what Connect reads and writes back reads as the value written (Connect writes
    # every field of a struct: the merged elements' missing fields come back as null)
    back = [converter.decode_value("t", line[3:].encode()) for line in lines[:-1]]
    assert back == [*values, {"items": [{"a": 1, "b": None}, {"a": None, "b": "x"}]}]

    assert lines[-1].startswith("CONNECT ")
    written = converter.decode_value("t", lines[-1][len("CONNECT "):].encode())
    assert written == {
        "id": 7, "small": -3, "ratio": 0.5, "counts": {"a": 1},
        "byId": [[1, "one"], [2, None]], "home": {"city": "Lyon"}, "work": None,
        "blob": "AAE=", "price": "BOI=", "ts": 1_700_000_000_000,
        "readings": [1.5, None, 2.0], "status": "n/a"}


def test_kafka_connect_refuses_what_the_converter_refuses() -> None:
    converter = build_converter(ConverterConfig(value="json_schema"))
    field = {"type": "int32", "optional": False, "field": "a"}
    bad = [orjson.dumps({"schema": {"type": "struct", "fields": [field]}, "payload": p})
           for p in ({"a": None}, {})]
    for data in bad:
        with pytest.raises(CodecError, match="null for a required int32"):
            converter.decode_value("t", data)
    assert all(line.startswith("ERROR ") for line in _connect_json(bad)[:-1])
