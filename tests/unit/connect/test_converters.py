"""Converters: JSON, Kafka Connect's schema envelope, Avro (with a fake registry here;
the real registry: tests/integration/test_connect_converters.py)."""

from __future__ import annotations

import base64
import collections
import dataclasses
import enum
import struct
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import SecretStr

from gridstream.connect._avro import AvroConverter, redacted_url
from gridstream.connect._json_schema import JsonSchemaConverter, infer_schema
from gridstream.connect.config import ConverterConfig
from gridstream.connect.converters import Converter, JsonConverter, build_converter
from gridstream.errors import CodecError, ConfigError, ConnectorError
from gridstream.grid.values import dumps_value
from tests.support.fake_registry import FakeRegistry

VALUE: dict[str, Any] = {
    "name": "Ada", "age": 36, "score": 1.5, "active": True, "nickname": None,
    "address": {"city": "London", "zip": None, "tags": ["a", "b"]},
    "orders": [{"id": 1, "total": 2.5}, {"id": 2, "total": None}, None],
    "empty": [], "nulls": [None, None], "matrix": [[1, 2], [], [3]],
}


def _json_schema() -> Converter:
    return build_converter(ConverterConfig(value="json_schema"))


# ------------------------------------------------------------------------- json


def test_json_round_trip_and_errors() -> None:
    converter = build_converter(ConverterConfig())
    assert isinstance(converter, JsonConverter)
    data = converter.encode_value("t", "c", VALUE)
    assert converter.decode_value("t", data) == VALUE
    assert converter.encode_value("t", "c", None) is None
    assert converter.decode_value("t", None) is None
    with pytest.raises(CodecError, match="not JSON"):
        converter.decode_value("t", b"{nope")
    with pytest.raises(CodecError, match="JSON object"):
        converter.decode_value("t", b"[1]")
    with pytest.raises(CodecError, match="cannot be written"):
        converter.encode_value("t", "c", {"s": {1, 2}})


@pytest.mark.parametrize("value", [
    {"x": float("nan")}, {"x": float("inf")}, {"n": None, "l": [1.0, float("-inf")]},
    {"d": {"deep": [{"x": float("nan")}]}}])
def test_json_refuses_floats_json_cannot_hold(value: dict[str, Any]) -> None:
    """orjson writes NaN and infinities as null: the value would change silently."""
    with pytest.raises(CodecError, match="no JSON form"):
        build_converter(ConverterConfig()).encode_value("t", "c", value)


class _Samples(list[float]):
    pass


class _Point(tuple[float, float]):
    """A tuple subclass: orjson writes it through ``default``."""


@dataclasses.dataclass
class _Reading:
    at: float
    more: Any = None


@dataclasses.dataclass(slots=True)
class _Slotted:
    at: float


class _Level(enum.Enum):
    LOST = float("nan")


NAN, INF = float("nan"), float("inf")
NOT_FINITE_CONTAINERS: list[tuple[Any, str]] = [
    (collections.OrderedDict(x=NAN), "'x'"),
    (collections.defaultdict(list, x=INF), "'x'"),
    ({"d": collections.OrderedDict(deep=[1.0, -INF])}, r"'d\.deep\[1\]'"),
    ({"l": _Samples([NAN])}, r"'l\[0\]'"),
    ({"r": _Reading(NAN)}, r"'r\.at'"),
    ({"r": _Reading(1.0, {"inner": collections.OrderedDict(y=NAN)})}, r"'r\.more\.inner\.y'"),
    ({"s": _Slotted(INF)}, r"'s\.at'"),
    ({"e": _Level.LOST}, "'e'"),
    ({"t": (1.0, NAN)}, r"'t\[1\]'"),
]
"""NaN and infinities in what orjson writes: dict, list and tuple subclasses,
dataclasses, enums (``_all_finite`` looked into exact dicts, lists and tuples only:
these became null)."""


@pytest.mark.parametrize(("value", "where"), NOT_FINITE_CONTAINERS)
def test_json_refuses_not_finite_floats_in_any_container_orjson_writes(
        value: Any, where: str) -> None:
    converter = build_converter(ConverterConfig())
    with pytest.raises(CodecError, match=f"field {where}: -?(nan|inf) has no JSON form"):
        converter.encode_value("t", "c", value)


