"""Heterogeneous JSON mapped onto a declared schema."""

from __future__ import annotations

import datetime as dt
import pickle
from decimal import Decimal
from typing import Any

import orjson
import pytest
from pyspark.sql import types as T  # noqa: N812

from gridstream.errors import CodecError, ConfigError
from gridstream.pipeline.serde import deserializer
from gridstream.pipeline.serde._shaped import ShapedJsonDeserializer

SCHEMA = T.StructType([
    T.StructField("id", T.LongType()),
    T.StructField("name", T.StringType()),
    T.StructField("score", T.DoubleType()),
    T.StructField("tags", T.ArrayType(T.StringType())),
    T.StructField("address", T.StructType([T.StructField("city", T.StringType())])),
])


def _de(unknown: str = "extra", schema: Any = SCHEMA) -> ShapedJsonDeserializer:
    de = deserializer({"value.deserializer": "Json", "value.schema": schema,
                       "unknown.fields": unknown}, is_key=False)
    assert isinstance(de, ShapedJsonDeserializer)
    return de


def _read(de: ShapedJsonDeserializer, value: Any) -> Any:
    return de.python("t", orjson.dumps(value))


def test_missing_fields_read_as_null_and_unknown_ones_go_to_extra() -> None:
    got = _read(_de(), {"id": 1, "level": "WARN", "address": {"city": "Oslo", "zip": 150},
                        "score": 2})
    assert got == {"id": 1, "name": None, "score": 2.0, "tags": None,
                   "address": {"city": "Oslo"},
                   "_extra": {"level": '"WARN"', "address.zip": "150"}}
    assert _read(_de(), {}) == {"id": None, "name": None, "score": None, "tags": None,
                                "address": None, "_extra": {}}


def test_drop_mode_drops_unknown_fields() -> None:
    assert _read(_de("drop"), {"id": 1, "level": "WARN"}) == \
        {"id": 1, "name": None, "score": None, "tags": None, "address": None}
    underscored = deserializer({"value.deserializer": "Json", "value.schema": SCHEMA,
                                "unknown_fields": "drop"}, is_key=False)
    assert "_extra" not in underscored.python("t", b"{}")


@pytest.mark.parametrize(("value", "reason"), [
    ([1, 2], "value is a list, not an object"),
    ("text", "value is text, not an object"),
    ({"id": "1"}, "field 'id': text, not a whole number"),
    ({"id": 1.5}, "field 'id': a number, not a whole number"),
    ({"id": True}, "field 'id': a boolean, not a whole number"),
    ({"id": 2**63}, "out of range for bigint"),
    ({"name": 3}, "field 'name': a number, not text"),
    ({"score": "1.0"}, "field 'score': text, not a number"),
    ({"tags": "a"}, "field 'tags': text, not a list"),
    ({"tags": ["a", 1]}, r"field 'tags\[1\]': a number, not text"),
    ({"address": ["Oslo"]}, "field 'address': a list, not an object"),
    ({"address": {"city": 1}}, "field 'address.city': a number, not text"),
])
def test_unmappable_records_are_codec_errors_naming_the_field(value: Any, reason: str) -> None:
    with pytest.raises(CodecError, match=reason):
        _read(_de(), value)


def test_not_null_text_types_and_not_json() -> None:
    schema = T.StructType([
        T.StructField("id", T.IntegerType(), nullable=False),
        T.StructField("at", T.TimestampType()), T.StructField("day", T.DateType()),
        T.StructField("amount", T.DecimalType(5, 2)), T.StructField("raw", T.BinaryType()),
        T.StructField("flags", T.MapType(T.StringType(), T.BooleanType()))])
    de = _de(schema=schema.json())  # the StructType's JSON form
    assert _read(de, {"id": 1, "at": "2024-01-02T03:04:05+00:00", "day": "2024-01-02",
                      "amount": "123.45", "raw": "AAE=", "flags": {"x": True}}) == {
        "id": 1, "at": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        "day": dt.date(2024, 1, 2), "amount": Decimal("123.45"), "raw": b"\x00\x01",
        "flags": {"x": True}, "_extra": {}}
    with pytest.raises(CodecError, match="declared NOT NULL"):
        _read(de, {"at": None})
    with pytest.raises(CodecError, match="does not fit decimal"):
        _read(de, {"id": 1, "amount": "1234.5"})
    with pytest.raises(CodecError, match="a decimal is written as text"):
        _read(de, {"id": 1, "amount": 1.5})
    with pytest.raises(CodecError, match="is not a date"):
        _read(de, {"id": 1, "day": "yesterday"})
    with pytest.raises(CodecError, match="out of range for int"):
        _read(de, {"id": 2**31})
    with pytest.raises(CodecError, match="not JSON"):
        de.python("t", b"{")
    assert de.python("t", None) is None


def test_ddl_and_pickling() -> None:
    de = _de()
    assert de.ddl == ("struct<id:bigint,name:string,score:double,tags:array<string>,"
                      "address:struct<city:string>, _extra:map<string,string>>")
    copy = pickle.loads(pickle.dumps(de))
    assert _read(copy, {"id": 5}) == _read(de, {"id": 5})


def test_a_schema_that_is_not_a_struct_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not a Spark schema"):
        _de(schema='{"type": "nope"}')
    with pytest.raises(ConfigError, match="extra or drop"):
        _de(unknown="keep")


def test_spark_ddl_needs_the_session_when_no_struct_is_given(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark import SparkContext

    # no running Spark (an earlier test of the same process may have started one)
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    de = _de(schema="id bigint")
    assert de.ddl is None  # parsed once the session is up (decode_columns prepares it)
    with pytest.raises(ConfigError, match="parsed by the Spark session"):
        de.python("t", b"{}")
