"""Keys, headers, topic resolution and the Spark schema of the envelope."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gridstream.errors import CodecError
from gridstream.operations import Operation, OpType, PropertySpec, TypeDescriptor
from gridstream.protocol import (
    DefaultTopicResolver,
    IdKeyCodec,
    MessageFactory,
    OperationDecoder,
    OperationEncoder,
    TypeIdKeyCodec,
    header_value,
    spark_schema_ddl,
)

DOC = TypeDescriptor(name="Doc", id_property="id")
TYPED = TypeDescriptor(name="Order", id_property="id", topic="orders",
                       fixed=(PropertySpec("id", "int"), PropertySpec("total", "decimal"),
                              PropertySpec("at", "datetime"),
                              PropertySpec("lines", "list"),
                              PropertySpec("ship", "object",
                                           nested=(PropertySpec("city", "str"),))))


def _op(data: dict[str, object] | None, op: OpType = OpType.WRITE) -> Operation:
    return Operation(op, "Doc", "d1", 7, data, 2, 1000, txn_id="t1")


def test_key_is_the_entity_id_as_text_and_headers_carry_the_essentials() -> None:
    message = OperationEncoder().encode(_op({"a": 1}), DOC, "docs")
    assert message.key == b"d1"
    headers = dict(message.headers)
    assert headers == {"gs.op": b"WRITE", "gs.type": b"Doc", "gs.version": b"7",
                       "gs.partition": b"2", "gs.codec": b"json", "gs.txn": b"t1",
                       "gs.ts": b"1000"}
    assert message.timestamp_ms == 1000
    envelope = OperationDecoder().decode(message.value, message.headers)
    assert envelope.to_operation() == _op({"a": 1})


@given(st.text(min_size=1).filter(lambda t: ":" not in t), st.text() | st.integers())
def test_type_id_key_round_trip(type_name: str, entity_id: str | int) -> None:
    codec = TypeIdKeyCodec()
    assert codec.decode(codec.encode(type_name, entity_id)) == (type_name, str(entity_id))


def test_key_codec_errors() -> None:
    with pytest.raises(CodecError):
        TypeIdKeyCodec().encode("a:b", 1)
    with pytest.raises(CodecError):
        IdKeyCodec().decode(b"\xff")


def test_topic_resolution_order() -> None:
    resolver = DefaultTopicResolver(default_topic="fallback")
    assert resolver.resolve(_op({"kafka.topic": "t-doc"}), TYPED) == "orders"
    assert resolver.resolve(_op({"kafka.topic": "t-doc"}), DOC) == "t-doc"
    assert resolver.resolve(_op(None, OpType.REMOVE), DOC) == "fallback"
    assert DefaultTopicResolver().resolve(_op({"x": 1}), DOC) is None
    custom = DefaultTopicResolver(topic_property="dest", topic_prefix="p.")
    assert custom.resolve(_op({"dest": "x"}), DOC) == "p.x"


def test_custom_message_factory() -> None:
    class Slim(MessageFactory):
        def headers(self, envelope, codec_name):  # type: ignore[no-untyped-def]
            return [("gs.codec", codec_name.encode())]

    message = OperationEncoder(factory=Slim()).encode(_op({}), DOC, "docs")
    assert message.headers == (("gs.codec", b"json"),)
    assert header_value(message.headers, "gs.op") is None


def test_spark_ddl_types_data_per_descriptor() -> None:
    assert spark_schema_ddl(TYPED) == (
        "op STRING, type STRING, id BIGINT, version BIGINT, txn STRING, ts BIGINT, "
        "`partition` INT, data STRUCT<id: BIGINT, total: STRING, at: TIMESTAMP, "
        "lines: ARRAY<STRING>, ship: STRUCT<city: STRING>>, removed ARRAY<STRING>"
    )
    assert "data STRING" in spark_schema_ddl(None)
    assert "data MAP<STRING, STRING>" in spark_schema_ddl(DOC)