def test_values_written_through_default_are_checked_too() -> None:
    from gridstream.protocol.values import wire_default

    for value, where in (({"p": _Point((1.0, NAN))}, r"p\[1\]"),
                         ({"s": {2.0, INF}}, r"s\[1\]")):
        with pytest.raises(CodecError, match=f"field '{where}': -?(nan|inf) has no JSON form"):
            dumps_value(value, default=wire_default)
    # what orjson leaves out of a dataclass is not checked; finite values pass
    quiet = _Reading(1.0)
    quiet._hidden = NAN  # type: ignore[attr-defined]
    assert dumps_value({"r": quiet, "p": _Point((1.0, 2.0)), "n": None},
                       default=wire_default) == b'{"r":{"at":1.0,"more":null},' \
                                                b'"p":[1.0,2.0],"n":null}'


def test_json_keeps_nulls_and_finite_floats() -> None:
    value = {"n": None, "f": [1.5, None, -0.0], "d": {"x": None, "y": 1e308}}
    converter = build_converter(ConverterConfig())
    assert converter.decode_value("t", converter.encode_value("t", "c", value)) == value


BIG = 123456789012345678901234567890
"""Beyond orjson's integers (-2**63 ... 2**64-1): orjson reads it as a float."""


@pytest.mark.parametrize(("data", "where"), [
    (b'{"big": 123456789012345678901234567890}', "big"),
    (b'{"a": {"low": -9223372036854775809}}', r"a\.low"),
    (b'{"l": [1, 18446744073709551616]}', r"l\[1\]")])
def test_json_refuses_integers_beyond_64_bits_when_read(data: bytes, where: str) -> None:
    """orjson read them as rounded floats: a sink changed the value silently."""
    with pytest.raises(CodecError, match=f"field '{where}': .* is an integer beyond 64 bits"):
        build_converter(ConverterConfig()).decode_value("t", data)
    with pytest.raises(CodecError, match=f"field 'payload.{where}': .* beyond 64 bits"):
        _json_schema().decode_value("t", b'{"schema": null, "payload": ' + data + b"}")


def test_json_reads_64_bit_integers_and_long_digit_text_unchanged() -> None:
    data = (b'{"max": 18446744073709551615, "min": -9223372036854775808, '
            b'"text": "1234567890123456789012", "f": 1.5}')
    expected = {"max": 2**64 - 1, "min": -(2**63), "text": "1234567890123456789012",
                "f": 1.5}
    assert build_converter(ConverterConfig()).decode_value("t", data) == expected
    with pytest.raises(CodecError, match="key: the value: .* beyond 64 bits"):
        build_converter(ConverterConfig()).decode_key(str(BIG).encode())
    with pytest.raises(CodecError, match="not JSON"):
        build_converter(ConverterConfig()).decode_value("t", b'{"a": ' + b"9" * 5000 + b"}")


def test_a_key_beyond_64_bits_is_a_codec_error() -> None:
    """orjson refuses it with a TypeError: the caller only handles CodecError."""
    with pytest.raises(CodecError, match="key cannot be written"):
        build_converter(ConverterConfig()).encode_key(BIG)


@pytest.mark.parametrize(("kind", "key", "data"), [
    ("json", "k-1", b'"k-1"'), ("json", 12, b"12"), ("string", "k-1", b"k-1")])
def test_keys_round_trip(kind: str, key: Any, data: bytes) -> None:
    converter = build_converter(ConverterConfig(key=kind))  # type: ignore[arg-type]
    assert converter.encode_key(key) == data
    assert converter.decode_key(data) == key
    assert converter.decode_key(None) is None


def test_bad_keys_are_codec_errors() -> None:
    converter = build_converter(ConverterConfig())
    for data in (b"{x", b"true", b"1.5", b"[1]"):
        with pytest.raises(CodecError):
            converter.decode_key(data)
    with pytest.raises(CodecError, match="UTF-8"):
        build_converter(ConverterConfig(key="string")).decode_key(b"\xff")


# ------------------------------------------------------------------------- json_schema


def test_json_schema_envelope_round_trip() -> None:
    converter = _json_schema()
    assert isinstance(converter, JsonSchemaConverter)
    data = converter.encode_value("t", "people", VALUE)
    assert data is not None
    envelope = orjson.loads(data)
    assert set(envelope) == {"schema", "payload"}
    assert envelope["payload"] == VALUE
    assert converter.decode_value("t", data) == VALUE
    assert converter.encode_value("t", "people", None) is None
    assert converter.decode_value("t", None) is None


def test_json_schema_reads_an_integer_of_a_double_field_as_a_float() -> None:
    """Kafka Connect reads ``1`` in a ``double`` (or ``float``) field as 1.0; the grid got
    the int 1, a value of another type than its schema's."""
    schema = (b'{"type": "struct", "fields": [{"field": "d", "type": "double"}, '
              b'{"field": "f", "type": "float", "optional": true}, '
              b'{"field": "l", "type": "array", "items": {"type": "double"}}]}')
    value = _json_schema().decode_value(
        "t", b'{"schema": ' + schema + b', "payload": {"d": 1, "f": -3, "l": [2, 2.5]}}')
    assert value == {"d": 1.0, "f": -3.0, "l": [2.0, 2.5]}
    assert value is not None and all(type(v) is float for v in (value["d"], value["f"],
                                                                 *value["l"]))


