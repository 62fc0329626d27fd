"""Serializers by name: the names, Kafka's byte layouts, the Python forms."""

from __future__ import annotations

import pickle
import struct
from collections import OrderedDict
from typing import Any

import pytest

from gridstream.errors import CodecError, ConfigError
from gridstream.pipeline.serde import deserializer, known_names, serializer
from gridstream.pipeline.serde._columns import DecodeError, PythonDecode

KAFKA = "org.apache.kafka.common.serialization."


@pytest.mark.parametrize(("name", "kind"), [
    ("String", "String"), ("string", "String"), ("StringDeserializer", "String"),
    (f"{KAFKA}StringDeserializer", "String"), ("ByteArray", "ByteArray"),
    ("Bytes", "ByteArray"), (f"{KAFKA}BytesDeserializer", "ByteArray"),
    (f"{KAFKA}LongDeserializer", "Long"), ("Integer", "Integer"),
    (f"{KAFKA}ShortDeserializer", "Short"), ("Double", "Double"), ("Float", "Float"),
    ("Void", "Void"), ("None", "Void"), ("Json", "Json"),
])
def test_deserializer_names(name: str, kind: str) -> None:
    assert deserializer({"value.deserializer": name}, is_key=False).name == kind


def test_serializer_class_names() -> None:
    assert serializer({"key.serializer": f"{KAFKA}LongSerializer"}, is_key=True).name == "Long"
    assert serializer({"value.serializer": "JsonSerializer"}, is_key=False).name == "Json"


def test_absent_property_is_bytes() -> None:
    assert deserializer({}, is_key=True).name == "ByteArray"
    assert serializer({}, is_key=False).name == "ByteArray"


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="com.example.Evil") as info:
        deserializer({"value.deserializer": "com.example.Evil"}, is_key=False)
    assert f"{KAFKA}StringDeserializer" in str(info.value)
    assert "KafkaAvroDeserializer" in str(info.value)
    # a serializer name where a deserializer is expected is not accepted
    with pytest.raises(ConfigError, match="not a known deserializer"):
        deserializer({"key.deserializer": f"{KAFKA}StringSerializer"}, is_key=True)
    with pytest.raises(ConfigError, match="must be a name"):
        serializer({"key.serializer": 3}, is_key=True)


def test_known_names_are_all_accepted() -> None:
    for name in known_names(serializer=False):
        if "Avro" not in name:
            deserializer({"value.deserializer": name}, is_key=False)
    for name in known_names(serializer=True):
        if "Avro" not in name:
            serializer({"value.serializer": name}, is_key=False)


@pytest.mark.parametrize(("name", "value", "data"), [
    ("String", "héllo", "héllo".encode()),
    ("ByteArray", b"\x00\xff", b"\x00\xff"),
    ("Long", -2, struct.pack(">q", -2)),
    ("Long", 2**63 - 1, struct.pack(">q", 2**63 - 1)),
    ("Integer", -(2**31), struct.pack(">i", -(2**31))),
    ("Short", -7, b"\xff\xf9"),
    ("Double", -1.5, struct.pack(">d", -1.5)),
    ("Float", 0.5, struct.pack(">f", 0.5)),
    ("Json", {"a": [1, None, "x"]}, b'{"a":[1,null,"x"]}'),
    ("Void", None, None),
])
def test_round_trip_in_kafka_layout(name: str, value: Any, data: bytes | None) -> None:
    ser = serializer({"value.serializer": name}, is_key=False)
    deser = deserializer({"value.deserializer": name}, is_key=False)
    assert ser.python("t", value) == data
    assert deser.python("t", data) == value
    assert pickle.loads(pickle.dumps(deser)).python("t", data) == value


@pytest.mark.parametrize(("name", "data", "reason"), [
    ("String", b"\xff\xfe", "not valid UTF-8"),
    ("Long", b"\x00" * 4, "Long needs 8 bytes, not 4"),
    ("Integer", b"\x00" * 8, "Integer needs 4 bytes, not 8"),
    ("Short", b"\x00", "Short needs 2 bytes, not 1"),
    ("Double", b"\x00", "Double needs 8 bytes"),
    ("Void", b"x", "Void reads only null"),
    ("Json", b"{nope", "not JSON"),
])
def test_bad_bytes_are_codec_errors(name: str, data: bytes, reason: str) -> None:
    with pytest.raises(CodecError, match=reason):
        deserializer({"key.deserializer": name}, is_key=True).python("t", data)


@pytest.mark.parametrize(("name", "value", "reason"), [
    ("String", 3, "writes a str"),
    ("ByteArray", "x", "writes bytes"),
    ("Long", 2**63, "does not fit Long"),
    ("Long", True, "writes an int"),
    ("Short", 40000, "does not fit Short"),
    ("Double", "1", "writes a float"),
    ("Double", 2**60 + 1, "no exact Double form"),
    ("Float", 1e300, "does not fit Float"),
    ("Void", 1, "writes only None"),
    ("Json", {"a": float("nan")}, "field 'a': nan has no JSON form"),
    ("Json", {"a": [OrderedDict(b=float("inf"))]}, r"field 'a\[0\]\.b': inf has no JSON"),
    ("Json", {1, 2}, "cannot be written as JSON"),
])
def test_unwritable_values_are_codec_errors(name: str, value: Any, reason: str) -> None:
    with pytest.raises(CodecError, match=reason):
        serializer({"value.serializer": name}, is_key=False).python("t", value)


def test_python_decode_names_the_stage_and_skips_error_rows() -> None:
    decode = PythonDecode(None, deserializer({"value.deserializer": "Json"}, is_key=False))
    assert decode({"topic": "t", "key": "k", "value": b"[1]"})["value"] == [1]
    with pytest.raises(DecodeError) as info:
        decode({"topic": "t", "key": "k", "value": b"{"})
    assert info.value.stage == "value.deserializer"
    row = {"topic": "t", "key": None, "value": b"{", "_gs_error": "earlier"}
    assert decode(row) is row
    assert pickle.loads(pickle.dumps(decode))({"topic": "t", "value": b"2"})["value"] == 2
