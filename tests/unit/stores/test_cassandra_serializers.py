"""Value serializers: round trips with types kept, strict refusals, name registry."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gridstream.errors import CodecError, ConfigError
from gridstream.stores.cassandra._json import row_json
from gridstream.stores.cassandra.serializers import (
    JsonSerializer,
    PropertyValueSerializer,
    TaggedMsgpackSerializer,
    available_serializers,
    register_serializer,
    resolve_serializer,
)
from tests.unit.stores.cassandra_strategies import dynamic_values

MSGPACK = TaggedMsgpackSerializer()
JSON = JsonSerializer()

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (1 == 1.0 == True is not enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@given(dynamic_values)
def test_msgpack_round_trip_keeps_types(value: Any) -> None:
    assert same(MSGPACK.from_bytes(MSGPACK.to_bytes(value)), value)


@given(st.integers())
def test_msgpack_integers_of_any_size(value: int) -> None:
    assert MSGPACK.from_bytes(MSGPACK.to_bytes(value)) == value


def test_msgpack_explicit_tags() -> None:
    value = {
        "when": dt.datetime(
            2024, 5, 1, 12, 30, 1, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2))
        ),
        "naive": dt.datetime(2024, 5, 1, 12, 30),
        "day": dt.date(2024, 5, 1),
        "price": Decimal("10.50"),
        "key": uuid.UUID(int=42),
        "raw": b"\x00\xff",
        "tags": {"a", "b"},
        "frozen": frozenset({1}),
        "pair": (1, "x"),
        "by_id": {1: "one", (2, 3): "pair"},
    }
    back = MSGPACK.from_bytes(MSGPACK.to_bytes(value))
    assert same(back, value) or back == value
    assert back["price"].as_tuple() == Decimal("10.50").as_tuple()
    assert back["when"].utcoffset() == dt.timedelta(hours=2)
    assert back["naive"].tzinfo is None


def test_msgpack_refuses_unknown_objects() -> None:
    class Custom:
        pass

    with pytest.raises(CodecError):
        MSGPACK.to_bytes(Custom())
    with pytest.raises(CodecError):
        MSGPACK.from_bytes(b"\xc1")  # a byte msgpack never uses


@given(json_values)
def test_json_round_trip(value: Any) -> None:
    assert same(JSON.from_bytes(JSON.to_bytes(value)), value)


@pytest.mark.parametrize(
    "value", [(1, 2), {1}, dt.date(2024, 1, 1), Decimal("1"), float("nan"), {1: "a"}, b"x"]
)
def test_json_refuses_what_it_would_change(value: Any) -> None:
    with pytest.raises(CodecError):
        JSON.to_bytes(value)


def test_registry_is_an_allow_list_with_an_escape_hatch() -> None:
    assert {"json", "msgpack"} <= set(available_serializers())
    assert isinstance(resolve_serializer("msgpack"), TaggedMsgpackSerializer)
    with pytest.raises(ConfigError):
        resolve_serializer("pickle")

    class Upper(PropertyValueSerializer):
        name = "upper"

        def to_bytes(self, value: Any) -> bytes:
            return str(value).upper().encode()

        def from_bytes(self, data: bytes) -> Any:
            return data.decode()

    instance = Upper()
    assert resolve_serializer(instance) is instance
    register_serializer("upper-test", Upper)
    assert isinstance(resolve_serializer("upper-test"), Upper)


def test_row_json_quotes_names_and_encodes_cql_types() -> None:
    doc = row_json(
        {
            "id": 7,
            "address.streetName": "Main",
            "blob": b"\x01\x02",
            "at": dt.datetime(1970, 1, 1, 0, 0, 1, 500000),
            "day": dt.date(2024, 2, 29),
            "price": Decimal("1.10"),
            "ratio": float("inf"),
            "gone": None,
        },
        {
            "id": "bigint",
            "address.streetName": "text",
            "blob": "blob",
            "at": "timestamp",
            "day": "date",
            "price": "decimal",
            "ratio": "double",
            "gone": "text",
        },
    )
    assert json.loads(doc) == {
        '"id"': 7,
        '"address.streetName"': "Main",
        '"blob"': "0x0102",
        '"at"': "1970-01-01 00:00:01.500+0000",
        '"day"': "2024-02-29",
        '"price"': "1.10",
        '"ratio"': "Infinity",
        '"gone"': None,
    }