def test_json_schema_inference() -> None:
    schema = infer_schema("people", VALUE)
    assert {k: schema[k] for k in ("type", "optional", "name")} == {
        "type": "struct", "optional": False, "name": "people"}
    fields = {f["field"]: f for f in schema["fields"]}
    assert all(f["optional"] is True for f in fields.values())
    assert [fields[n]["type"] for n in ("name", "age", "score", "active", "nickname")] == [
        "string", "int64", "double", "boolean", "string"]
    address = {f["field"]: f for f in fields["address"]["fields"]}
    assert address["zip"] == {"type": "string", "optional": True, "field": "zip"}
    assert address["tags"]["items"] == {"type": "string", "optional": False}
    orders = fields["orders"]["items"]
    assert orders["type"] == "struct" and orders["optional"] is True  # a None element
    assert {f["field"]: f["type"] for f in orders["fields"]} == {"id": "int64",
                                                                 "total": "double"}
    assert fields["empty"]["items"] == {"type": "string", "optional": True}
    assert fields["nulls"]["items"] == {"type": "string", "optional": True}
    assert fields["matrix"]["items"] == {"type": "array", "optional": False,
                                         "items": {"type": "int64", "optional": False}}


def test_json_schema_merges_struct_elements_and_null_fields() -> None:
    schema = infer_schema("c", {"l": [{"a": None}, {"a": 1, "b": "x"}, {"b": None}]})
    items = schema["fields"][0]["items"]
    assert {f["field"]: (f["type"], f["optional"]) for f in items["fields"]} == {
        "a": ("int64", True), "b": ("string", True)}


@pytest.mark.parametrize(("value", "match"), [
    ({"l": [1, "a"]}, "mix int64 and string"),
    ({"l": [{"a": 1}, {"a": "x"}]}, "mix int64 and string"),
    ({"l": [[1], ["x"]]}, "mix int64 and string"),
    ({"n": 2**63}, "int64"),
    ({"f": float("nan")}, "no JSON form"),
    ({"f": float("inf")}, "no JSON form"),
    ({"b": b"x"}, "bytes has no Connect schema"),
    ({"s": {1, 2}}, "set has no Connect schema"),
    ({"d": {1: "x"}}, "not a string"),
])
def test_json_schema_refuses_values_without_a_connect_schema(value: dict[str, Any],
                                                             match: str) -> None:
    with pytest.raises(CodecError, match=match):
        _json_schema().encode_value("t", "c", value)


def _envelope(fields: list[dict[str, Any]], payload: Any, **schema: Any) -> bytes:
    return orjson.dumps({"schema": {"type": "struct", "fields": fields, "optional": False,
                                    **schema}, "payload": payload})


def test_json_schema_decodes_what_kafka_connect_writes() -> None:
    fields = [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "int8", "optional": True, "field": "small"},
        {"type": "float", "optional": True, "field": "ratio"},
        {"type": "int64", "optional": False, "name": "org.apache.kafka.connect.data.Timestamp",
         "version": 1, "field": "ts"},
        {"type": "bytes", "optional": True, "field": "blob"},
        {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal",
         "parameters": {"scale": "2"}, "field": "price"},
        {"type": "map", "keys": {"type": "string", "optional": False},
         "values": {"type": "int32", "optional": False}, "optional": True, "field": "counts"},
        {"type": "map", "keys": {"type": "int32", "optional": False},
         "values": {"type": "string", "optional": True}, "optional": True, "field": "byId"},
        {"type": "struct", "optional": True, "field": "address",
         "fields": [{"type": "string", "optional": True, "field": "city"}]},
        {"type": "struct", "optional": True, "field": "missing",
         "fields": [{"type": "string", "optional": False, "field": "x"}]},
        {"type": "string", "optional": True, "default": "n/a", "field": "status"},
        {"type": "array", "items": {"type": "double", "optional": True}, "optional": True,
         "field": "readings"},
    ]
    blob = base64.b64encode(b"\x00\x01").decode()
    payload = {"id": 7, "small": -3, "ratio": 0.5, "ts": 1_700_000_000_000, "blob": blob,
               "price": 12.5, "counts": {"a": 1}, "byId": [[1, "one"], [2, None]],
               "address": None, "status": None, "readings": [1.5, None, 2]}
    value = _json_schema().decode_value("t", _envelope(fields, payload, name="x.Person",
                                                       version=2, doc="a person"))
    assert value == {**payload, "status": "n/a"}  # the default fills a null field
    # a map with string keys is a value too; so is schemaless JSON in an envelope
    as_map = orjson.dumps({"schema": {"type": "map", "keys": {"type": "string"},
                                      "values": {"type": "int64"}, "optional": False},
                           "payload": {"a": 1}})
    assert _json_schema().decode_value("t", as_map) == {"a": 1}
    assert _json_schema().decode_value("t", b'{"schema":null,"payload":{"a":[1]}}') == {
        "a": [1]}


