"""The sink's decode: key policies, converter errors, cache names, filter, Arrow rows."""

from __future__ import annotations

import datetime as dt

import orjson
import pyarrow as pa
import pytest

from gridstream.connect.config import ConverterConfig, KeyPolicy, TransformConfig
from gridstream.connect.sink.decode import (
    BAD,
    FILTERED,
    OK,
    Decoded,
    Decoder,
    DecodeSpec,
    _decode_batch,
)


def decoder(policy: KeyPolicy = KeyPolicy.KEY, **extra: object) -> Decoder:
    return Decoder(DecodeSpec(connector="c", converter=ConverterConfig(), key_policy=policy,
                              cache_prefix="p-", **extra))  # type: ignore[arg-type]


def j(value: object) -> bytes:
    return orjson.dumps(value)


def test_key_policy_key_keeps_strings_and_integers_apart() -> None:
    d = decoder()
    assert d.decode("t", 0, 1, j("1"), j({"a": 1})) == Decoded(OK, "p-t", '"1"', '{"a":1}')
    assert d.decode("t", 0, 2, j(1), j({"a": 1})) == Decoded(OK, "p-t", "1", '{"a":1}')
    assert d.decode("t", 0, 3, j(1), None) == Decoded(OK, "p-t", "1", None)  # a tombstone


@pytest.mark.parametrize(("key", "value", "stage"), [
    (None, j({"a": 1}), "key"),
    (b"\xff", j({"a": 1}), "key"),
    (j(1.5), j({"a": 1}), "key"),
    (j(True), j({"a": 1}), "key"),
    (j(""), j({"a": 1}), "key"),
    (j(2**63), j({"a": 1}), "key"),
    (j("k"), b"not json", "value"),
    (j("k"), j([1, 2]), "value"),
    (j("k"), j("text"), "value"),
])
def test_bad_records_say_where_they_failed(key: bytes | None, value: bytes,
                                           stage: str) -> None:
    out = decoder().decode("t", 2, 9, key, value)
    assert out.status == BAD and out.stage == stage and out.reason
    assert out.cache is None and out.key is None and out.value is None


def test_key_policy_value_one_field_or_several() -> None:
    one = decoder(KeyPolicy.VALUE, key_fields=("id",))
    assert one.decode("t", 0, 0, None, j({"id": 7, "x": 1})).key == "7"
    several = decoder(KeyPolicy.VALUE, key_fields=("a", "b"))
    out = several.decode("t", 0, 0, None, j({"a": "x", "b": 2}))
    assert out.status == OK and orjson.loads(out.key or "") == '["x",2]'
    for value, why in ((j({"a": "x"}), "'b' is missing"),
                       (j({"a": "x", "b": 1.5}), "'b' holds float"), (None, "tombstone"),
                       (j({"a": "x", "b": True}), "'b' holds bool")):
        bad = several.decode("t", 0, 0, None, value)
        assert bad.status == BAD and bad.stage == "key" and why in (bad.reason or "")


def test_key_policy_kafka_names_the_record() -> None:
    out = decoder(KeyPolicy.KAFKA).decode("orders", 3, 42, b"ignored", j({"a": 1}))
    assert out == Decoded(OK, "p-orders", '"orders/3/42"', '{"a":1}')


def test_the_space_refuses_a_value_whose_id_is_another_key() -> None:
    d = decoder(id_property="id")
    assert d.decode("t", 0, 0, j("a"), j({"id": "a"})).status == OK
    assert d.decode("t", 0, 0, j("a"), j({"x": 1})).status == OK
    for other in ("b", 1):
        out = d.decode("t", 0, 0, j("a"), j({"id": other}))
        assert out.status == BAD and out.stage == "key"
    assert decoder(id_property="id").decode("t", 0, 0, j(1), j({"id": "1"})).status == BAD


def test_reserved_cache_names_are_bad_records() -> None:
    for prefix in ("__", "gridstream.grid."):
        out = Decoder(DecodeSpec("c", ConverterConfig(), KeyPolicy.KEY,
                                 cache_prefix=prefix)).decode("applied" if prefix != "__"
                                                              else "x", 0, 0, j(1), j({}))
        assert out.status == BAD and out.stage == "cache"


def test_cache_filter_leaves_out_entries_never_removals() -> None:
    d = decoder(cache_filter="tests.unit.connect.sink_filters:even",
                allowed_modules=("tests.unit.connect",))
    assert d.decode("t", 0, 0, j(1), j({"n": 2})).status == OK
    assert d.decode("t", 0, 1, j(1), j({"n": 3})) == Decoded(FILTERED, "p-t")
    assert d.decode("t", 0, 2, j(1), None).status == OK
    broken = decoder(cache_filter="tests.unit.connect.sink_filters:broken",
                     allowed_modules=("tests.unit.connect",))
    out = broken.decode("t", 0, 0, j(1), j({"n": 2}))
    assert out.status == BAD and out.stage == "filter" and "ValueError" in (out.reason or "")


def test_an_arrow_batch_keeps_the_original_bytes_of_bad_records_only() -> None:
    headers_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    stamp = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    batch = pa.RecordBatch.from_pydict({
        "key": pa.array([j("a"), b"\xff", j("c")], pa.binary()),
        "value": pa.array([j({"n": 1}), j({"n": 2}), None], pa.binary()),
        "topic": pa.array(["t", "t", "u"]),
        "partition": pa.array([0, 1, 2], pa.int32()),
        "offset": pa.array([5, 6, 7], pa.int64()),
        "timestamp": pa.array([stamp] * 3, pa.timestamp("us", tz="UTC")),
        "timestampType": pa.array([0, 0, 0], pa.int32()),
        "headers": pa.array([None, [{"key": "h", "value": b"v"}], []], headers_type),
    })
    out = _decode_batch(decoder(with_headers=True), batch).to_pydict()
    assert out["status"] == [OK, BAD, OK]
    assert out["cache"] == ["p-t", None, "p-u"]
    assert out["key"] == ['"a"', None, '"c"']
    assert out["value"] == ['{"n":1}', None, None]
    assert out["stage"] == [None, "key", None]
    assert out["raw_key"] == [None, b"\xff", None]
    assert out["raw_value"] == [None, j({"n": 2}), None]
    assert out["headers"] == [None, [{"key": "h", "value": b"v"}], None]
    assert out["topic"] == ["t", "t", "u"] and out["offset"] == [5, 6, 7]


def test_transforms_route_the_cache_change_the_key_or_make_a_record_bad() -> None:
    steps = (TransformConfig.model_validate({"type": "route", "regex": "orders-(.*)",
                                             "replacement": "o-$1"}),
             TransformConfig.model_validate({"type": "value_to_key", "fields": ["sku"]}),
             TransformConfig.model_validate({"type": "mask", "fields": ["card"]}))
    d = decoder(transforms=steps)
    out = d.decode("orders-eu", 0, 0, j(1), j({"sku": "A-1", "card": "1234"}))
    assert out == Decoded(OK, "p-o-eu", '"A-1"', '{"sku":"A-1","card":""}')
    assert d.decode("other", 0, 0, j(1), j({"sku": 5})).cache == "p-other"
    bad = d.decode("orders-eu", 0, 0, j(1), j({"sku": "A-1", "card": {"n": 1}}))
    assert bad.status == BAD and bad.stage == "transform" and bad.reason
