"""Codec round trips: every codec restores what the envelope carried."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridstream.errors import CodecError, ConfigError
from gridstream.operations import OpType, PropertySpec, TypeDescriptor
from gridstream.protocol import (
    Codec,
    Envelope,
    OperationDecoder,
    codec_names,
    create_codec,
    register_codec,
)
from gridstream.protocol.avro import LocalSchemaRegistry

ADDRESS = PropertySpec("address", "object", nested=(PropertySpec("street", "str"),
                                                    PropertySpec("number", "int")))
PERSON = TypeDescriptor(
    name="Person", id_property="id", topic="people",
    fixed=(
        PropertySpec("id", "str"), PropertySpec("name", "str"), PropertySpec("age", "int"),
        PropertySpec("score", "float"), PropertySpec("active", "bool"),
        PropertySpec("photo", "bytes"), PropertySpec("born", "datetime"),
        PropertySpec("day", "date"), PropertySpec("balance", "decimal"),
        PropertySpec("ref", "uuid"), PropertySpec("tags", "set"), PropertySpec("items", "list"),
        PropertySpec("attrs", "dict"), ADDRESS,
    ),
)
TYPES = {PERSON.name: PERSON}

texts = st.text(max_size=20)
aware = st.datetimes(timezones=st.just(dt.UTC), min_value=dt.datetime(1971, 1, 1),
                     max_value=dt.datetime(2200, 1, 1))
values: dict[str, st.SearchStrategy[Any]] = {
    "name": texts,
    "age": st.integers(-(2**63), 2**63 - 1),
    "score": st.floats(allow_nan=False, allow_infinity=False),
    "active": st.booleans(),
    "photo": st.binary(max_size=40),
    "born": aware,
    "day": st.dates(),
    "balance": st.decimals(allow_nan=False, allow_infinity=False, places=4,
                           min_value=-(10**12), max_value=10**12),
    "ref": st.uuids(),
    "tags": st.sets(texts, max_size=4),
    "items": st.lists(st.integers(-1000, 1000), max_size=4),
    "attrs": st.dictionaries(texts, st.integers(-5, 5) | texts, max_size=3),
    "address": st.fixed_dictionaries({"street": texts, "number": st.integers(0, 10_000)}),
    "extra.dynamic": st.integers(-5, 5) | texts,
}


@st.composite
def envelopes(draw: st.DrawFn) -> Envelope:
    op = draw(st.sampled_from(list(OpType)))
    keys = draw(st.sets(st.sampled_from(sorted(values)), max_size=len(values)))
    data: dict[str, Any] | None = {"id": "p-1", **{k: draw(values[k]) for k in keys}}
    if op.is_delete and draw(st.booleans()):
        data = None
    removed = tuple(draw(st.lists(texts, max_size=3))) if op is OpType.CHANGE else ()
    return Envelope(op=op, type="Person", id=draw(st.integers(0, 2**40) | texts),
                    version=draw(st.integers(0, 2**62)), ts=draw(st.integers(0, 2**42)),
                    partition=draw(st.integers(0, 1000)), data=data,
                    txn=draw(st.none() | texts), removed=removed)


@pytest.mark.parametrize("name", ["json", "msgpack", "avro"])
@settings(max_examples=150, deadline=None)
@given(envelope=envelopes())
def test_round_trip_restores_every_value(name: str, envelope: Envelope) -> None:
    codec = create_codec(name)
    assert codec.decode(codec.encode(envelope, PERSON), TYPES) == envelope


def test_json_wire_form_is_flat_and_documented() -> None:
    envelope = Envelope(op=OpType.WRITE, type="Person", id="p-1", version=3, ts=10, partition=1,
                        data={"id": "p-1", "born": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
                              "balance": Decimal("1.50"), "ref": uuid.UUID(int=1),
                              "photo": b"\x00\x01", "tags": {"b", "a"}})
    raw = create_codec("json").encode(envelope, PERSON)
    assert raw == (
        b'{"op":"WRITE","type":"Person","id":"p-1","version":3,"txn":null,"ts":10,'
        b'"partition":1,"data":{"id":"p-1","born":"2024-01-02T03:04:05+00:00",'
        b'"balance":"1.50","ref":"00000000-0000-0000-0000-000000000001","photo":"AAE=",'
        b'"tags":["a","b"]},"removed":[]}'
    )


def test_json_without_descriptor_keeps_wire_values() -> None:
    envelope = Envelope(op=OpType.WRITE, type="Person", id=1, version=1, ts=1, partition=0,
                        data={"balance": Decimal("2")})
    codec = create_codec("json")
    decoded = codec.decode(codec.encode(envelope, PERSON), {})
    assert decoded.data == {"balance": "2"}


def test_unserializable_value_is_a_codec_error() -> None:
    envelope = Envelope(op=OpType.WRITE, type="Person", id=1, version=1, ts=1, partition=0,
                        data={"name": object()})
    for name in ("json", "msgpack", "avro"):
        with pytest.raises(CodecError):
            create_codec(name).encode(envelope, PERSON)


def test_avro_uses_confluent_framing_and_a_registry() -> None:
    registry = LocalSchemaRegistry()
    codec = create_codec("avro", registry=registry)
    envelope = Envelope(op=OpType.WRITE, type="Person", id="x", version=1, ts=1, partition=0,
                        data={"id": "x", "age": 3})
    raw = codec.encode(envelope, PERSON)
    assert raw[0] == 0
    schema_id = int.from_bytes(raw[1:5], "big")
    assert registry.lookup(schema_id) is not None
    # a fresh codec with only the descriptors derives the same schema id
    assert create_codec("avro").decode(raw, TYPES) == envelope


def test_avro_schema_directory_lets_a_consumer_decode_without_descriptors(tmp_path: Any) -> None:
    writer = create_codec("avro", registry=LocalSchemaRegistry(tmp_path))
    envelope = Envelope(op=OpType.UPDATE, type="Person", id="x", version=1, ts=1, partition=0,
                        data={"id": "x", "balance": Decimal("3.25"), "tags": {"z"}})
    raw = writer.encode(envelope, PERSON)
    reader = create_codec("avro", registry=LocalSchemaRegistry(tmp_path))
    assert reader.decode(raw, {}) == envelope


def test_avro_unknown_schema_id_is_a_codec_error() -> None:
    with pytest.raises(CodecError):
        create_codec("avro").decode(b"\x00\x00\x00\x00\x07abc", {})


def test_codec_registry_is_an_allow_list() -> None:
    assert {"json", "msgpack", "avro"} <= set(codec_names())
    assert "pickle" not in codec_names()
    with pytest.raises(ConfigError):
        create_codec("pickle")
    with pytest.raises(ConfigError):
        register_codec("json", lambda: create_codec("json"))


class UpperJson(Codec):
    name = "upper-json-test"

    def encode(self, envelope: Envelope, descriptor: TypeDescriptor | None) -> bytes:
        return create_codec("json").encode(envelope, descriptor)

    def decode(self, payload: bytes, types: Any) -> Envelope:
        return create_codec("json").decode(payload, types)


def test_custom_codec_registration_and_decoder_choice_by_header() -> None:
    register_codec(UpperJson.name, UpperJson, replace=True)
    envelope = Envelope(op=OpType.WRITE, type="Person", id=1, version=1, ts=1, partition=0)
    payload = create_codec(UpperJson.name).encode(envelope, None)
    decoder = OperationDecoder(TYPES, allowed=("json", UpperJson.name))
    assert decoder.decode(payload, [("gs.codec", UpperJson.name.encode())]) == envelope
    with pytest.raises(CodecError):
        decoder.decode(payload, [("gs.codec", b"msgpack")])
    with pytest.raises(CodecError):
        decoder.decode(None, [])


@pytest.mark.parametrize("payload", [b"", b"{", b"[]", b'{"op":"NOPE"}',
                                     b'{"op":"WRITE","type":"T","id":1.5,"version":1,"ts":1,'
                                     b'"partition":0}'])
def test_malformed_json_is_a_codec_error(payload: bytes) -> None:
    with pytest.raises(CodecError):
        create_codec("json").decode(payload, {})