@pytest.mark.parametrize(("data", "match"), [
    (b"{nope", "not JSON"),
    (b'{"a": 1}', "envelope"),
    (b'{"schema": {"type": "struct", "fields": []}}', "envelope"),
    (b'{"schema": {"type": "struct", "fields": []}, "payload": {}, "x": 1}', "envelope"),
    (b'{"schema": {"type": "struct", "fields": []}, "payload": null}', "payload is null"),
    (b'{"schema": {"type": "string"}, "payload": "x"}', "needs a struct"),
    (b'{"schema": null, "payload": [1]}', "JSON object"),
    (_envelope([{"type": "string", "optional": False, "field": "a"}], {}), "null for a required"),
    (_envelope([{"type": "string", "optional": False, "field": "a"}], {"a": None}),
     "null for a required"),
    (_envelope([{"type": "string", "optional": True, "field": "a"}], {"a": 1}),
     "expected string"),
    (_envelope([{"type": "int32", "optional": True, "field": "a"}], {"a": 2**31}),
     "out of int32"),
    (_envelope([{"type": "int8", "optional": True, "field": "a"}], {"a": 1.5}), "expected int8"),
    (_envelope([{"type": "int64", "optional": True, "field": "a"}], {"a": True}),
     "expected int64"),
    (_envelope([{"type": "double", "optional": True, "field": "a"}], {"a": "1"}),
     "expected double"),
    (_envelope([{"type": "boolean", "optional": True, "field": "a"}], {"a": 1}),
     "expected boolean"),
    (_envelope([{"type": "bytes", "optional": True, "field": "a"}], {"a": "@@"}), "base64"),
    (_envelope([{"type": "bytes", "optional": True, "field": "a"}], {"a": 1}), "base64 text"),
    (_envelope([{"type": "array", "optional": True, "field": "a"}], {"a": []}), "'items'"),
    (_envelope([{"type": "array", "items": {"type": "string"}, "optional": True, "field": "a"}],
               {"a": [None]}), "null for a required"),
    (_envelope([{"type": "array", "items": {"type": "string"}, "optional": True, "field": "a"}],
               {"a": "x"}), "expected array"),
    (_envelope([{"type": "map", "keys": {"type": "string"}, "optional": True, "field": "a"}],
               {"a": {}}), "'keys' and 'values'"),
    (_envelope([{"type": "map", "keys": {"type": "string"}, "values": {"type": "int32"},
                 "optional": True, "field": "a"}], {"a": {"k": "v"}}), "expected int32"),
    (_envelope([{"type": "map", "keys": {"type": "int32"}, "values": {"type": "int32"},
                 "optional": True, "field": "a"}], {"a": [[1, 2, 3]]}), "pair"),
    (_envelope([{"type": "map", "keys": {"type": "int32"}, "values": {"type": "int32"},
                 "optional": True, "field": "a"}], {"a": {"1": 2}}), "array of"),
    (_envelope([{"type": "struct", "fields": [], "optional": True, "field": "a"}],
               {"a": [1]}), "expected struct"),
    (_envelope([{"type": "struct", "fields": {}, "optional": True, "field": "a"}],
               {"a": {}}), "'fields' is not an array"),
    (_envelope([{"type": "string", "optional": True}], {}), "without a 'field' name"),
    (_envelope([{"type": "uuid", "optional": True, "field": "a"}], {"a": "x"}),
     "unknown type 'uuid'"),
    (_envelope([{"type": ["string"], "optional": True, "field": "a"}], {"a": "x"}),
     r"unknown type \['string'\]"),
    (_envelope([{"type": {"t": 1}, "optional": True, "field": "a"}], {"a": "x"}),
     "unknown type"),
    (_envelope(["string"], {}), "without a 'field' name"),  # type: ignore[list-item]
    (_envelope([{"type": "string", "optional": True, "field": "a"}], {"a": "x", "b": 1}),
     r"\['b'\] are not in the schema"),
    (_envelope([], []), "expected struct"),
])
def test_json_schema_decode_errors(data: bytes, match: str) -> None:
    with pytest.raises(CodecError, match=match):
        _json_schema().decode_value("t", data)


