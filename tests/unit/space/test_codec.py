"""The log record codec: values and whole framed bulks round-trip exactly."""

from __future__ import annotations

import datetime as dt
import math
import os
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridstream.errors import CodecError
from gridstream.operations import Bulk, Operation, OpType
from gridstream.space._codec import (
    decode_bulk,
    decode_value,
    encode_bulk,
    encode_data,
    encode_value,
    prep_value,
)
from gridstream.space._frames import HEADER_SIZE, encode_frame, scan_frames, verify

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False), st.text(), st.binary(),
    st.datetimes(), st.datetimes(timezones=st.timezones()), st.dates(), st.times(),
    st.times(timezones=st.timezones()),
    st.decimals(allow_nan=False), st.uuids(),
)
hashables = st.one_of(st.integers(-1000, 1000), st.text(max_size=5), st.uuids(), st.dates())
values = st.recursive(
    st.one_of(scalars, st.sets(hashables, max_size=4), st.frozensets(hashables, max_size=4)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers(-(2**63), 2**63)), inner,
                        max_size=4),
    ),
    max_leaves=12,
)
data_maps = st.dictionaries(st.text(max_size=10), values, max_size=6)
ids = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=20))


@st.composite
def bulks(draw: st.DrawFn) -> Bulk:
    first = draw(st.integers(1, 2**62))
    txn = draw(st.one_of(st.none(), st.text(max_size=32)))
    ops = []
    for i in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(list(OpType)))
        data = draw(data_maps)
        removed = tuple(draw(st.lists(st.text(max_size=6), max_size=3)))
        routing = draw(st.one_of(st.none(), st.text(max_size=6), st.integers(-(2**63), 2**63),
                                 st.uuids()))
        ops.append(Operation(op, draw(st.text(max_size=12)), draw(ids), first + i, data,
                             draw(st.integers(0, 63)), draw(st.integers(0, 2**62)), txn,
                             removed, routing))
    return Bulk(first, tuple(ops), txn, draw(st.integers(0, 2**62)))


def _encode(bulk: Bulk) -> bytes:
    records = [(o.op.value, o.type_name, o.id, msgspec.Raw(encode_data(o.data or {})),
                o.partition, o.timestamp_ms, o.removed, prep_value(o.routing))
               for o in bulk.operations]
    return encode_bulk(bulk.txn_id, bulk.timestamp_ms, records)


@settings(max_examples=60, deadline=None)
@given(data_maps)
def test_values_round_trip(data: dict[str, Any]) -> None:
    assert decode_value(encode_data(data)) == data
    assert _types(decode_value(encode_data(data))) == _types(data)


def _types(value: Any) -> Any:
    """The value's shape with types, so that 1 == 1.0 == True cannot hide a change."""
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_types(v) for v in value])
    if isinstance(value, set | frozenset):
        return (type(value).__name__, sorted(map(repr, value)))
    return (type(value).__name__, value)


@settings(max_examples=60, deadline=None)
@given(bulks(), st.integers(0, 2**40))
def test_framed_bulks_round_trip(bulk: Bulk, part_offset: int) -> None:
    frame = encode_frame(_encode(bulk), bulk.first_seq, part_offset, len(bulk.operations))
    fields = verify(frame)
    assert fields is not None and fields[2:] == (bulk.first_seq, part_offset,
                                                 len(bulk.operations))
    assert decode_bulk(bulk.first_seq, frame[HEADER_SIZE:]) == bulk


@settings(max_examples=25, deadline=None)
@given(st.lists(bulks(), min_size=1, max_size=5), st.integers(1, 40))
def test_a_scan_finds_every_record_and_stops_at_a_cut(
    tmp_path_factory: pytest.TempPathFactory, items: list[Bulk], cut: int
) -> None:
    path = Path(tmp_path_factory.mktemp("frames")) / "seg"
    frames = [encode_frame(_encode(b), b.first_seq, i, len(b.operations))
              for i, b in enumerate(items)]
    blob = b"".join(frames)
    path.write_bytes(blob[: len(blob) - cut])
    fd = os.open(path, os.O_RDONLY)
    try:
        result = scan_frames(fd, 0, len(blob) - cut)
    finally:
        os.close(fd)
    assert [f.first_seq for f in result.frames] == [b.first_seq for b in items[:-1]]
    assert result.stop is not None and result.stop.torn
    assert result.end == sum(len(f) for f in frames[:-1])


def test_every_flipped_bit_is_detected() -> None:
    frame = encode_frame(encode_data({"a": 1, "b": "text"}), 7, 3, 1)
    for i in range(8, len(frame)):
        damaged = bytearray(frame)
        damaged[i] ^= 0x10
        assert verify(bytes(damaged)) is None


def test_special_values() -> None:
    nan = decode_value(encode_value({"f": float("nan"), "d": Decimal("NaN")}))
    assert math.isnan(nan["f"]) and nan["d"].is_nan()
    aware = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert decode_value(encode_value(aware)).utcoffset() == dt.timedelta(hours=2)
    assert decode_value(encode_value((1, [2, (3,)]))) == (1, [2, (3,)])
    assert decode_value(encode_value(uuid.UUID(int=5))) == uuid.UUID(int=5)


def test_unsupported_values_name_their_path() -> None:
    with pytest.raises(CodecError, match=r"a\.b\[1\]"):
        encode_data({"a": {"b": [1, object()]}})
    with pytest.raises(CodecError, match="x"):
        encode_data({"x": 2**65})
    with pytest.raises(CodecError):
        decode_value(msgspec.msgpack.encode(msgspec.msgpack.Ext(99, b"")))


def test_decoded_operations_equal_constructed_ones() -> None:
    data = {"a": 1}
    record = ("CHANGE", "T", 5, msgspec.Raw(encode_data(data)), 2, 99, ("x",), "r")
    bulk = decode_bulk(10, encode_bulk("t1", 100, [record]))
    expected = Operation(OpType.CHANGE, "T", 5, 10, data, 2, 99, "t1", ("x",), "r")
    assert bulk.operations == (expected,)
    assert repr(bulk.operations[0]) == repr(expected)
    assert bulk == Bulk(10, (expected,), "t1", 100) and repr(bulk) == repr(
        Bulk(10, (expected,), "t1", 100))
