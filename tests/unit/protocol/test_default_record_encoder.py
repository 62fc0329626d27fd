"""The default record encoder (the mirror's hot path) against the general path: the same
key, value, headers and timestamp byte for byte, and the same error, for any operation."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import enum
import types
import uuid
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridstream.errors import CodecError
from gridstream.operations import Operation, OpType
from gridstream.protocol import (
    DefaultRecordEncoder,
    IdKeyCodec,
    JsonCodec,
    MessageFactory,
    OperationEncoder,
    TypeIdKeyCodec,
)


class Color(enum.Enum):
    RED = "red"
    BLUE = 2


class Key(enum.StrEnum):
    A = "a"
    B = "b"


@dataclasses.dataclass
class Point:
    x: int
    y: str


def _general(op: Operation) -> tuple[Any, ...]:
    try:
        message = OperationEncoder().encode(op, None, "topic")
    except CodecError as exc:
        return ("codec error", str(exc))
    return (message.key, message.value, list(message.headers), message.timestamp_ms)


def _fast(op: Operation, encoder: DefaultRecordEncoder | None = None) -> tuple[Any, ...]:
    try:
        key, value, headers = (encoder or DefaultRecordEncoder()).encode(op)
    except CodecError as exc:
        return ("codec error", str(exc))
    return (key, value, headers, op.timestamp_ms)


def _op(data: Any, *, op: Any = OpType.WRITE, entity_id: Any = "e-1", partition: Any = 0,
        txn: str | None = None, removed: tuple[str, ...] = ()) -> Operation:
    return Operation(op, "Thing", entity_id, 42, data, partition, 1_700_000_000_000,
                     txn_id=txn, removed=removed)


CASES: dict[str, Operation] = {
    "plain": _op({"id": "e-1", "n": 1, "f": 1.5, "b": True, "none": None}),
    "no data": _op(None, op=OpType.REMOVE),
    "transaction": _op({"a": 1}, txn="t-9", partition=3),
    "change": _op({"a": 2}, op=OpType.CHANGE, removed=("b", "c")),
    "integer id": _op({"id": 7}, entity_id=7),
    "large partition": _op({}, partition=5000),
    "negative partition": _op({}, partition=-1),
    "bool partition": _op({}, partition=True),
    "op as text": _op({}, op="PARTIAL_UPDATE"),
    "mapping data": _op(types.MappingProxyType({"a": [1, 2]})),
    "ordered data": _op(collections.OrderedDict([("z", 1), ("a", 2)])),
    "rich values": _op({"at": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
                        "day": dt.date(2024, 1, 2), "t": dt.time(1, 2),
                        "money": Decimal("12.50"), "ref": uuid.UUID(int=5),
                        "raw": b"\x00\xff", "tags": {"b", "a"}, "frozen": frozenset({3, 1}),
                        "pair": (1, "x"), "color": Color.BLUE, "point": Point(1, "p"),
                        "mixed set": {1, "a"}}),
    "non-string keys": _op({1: "one", "nested": {2.5: "x", None: 1, True: 0}}),
    "str enum keys": _op({Key.A: 1, "nested": {Key.B: 2}}),
    "nested dict subclass": _op({"d": collections.defaultdict(int, {"k": 1})}),
    "nan": _op({"x": float("nan"), "y": float("inf")}),
    "unicode": _op({"name": "Zoë ✓ 中文", "e": "\u2028"}, entity_id="ïd"),
    "unserializable": _op({"v": object()}),
    "unserializable under a non-string key": _op({1: object()}),
    "huge integer": _op({"v": 2**70}),
    "surrogate": _op({"v": "\ud800"}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_default_path_is_the_general_path(name: str) -> None:
    op = CASES[name]
    assert _fast(op) == _general(op)


def test_errors_are_the_codecs_own() -> None:
    assert _fast(CASES["unserializable"])[0] == "codec error"
    assert "not JSON-serializable" in _fast(CASES["huge integer"])[1]


def test_caches_do_not_leak_between_operations() -> None:
    encoder = DefaultRecordEncoder()
    for op in list(CASES.values()) * 2:
        assert _fast(op, encoder) == _general(op)
    many = [Operation(OpType.UPDATE, f"T{i}", i, i, {"i": i}, i % 7, i) for i in range(5000)]
    for op in many:
        assert _fast(op, encoder) == _general(op)


def test_the_default_path_applies_only_to_the_defaults() -> None:
    assert OperationEncoder().default_path() is not None

    class Factory(MessageFactory):
        pass

    class Codec(JsonCodec):
        pass

    class Key(IdKeyCodec):
        pass

    for encoder in (OperationEncoder(factory=Factory()), OperationEncoder(codec=Codec()),
                    OperationEncoder(key_codec=Key()), OperationEncoder(codec="msgpack"),
                    OperationEncoder(key_codec=TypeIdKeyCodec())):
        assert encoder.default_path() is None
    encoder = OperationEncoder()
    encoder.factory = Factory()
    assert encoder.default_path() is None


scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
           | st.binary(max_size=8) | st.decimals(allow_nan=False, places=3)
           | st.datetimes() | st.dates() | st.uuids() | st.sampled_from(list(Color)))
keys = st.text(max_size=8) | st.integers(-5, 5) | st.sampled_from(list(Key)) | st.booleans()
values = st.recursive(
    scalars,
    lambda inner: (st.lists(inner, max_size=3) | st.tuples(inner, inner)
                   | st.dictionaries(keys, inner, max_size=3)
                   | st.frozensets(st.integers(-3, 3) | st.text(max_size=3), max_size=3)),
    max_leaves=12,
)


@st.composite
def operations(draw: st.DrawFn) -> Operation:
    data: Any = draw(st.none() | st.dictionaries(keys, values, max_size=6))
    if data is not None and draw(st.booleans()):
        data = types.MappingProxyType(data)
    return Operation(
        op=draw(st.sampled_from(list(OpType)) | st.sampled_from([o.value for o in OpType])),
        type_name=draw(st.text(min_size=1, max_size=10)),
        id=draw(st.text(max_size=10) | st.integers(-(2**63), 2**63)),
        version=draw(st.integers(0, 2**63 - 1)),
        data=data,
        partition=draw(st.integers(-3, 1100)),
        timestamp_ms=draw(st.integers(0, 2**42)),
        txn_id=draw(st.none() | st.text(max_size=8)),
        removed=tuple(draw(st.lists(st.text(max_size=5), max_size=3))),
    )


def _outcome(encode: Any, op: Operation) -> tuple[Any, ...]:
    try:
        return encode(op)
    except Exception as exc:  # e.g. an id with a lone surrogate cannot be a UTF-8 key
        return ("error", type(exc).__name__, str(exc))


@settings(max_examples=600, deadline=None)
@given(op=operations())
def test_generated_operations_encode_identically(op: Operation) -> None:
    assert _outcome(_fast, op) == _outcome(_general, op)


@settings(max_examples=200, deadline=None)
@given(op=operations())
def test_generated_records_decode_to_their_operation(op: Operation) -> None:
    try:
        _, value, _ = DefaultRecordEncoder().encode(op)
    except (CodecError, UnicodeEncodeError):
        return
    envelope = JsonCodec().decode(value, {})
    assert (envelope.op, envelope.type, envelope.id, envelope.version, envelope.ts,
            envelope.partition, envelope.txn, envelope.removed) == (
        op.op, op.type_name, op.id, op.version, op.timestamp_ms, op.partition, op.txn_id,
        op.removed)