# ------------------------------------------------------------------------- avro (fake)


def _avro(registry: FakeRegistry, **config: Any) -> AvroConverter:
    return AvroConverter(ConverterConfig(value="avro", schema_registry_url="http://r:1",
                                         **config), registry=registry)


AVRO_VALUE = {**VALUE, "blob": b"\x00\xff", "empty": [], "matrix": [[1, 2], [], [3]]}


def test_avro_round_trip_with_an_inferred_schema() -> None:
    registry = FakeRegistry()
    writer = _avro(registry)
    data = writer.encode_value("orders-topic", "people", AVRO_VALUE)
    assert data is not None and data[0] == 0
    (schema_id,) = struct.unpack(">I", data[1:5])
    schema = orjson.loads(registry.schemas[schema_id])
    assert (schema["name"], schema["namespace"]) == ("people", "gridstream.connect")
    assert [f["name"] for f in schema["fields"]] == sorted(AVRO_VALUE)
    assert all(f["default"] is None for f in schema["fields"])
    types = {f["name"]: f["type"] for f in schema["fields"]}
    assert types["name"] == ["null", "string"] and types["nickname"] == "null"
    assert types["empty"] == ["null", {"type": "array", "items": "null"}]
    assert registry.subjects == {"orders-topic-value": [schema_id]}
    reader = _avro(FakeRegistry())
    reader.registry = registry
    # read back in the grid's wire form: bytes as base64 text (as the Space stores them)
    assert reader.decode_value("orders-topic", data) == {**AVRO_VALUE, "blob": "AP8="}
    assert writer.encode_value("t", "c", None) is None and reader.decode_value("t", None) is None


def _framed(schema: dict[str, Any], value: dict[str, Any]) -> tuple[FakeRegistry, bytes]:
    import io

    import fastavro

    registry = FakeRegistry()
    schema_id = registry.register("t-value", orjson.dumps(schema).decode())
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return registry, struct.pack(">bI", 0, schema_id) + out.getvalue()


def test_avro_decodes_to_the_grids_wire_form() -> None:
    """A producer's bytes, fixed, decimal, timestamp, date and uuid fields decoded to
    Python objects no grid value holds: Hazelcast's JSON encoding raised TypeError (bytes,
    Decimal) outside the error policy, and NaN became null silently."""
    import datetime as dt
    import uuid
    from decimal import Decimal

    schema = {"type": "record", "name": "Row", "fields": [
        {"name": "b", "type": "bytes"},
        {"name": "f", "type": {"type": "fixed", "name": "F2", "size": 2}},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6,
                               "scale": 2}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "x", "type": "double"},
        {"name": "l", "type": {"type": "array", "items": "bytes"}}]}
    when = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    registry, data = _framed(schema, {
        "b": b"\x00\xff", "f": b"ab", "d": Decimal("12.34"), "ts": when,
        "day": dt.date(2024, 1, 2), "u": ident, "x": 1.5, "l": [b"\x01"]})
    value = _avro(registry).decode_value("t", data)
    assert value == {"b": "AP8=", "f": "YWI=", "d": "12.34", "ts": when.isoformat(),
                     "day": "2024-01-02", "u": str(ident), "x": 1.5, "l": ["AQ=="]}
    orjson.dumps(value)  # what a grid does with it
    registry, data = _framed({"type": "record", "name": "N", "fields": [
        {"name": "x", "type": {"type": "array", "items": "double"}}]},
        {"x": [1.0, float("nan")]})
    with pytest.raises(CodecError, match=r"field 'x\[1\]': nan has no JSON form"):
        _avro(registry).decode_value("t", data)


@pytest.mark.parametrize("value", [
    {"a": {"b": {"x": 1}}, "a_b": {"y": 2}},
    {"x": [{"p": 1}], "x_item": {"q": "s"}},
    {"x": [[{"p": 1}]], "x_item_item": {"q": 1.5}, "x_item": [{"r": True}]}])
def test_avro_nested_records_whose_names_joined_by_underscore_collide(
        value: dict[str, Any]) -> None:
    """Nested records were named ``<parent>_<field>``: fields ``a_b`` and ``a.b`` gave
    one name twice, an invalid schema, and a valid value was refused."""
    registry = FakeRegistry()
    data = _avro(registry).encode_value("t", "c", value)
    assert _avro(registry).decode_value("t", data) == value
    if "a" in value:  # sorted first: field "a", a record named by its path
        nested = orjson.loads(registry.schemas[1])["fields"][0]["type"][1]
        assert (nested["namespace"], nested["name"]) == ("gridstream.connect.c", "a")


def test_avro_caches_registry_calls() -> None:
    registry = FakeRegistry()
    converter = _avro(registry)
    for i in range(50):
        data = converter.encode_value("t", "people", {"id": i, "name": f"n{i}"})
        converter.decode_value("t", data)
    converter.encode_value("t", "people", {"id": 1, "name": None})  # name: a string
    converter.encode_value("t", "people", {"id": 2, "name": None})
    converter.encode_value("t", "people", {"id": 1, "name": None, "x": 1.5})
    # one registration per schema, no lookup of its own ids; a value with a None field
    # reads the subject's versions (the first fits), then only to find a newer one that
    # fits (none: its schema is registered)
    assert registry.calls == [("register", "t-value"), ("versions", "t-value"),
                              ("versions", "t-value"), ("register", "t-value")]
    reader = _avro(registry)
    for _ in range(3):
        reader.decode_value("t", data)
    assert registry.calls[-1] == ("schema", 1) and len(registry.calls) == 5
    converter.close()
    assert registry.calls[-1:] == [("close", None)]


def test_avro_a_refused_schema_is_asked_once() -> None:
    registry = FakeRegistry(refuse='"name":"bad"')
    converter = _avro(registry)
    for _ in range(5):
        with pytest.raises(CodecError, match=r"incompatible \(compat.*\): a reason"):
            converter.encode_value("t", "c", {"bad": 1})
    assert converter.decode_value("t", converter.encode_value("t", "c", {"good": 1})) == {
        "good": 1}
    assert registry.calls == [("register", "t-value"), ("register", "t-value")]


def test_avro_null_fields_take_the_type_seen_before() -> None:
    registry = FakeRegistry()
    first = _avro(registry)
    first.encode_value("t", "c", {"a": 5, "b": {"x": "s"}})
    # a converter of a later run learns from the subject's latest schema
    later = _avro(registry)
    data = later.encode_value("t", "c", {"a": None, "b": None})
    assert data is not None
    assert data[1:5] == struct.pack(">I", 1)  # the very same schema: nothing new registered
    assert later.decode_value("t", data) == {"a": None, "b": None}


def test_avro_bytes_do_not_depend_on_what_a_worker_encoded_before() -> None:
    """A None field took the type this worker had seen (or the subject's latest version
    when it first met the subject): two workers with different histories wrote one value
    with different schema ids, and a batch re-run in a fresh worker was refused by the
    exactly-once writer (its content differed) on every restart."""
    registry = FakeRegistry()
    _avro(registry).encode_value("t", "c", {"a": 1, "b": {"x": 1}})  # version 1
    first, second = _avro(registry), _avro(registry)
    first.encode_value("t", "c", {"a": 2, "b": {"x": 2}})
    second.encode_value("t", "c", {"a": 3, "b": {"x": 3, "y": "s"}})  # version 2: b.y
    value = {"a": None, "b": None}
    data = first.encode_value("t", "c", value)
    assert data is not None and data[1:5] == struct.pack(">I", 1)  # the earliest that fits
    assert second.encode_value("t", "c", value) == data
    assert _avro(registry).encode_value("t", "c", value) == data
    assert _avro(registry).decode_value("t", data) == value


def test_avro_a_batch_re_run_by_a_fresh_worker_writes_the_same_bytes() -> None:
    registry = FakeRegistry()
    _avro(registry).encode_value("t", "c", {"a": 1, "b": {"x": 1}, "tags": ["t"]})
    batch: list[dict[str, Any]] = [
        {"a": None, "b": None, "tags": []},
        {"a": 1, "b": {"x": 1, "y": "s"}, "tags": ["t"]},  # evolves the subject
        {"a": None, "b": {"x": 2, "y": None}, "tags": [None]},
        {"a": None, "b": None, "tags": None, "new": None},
        {"a": 5, "b": None, "tags": [], "new": 1.5},
    ]
    runs = [[_avro(registry).encode_value("t", "c", v) for v in batch] for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    # each run in its own worker, or the same worker again: the same bytes
    worker = _avro(registry)
    assert [worker.encode_value("t", "c", v) for v in reversed(batch)] == runs[0][::-1]
    reader = _avro(registry)
    assert [reader.decode_value("t", d) for d in runs[0]] == batch


def test_avro_a_none_field_fits_only_a_version_of_the_same_record() -> None:
    registry = FakeRegistry()
    converter = _avro(registry)
    converter.encode_value("t", "c", {"a": 1, "b": "x"})  # 1
    converter.encode_value("t", "c", {"a": {"deep": 1}})  # 2: other fields
    converter.encode_value("t", "other", {"a": 1})  # 3: another record in the subject
    data = _avro(registry).encode_value("t", "c", {"a": None})
    assert data is not None and data[1:5] == struct.pack(">I", 2)
    data = _avro(registry).encode_value("t", "other", {"a": None})
    assert data is not None and data[1:5] == struct.pack(">I", 3)
    # nothing fits: registered with the types of the subject's latest version
    data = _avro(registry).encode_value("t", "c", {"a": None, "z": None})
    assert data is not None and data[1:5] == struct.pack(">I", 4)
    schema = orjson.loads(registry.schemas[4])
    assert [f["type"] for f in schema["fields"]] == [["null", "long"], "null"]


class FlakyRegistry(FakeRegistry):
    """Its first versions read fails as an unreachable registry does."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True

    def versions(self, subject: str, after: int = 0) -> list[tuple[int, int, str]]:
        if self.down:
            self.down = False
            raise ConnectorError("schema registry http://r:1: reading subject failed")
        return super().versions(subject, after)


def test_avro_a_failed_versions_read_is_asked_again() -> None:
    """A subject must not be marked as read before the read: after the registry came
    back the converter would not know the subject's types, infer "null" for a None field
    where the subject has ["null", "long"], and the registry would refuse the narrowed
    schema, blaming the record."""
    registry = FlakyRegistry()
    registry.down = False
    _avro(registry).encode_value("t", "c", {"a": 5})
    registry.down = True
    later = _avro(registry)
    with pytest.raises(ConnectorError):
        later.encode_value("t", "c", {"a": None})
    data = later.encode_value("t", "c", {"a": None})
    assert data is not None and data[1:5] == struct.pack(">I", 1)  # the subject's schema


@pytest.mark.parametrize(("strategy", "subject"), [
    ("topic", "tp-value"), ("record", "gridstream.connect.my_cache"),
    ("topic_record", "tp-gridstream.connect.my_cache")])
def test_avro_subject_name_strategies(strategy: str, subject: str) -> None:
    registry = FakeRegistry()
    _avro(registry, subject_name_strategy=strategy).encode_value("tp", "my-cache", {"a": 1})
    assert list(registry.subjects) == [subject]


@pytest.mark.parametrize(("value", "match"), [
    ({"l": [1, "a"]}, "mix long and string"),
    ({"l": [{"a": 1}, {"b": 1}]}, "same fields"),
    ({"l": [[1], ["a"]]}, "mix long and string"),
    ({"bad-name": 1}, "not an Avro field name"),
    ({"n": -(2**63) - 1}, "long"),
    ({"d": {1: 2}}, "not a string"),
    ({"s": {1}}, "no inferred Avro type"),
])
def test_avro_inference_errors(value: dict[str, Any], match: str) -> None:
    with pytest.raises(CodecError, match=match):
        _avro(FakeRegistry()).encode_value("t", "c", value)


def test_avro_infers_subclasses_of_the_json_types() -> None:
    class Color(enum.IntEnum):
        RED = 1

    class Name(str):
        pass

    registry = FakeRegistry()
    converter = _avro(registry)
    value = {"c": Color.RED, "n": Name("x"), "o": collections.OrderedDict(a=1.5)}
    data = converter.encode_value("t", "c", value)
    assert converter.decode_value("t", data) == {"c": 1, "n": "x", "o": {"a": 1.5}}
    assert "long" in registry.schemas[1] and "double" in registry.schemas[1]


def _declare(tmp_path: Path, fields: list[dict[str, Any]]) -> dict[str, str]:
    path = tmp_path / "person.avsc"
    path.write_bytes(orjson.dumps({"type": "record", "name": "Person", "namespace": "x.y",
                                   "fields": fields}))
    return {"people": str(path)}


def test_avro_declared_schema(tmp_path: Path) -> None:
    registry = FakeRegistry()
    schemas = _declare(tmp_path, [
        {"name": "id", "type": "long"},
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "home", "default": None, "type": ["null", {
            "type": "record", "name": "Home", "fields": [{"name": "city", "type": "string"}]}]}])
    converter = _avro(registry, avro_schemas=schemas, subject_name_strategy="record")
    data = converter.encode_value("t", "people", {"id": 1})
    assert converter.decode_value("t", data) == {"id": 1, "email": None, "home": None}
    assert list(registry.subjects) == ["x.y.Person"]
    for bad, match in (({"email": "e"}, "missing"), ({"id": 1, "age": 3}, "more fields"),
                       ({"id": "x"}, "integer"), ({"id": 1, "email": 5}, "email"),
                       ({"id": 1, "home": {"city": "c", "zip": "z"}}, "specifies: zip")):
        with pytest.raises(CodecError, match=match):
            converter.encode_value("t", "people", bad)


def test_avro_writer_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import gridstream.connect._avro as avro

    monkeypatch.setattr(avro, "_MAX_CACHED", 3)
    registry = FakeRegistry()
    converter = _avro(registry)
    for i in range(10):
        data = converter.encode_value("t", "c", {f"f{i}": i})
        assert converter.decode_value("t", data) == {f"f{i}": i}
    assert len(converter._writers) <= 3 and len(converter._ids) <= 3
    assert [c for c, _ in registry.calls].count("register") == 10


def test_avro_caches_stay_bounded_over_10000_shapes() -> None:
    """Reader schemas and the per-cache memory of field types kept one entry per shape
    (10,000 shapes: 10,000 entries) while the writer cache was bounded."""
    import gridstream.connect._avro as avro

    registry = FakeRegistry()
    converter, reader = _avro(registry), _avro(registry)
    for i in range(10_000):
        value: dict[str, Any] = {f"f{i}": i, **({"n": None} if i % 500 == 0 else {})}
        data = converter.encode_value("t", "c", value)
        assert converter.decode_value("t", data) == value == reader.decode_value("t", data)
    for held in (converter, reader):
        assert len(held._readers) <= avro._MAX_CACHED
        assert max(len(held._writers), len(held._wire), len(held._ids)) <= avro._MAX_CACHED
        assert not hasattr(held, "_memory")  # a None field's type comes from the registry
        assert sum(v.size for v in held._versions.values()) <= avro._MAX_CACHED


def test_avro_a_subject_of_more_versions_than_cached_still_gives_the_earliest(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import gridstream.connect._avro as avro

    monkeypatch.setattr(avro, "_MAX_CACHED", 4)
    registry = FakeRegistry()
    converter = _avro(registry)
    for i in range(12):
        converter.encode_value("t", "c", {f"f{i}": i, "n": "x"})
        data = converter.encode_value("t", "c", {f"f{i}": None, "n": None})
        assert data is not None and data[1:5] == struct.pack(">I", i + 1)
        assert sum(v.size for v in converter._versions.values()) <= 4
        assert len(converter._readers) <= 4


@pytest.mark.parametrize(("content", "match"), [
    (None, "cannot read"), (b"{x", "not JSON"), (b'{"type": "string"}', "record"),
    (b'{"type": "record", "name": "R", "fields": [{"name": "a", "type": "nope"}]}',
     "not a valid Avro schema")])
def test_avro_declared_schema_errors_are_config_errors(tmp_path: Path, content: bytes | None,
                                                      match: str) -> None:
    path = tmp_path / "s.avsc"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError, match=match):
        _avro(FakeRegistry(), avro_schemas={"c": str(path)})


def test_avro_decode_errors() -> None:
    registry = FakeRegistry()
    converter = _avro(registry)
    data = converter.encode_value("t", "c", {"a": "text"})
    assert data is not None
    registry.schemas[99] = '"string"'
    for bad, match in ((b"", "magic byte"), (b"\x00\x00", "magic byte"),
                       (b"\x01" + data[1:], "magic byte"),
                       (b"\x00\x00\x00\x00\x07" + data[5:], "unknown"),
                       (b"\x00\x00\x00\x00\x63\x02a", "not a record"),
                       (data[:-1], "does not match"), (data + b"\x00", "beyond")):
        with pytest.raises(CodecError, match=match):
            converter.decode_value("t", bad)


def test_avro_registry_url_and_credentials_never_print() -> None:
    config = ConverterConfig.model_validate({
        "value": "avro", "schema_registry_url": "https://user:s3cret@reg.example:8081/api",
        "basic.auth.user.info": "u:t0ps3cret"})
    assert "s3cret" not in repr(config) and "t0ps3cret" not in repr(config)
    converter = build_converter(config)
    assert "s3cret" not in repr(converter)
    assert redacted_url("https://user:s3cret@reg.example:8081/api") == \
        "https://reg.example:8081/api"


def test_credentials_in_both_the_url_and_user_info_are_a_config_error() -> None:
    converter = build_converter(ConverterConfig(
        value="avro", schema_registry_url="http://user:s3cret@127.0.0.1:9/api",
        schema_registry_user_info=SecretStr("u:t0ps3cret")))
    with pytest.raises(ConfigError, match="not usable") as refused:
        converter.encode_value("t", "c", {"a": 1})  # the client is built on first use
    assert "s3cret" not in str(refused.value) and refused.value.__cause__ is None
