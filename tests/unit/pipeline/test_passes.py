"""The fused Python pass on Arrow batches (no Spark): steps fused per row, hidden
columns carried, failing rows become error rows or raise ``RecordError``."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest

from gridstream.errors import CodecError, GridError, KafkaClientError, RecordError, RegistryError
from gridstream.pipeline.base import HIDDEN
from gridstream.pipeline.passes import BatchPass, ItemPass, to_row

TS = pa.timestamp("us", tz="UTC")
OUT = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("_gs_ts", TS),
                 ("_gs_where", pa.string()), ("_gs_error", pa.string()),
                 ("_gs_stage", pa.string()), ("_gs_raw_key", pa.binary()),
                 ("_gs_raw_value", pa.binary())])


def _batch(values: list[str | None], errors: list[str | None] | None = None) -> pa.RecordBatch:
    n = len(values)
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return pa.RecordBatch.from_pydict({
        "key": [f"k{i}" for i in range(n)], "value": values,
        "_gs_ts": pa.array([base + dt.timedelta(seconds=i) for i in range(n)], TS),
        "_gs_where": [f"t[0]@{i}" for i in range(n)],
        "_gs_error": pa.array(errors or [None] * n, pa.string()),
        "_gs_stage": pa.array([("decode" if e else None) for e in (errors or [None] * n)],
                              pa.string()),
        "_gs_raw_key": [f"k{i}".encode() for i in range(n)],
        "_gs_raw_value": [(v or "").encode() for v in values]})


def _encode(item: Any) -> list[Any]:
    key, value = item
    return [key.encode(), str(value).encode()]


def _pass(steps: list[tuple[str, Any, str]], errors: str = "log") -> ItemPass:
    return ItemPass(pipeline="p", errors=errors, shape="entry", decode=None, steps=steps,
                    tail=_encode, tail_stage="encode", schema=OUT)


def test_steps_are_fused_per_row_and_hidden_columns_follow_each_output() -> None:
    fused = _pass([("map", lambda kv: (kv[0], int(kv[1])), "map#1"),
                   ("filter", lambda kv: kv[1] % 2 == 0, "filter#2"),
                   ("flat_map", lambda kv: [kv, (kv[0], kv[1] + 1)], "flat_map#3")])
    out = fused.batch(_batch(["0", "1", "2"]))
    assert out.schema == OUT
    assert out.column("value").to_pylist() == [b"0", b"1", b"2", b"3"]
    assert out.column("_gs_where").to_pylist() == ["t[0]@0", "t[0]@0", "t[0]@2", "t[0]@2"]
    assert out.column("_gs_error").to_pylist() == [None] * 4
    assert out.column("_gs_raw_value").to_pylist() == [b"0", b"0", b"2", b"2"]


def test_a_failing_row_becomes_an_error_row_naming_the_stage() -> None:
    fused = _pass([("map", lambda kv: (kv[0], int(kv[1])), "map#1")])
    out = fused.batch(_batch(["1", "x", "3"]))
    assert out.column("value").to_pylist() == [b"1", None, b"3"]
    assert out.column("_gs_stage").to_pylist() == [None, "map#1", None]
    error = out.column("_gs_error").to_pylist()[1]
    assert error is not None and error.startswith("ValueError: invalid literal")


def test_an_encode_failure_drops_the_rows_other_outputs() -> None:
    def encode(item: Any) -> list[Any]:
        if item[1] == "boom":
            raise ValueError("cannot encode")
        return _encode(item)

    fused = ItemPass(pipeline="p", errors="log", shape="entry", decode=None,
                     steps=[("flat_map", lambda kv: [kv, (kv[0], "boom")], "flat_map#1")],
                     tail=encode, tail_stage="encode", schema=OUT)
    out = fused.batch(_batch(["a"]))
    assert out.num_rows == 1
    assert out.column("_gs_stage").to_pylist() == ["encode"]


def test_fail_raises_a_record_error_with_where_and_stage() -> None:
    fused = _pass([("map", lambda kv: (kv[0], int(kv[1])), "map#1")], errors="fail")
    with pytest.raises(RecordError) as caught:
        fused.batch(_batch(["1", "x"]))
    assert caught.value.where == "t[0]@1" and caught.value.stage == "map#1"
    assert isinstance(caught.value.__cause__, ValueError)


def test_an_incoming_error_row_is_kept_with_its_stage() -> None:
    fused = _pass([("map", lambda kv: kv, "map#1")])
    out = fused.batch(_batch(["1", "2"], errors=[None, "not UTF-8"]))
    assert out.column("_gs_error").to_pylist() == [None, "not UTF-8"]
    assert out.column("_gs_stage").to_pylist() == [None, "decode"]


def test_a_value_that_does_not_fit_the_schema_is_an_error_row() -> None:
    schema = pa.schema([("n", pa.int64()), *[OUT.field(h) for h in HIDDEN]])
    fused = ItemPass(pipeline="p", errors="log", shape="value", decode=None,
                     steps=[("map", lambda v: {"n": v}, "map#1")], tail=to_row(("n",)),
                     tail_stage="map#1", schema=schema)
    out = fused.batch(_batch(["not a number"]))
    assert out.column("n").to_pylist() == [None]
    assert out.column("_gs_stage").to_pylist() == ["map#1"]


def test_map_batch_sees_only_the_good_rows() -> None:
    seen: list[int] = []

    def fn(batch: pa.RecordBatch) -> pa.RecordBatch:
        seen.append(batch.num_rows)
        assert batch.schema.names == ["key", "value"]
        return batch

    schema = pa.schema([("key", pa.string()), ("value", pa.string()),
                        *[OUT.field(h) for h in HIDDEN]])
    step = BatchPass(pipeline="p", errors="log", fn=fn, kind="arrow", stage="map_batch#1",
                     schema=schema)
    out = step.batch(_batch(["a", "b", "c"], errors=[None, "bad", None]))
    assert seen == [2]
    assert sorted(out.column("_gs_where").to_pylist()) == ["t[0]@0", "t[0]@1", "t[0]@2"]
    assert out.column("_gs_error").to_pylist().count("bad") == 1


@pytest.mark.parametrize("error", [RegistryError("registry unreachable"),
                                   GridError("grid down"),
                                   KafkaClientError("broker down")])
@pytest.mark.parametrize("policy", ["log", "dead_letter"])
def test_a_service_failure_in_a_step_stops_the_pass_instead_of_blaming_the_row(
        error: Exception, policy: str) -> None:
    def step(kv: Any) -> Any:
        raise error

    fused = _pass([("map", step, "map#1")], errors=policy)
    with pytest.raises(type(error)):
        fused.batch(_batch(["1"]))


@pytest.mark.parametrize("error", [RegistryError("registry unreachable"),
                                   GridError("grid down"),
                                   KafkaClientError("broker down")])
def test_a_service_failure_in_map_batch_stops_the_pass(error: Exception) -> None:
    def fn(rows: pa.RecordBatch) -> pa.RecordBatch:
        raise error

    schema = pa.schema([("key", pa.string()), ("value", pa.string()),
                        *[f for f in OUT if f.name in HIDDEN]])
    step = BatchPass(pipeline="p", errors="dead_letter", fn=fn, kind="arrow",
                     stage="map_batch#1", schema=schema)
    with pytest.raises(type(error)):
        step.batch(_batch(["1"]))


_STRUCTURED = pa.schema([("n", pa.int64()), ("s", pa.string()), ("b", pa.binary()),
                         ("st", pa.struct([("a", pa.int64())])),
                         *[f for f in OUT if f.name in HIDDEN]])
_GOOD = {"n": 1, "s": "x", "b": b"y", "st": {"a": 1}}


def _structured(items: list[dict[str, Any]], errors: str = "log") -> pa.RecordBatch:
    fused = ItemPass(pipeline="p", errors=errors, shape="entry", decode=None,
                     steps=[("map", lambda kv: items[int(kv[1])], "map#1")],
                     tail=to_row(["n", "s", "b", "st"]), tail_stage="map#1",
                     schema=_STRUCTURED)
    return fused.batch(_batch([str(i) for i in range(len(items))]))


@pytest.mark.parametrize(("bad", "why"), [
    ({"n": 1.7}, "column 'n' (int64): float 1.7 is not an integer"),
    ({"n": 2.0}, "column 'n' (int64): float 2.0 is not an integer"),
    ({"s": b"x"}, "column 's' (string): bytes is not text"),
    ({"b": "y"}, "column 'b' (binary): str is not bytes"),
    ({"st": {"a": 1, "extra": 2}}, "column 'st' (struct<a: int64>): field 'extra' is not in"),
    ({"st": {"a": 1.5}}, "column 'st' (struct<a: int64>): field 'a': float 1.5"),
])
def test_a_value_that_does_not_fit_the_schema_exactly_is_an_error_row(
        bad: dict[str, Any], why: str) -> None:
    out = _structured([_GOOD, {**_GOOD, **bad}, _GOOD])
    assert out.column("_gs_error")[0].as_py() is None
    assert out.column("_gs_error")[2].as_py() is None
    assert why in out.column("_gs_error")[1].as_py()
    assert out.column("n").to_pylist() == [1, None, 1]
    with pytest.raises(RecordError, match="column"):
        _structured([_GOOD, {**_GOOD, **bad}], errors="fail")


def test_a_well_typed_structured_batch_converts_as_it_is() -> None:
    out = _structured([_GOOD, {"n": None, "s": None, "b": None, "st": None}])
    assert out.column("_gs_error").to_pylist() == [None, None]
    assert out.column("st").to_pylist() == [{"a": 1}, None]


def test_an_item_with_a_key_the_schema_lacks_is_an_error_row_naming_the_key() -> None:
    out = _structured([_GOOD, {**_GOOD, "typo": 3}])
    assert out.column("_gs_error")[0].as_py() is None
    assert "'typo'" in out.column("_gs_error")[1].as_py()
    assert out.column("_gs_stage")[1].as_py() == "map#1"
    with pytest.raises(CodecError, match="'typo'"):
        to_row(["n"])({"n": 1, "typo": 2})


@pytest.mark.parametrize("result", ["ab", b"ab", {"a": 1, "b": 2}])
def test_a_flat_map_returning_text_bytes_or_a_dict_is_an_error_row_not_iterated(
        result: Any) -> None:
    fused = _pass([("flat_map", lambda kv: result, "flat_map#1")])
    out = fused.batch(_batch(["1"]))
    assert out.num_rows == 1
    assert out.column("_gs_stage").to_pylist() == ["flat_map#1"]
    assert out.column("_gs_error")[0].as_py().startswith(
        f"CodecError: flat_map must return an iterable of items (a list, a tuple, a "
        f"generator...), not a {type(result).__name__}")


def test_a_registry_failure_while_decoding_stops_the_pass() -> None:
    def decode(row: dict[str, Any]) -> Any:
        raise RegistryError("schema registry http://registry: unreachable")

    fused = ItemPass(pipeline="p", errors="dead_letter", shape="entry", decode=decode,
                     steps=[], tail=_encode, tail_stage="encode", schema=OUT)
    with pytest.raises(RegistryError, match="unreachable"):
        fused.batch(_batch(["1"]))


def test_a_chain_of_maps_and_filters_gives_what_the_general_loop_gives() -> None:
    """The rows of a map/filter chain run without per-step item lists (``one_to_one``):
    the same output batch as the general loop, error rows, stages and drops included."""
    steps = [("map", lambda kv: (kv[0], int(kv[1])), "map#1"),
             ("filter", lambda kv: kv[1] % 3 != 0, "filter#2"),
             ("map", lambda kv: (kv[0], 10 // (kv[1] - 4)), "map#3")]
    batch = _batch(["1", "x", "3", "4", "5", None, "7"],
                   errors=[None, None, None, None, None, "bad bytes", None])
    fast = _pass(steps)
    general = _pass(steps)
    general.one_to_one = False
    assert fast.one_to_one and not _pass([("flat_map", lambda kv: [kv], "f#1")]).one_to_one
    out = fast.batch(batch)
    assert out.equals(general.batch(batch))
    assert out.column("_gs_stage").to_pylist() == [None, "map#1", "map#3", None, "decode",
                                                   None]  # "3" filtered out
    assert out.column("value").to_pylist() == [b"-4", None, None, b"10", None, b"3"]
    with pytest.raises(RecordError, match="map#1"):
        _pass(steps, errors="fail").batch(batch)


def test_a_kafka_sink_subclass_that_changes_encode_keeps_it_as_the_tail() -> None:
    from gridstream.pipeline import KafkaSinks
    from gridstream.pipeline.kafka import KafkaSink

    props = {"bootstrap.servers": "127.0.0.1:9092", "key.serializer": "StringSerializer",
             "value.serializer": "StringSerializer"}
    sink = KafkaSinks.kafka(props, "out")
    encoder = sink.row_encoder()
    assert encoder is not None and encoder(("k", "v")) == [b"k", b"v"]

    class Tagged(KafkaSink):
        def encode(self, item: Any) -> dict[str, Any]:
            return {"key": b"tag", "value": super().encode(item)["value"]}

    assert Tagged(props, "out").row_encoder() is None


def test_the_kafka_sinks_tails_ship_none_of_the_sink() -> None:
    """The pass's tail (split, row encode, column encode) is pickled into every task: it
    carries the serializers and the item's key and value functions, not the sink (its
    client settings, a secret among them, stay in the driver; a worker imports none of
    the Kafka client modules). A subclass that changes ``split`` or ``encode_row`` keeps
    its own."""
    from pyspark import cloudpickle

    from gridstream.pipeline import KafkaSinks
    from gridstream.pipeline.kafka import KafkaSink

    props = {"bootstrap.servers": "127.0.0.1:9092", "key.serializer": "StringSerializer",
             "value.serializer": "StringSerializer", "security.protocol": "SASL_PLAINTEXT",
             "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "s3cret-pw"}
    for sink in (KafkaSinks.kafka(props, "out"),
                 KafkaSinks.kafka(props, "out", key_fn=str.upper, value_fn=str.lower)):
        row, halves = sink.row_encoder(), sink.column_encoder()
        assert row is not None and halves is not None
        for tail in (row, *halves):
            shipped = cloudpickle.dumps(tail)
            assert b"s3cret-pw" not in shipped and b"gridstream.pipeline.kafka" not in shipped
        row, (split, encode) = (cloudpickle.loads(cloudpickle.dumps(t))
                                for t in (row, halves))
        expected = ("KK", "kk") if sink.key_fn else ("Kk", "v")
        item = "Kk" if sink.key_fn else ("Kk", "v")
        assert tuple(split(item)) == expected
        assert row(item) == [expected[0].encode(), expected[1].encode()]
        arrays, failed = encode([[expected[0]], [expected[1]]])
        assert [a.to_pylist() for a in arrays] == [[expected[0].encode()],
                                                   [expected[1].encode()]] and not failed

    class Split(KafkaSink):
        def split(self, item: Any) -> Any:
            return ("s", item)

    class Rows(KafkaSink):
        def encode_row(self, item: Any) -> list[Any]:
            return [b"tag", *super().encode_row(item)[1:]]

    for kind, expected_row in ((Split, [b"s", b"x"]), (Rows, [b"tag", b"x"])):
        sink = kind(props, "out")
        row = sink.row_encoder()
        assert row is not None and row("x") == expected_row, kind
    halves = Split(props, "out").column_encoder()
    assert halves is not None and halves[0]("x") == ("s", "x")
    later = KafkaSinks.kafka(props, "out")
    later.key_fn = str.upper  # set after the sink was made: the tails still take it
    row, halves = later.row_encoder(), later.column_encoder()
    assert row is not None and halves is not None
    assert row("ab") == [b"AB", b"ab"] and tuple(halves[0]("ab")) == ("AB", "ab")


@pytest.mark.parametrize("one_to_one", [True, False])
def test_a_tail_row_of_another_width_is_a_bug_not_an_error_row(one_to_one: bool) -> None:
    """The pass checks the rows' width once per batch (when it turns rows into
    columns): a tail giving three values for two columns stops the pass."""
    fused = ItemPass(pipeline="p", errors="log", shape="entry", decode=None,
                     steps=[("map", lambda kv: kv, "map#1")],
                     tail=lambda kv: [b"k", b"v", b"extra"], tail_stage="encode", schema=OUT)
    fused.one_to_one = one_to_one
    with pytest.raises(ValueError, match="3 values for 2 columns"):
        fused.batch(_batch(["1", "2"]))
    uneven = iter([[b"k", b"v"], [b"k"]])
    fused.tail = lambda kv: next(uneven)
    with pytest.raises(ValueError):
        fused.batch(_batch(["1", "2"]))


def test_the_garbage_collector_is_paused_for_a_batch_and_on_again_after() -> None:
    """A batch's rows are built with the cyclic collector off (it rescanned them at every
    young collection: half the pass's time) and it is on again afterwards, also when the
    batch raises; a collector the caller turned off stays off."""
    import gc

    seen: list[bool] = []

    def look(kv: Any) -> Any:
        seen.append(gc.isenabled())
        return kv

    assert gc.isenabled()
    _pass([("map", look, "map#1")]).batch(_batch(["1"]))
    assert seen == [False] and gc.isenabled()
    with pytest.raises(RecordError):
        _pass([("map", lambda kv: int("x"), "map#1")], errors="fail").batch(_batch(["1"]))
    assert gc.isenabled()
    batch_pass = BatchPass(pipeline="p", errors="log", fn=lambda b: (seen.append(
        gc.isenabled()), b)[1], kind="arrow", stage="map_batch#1", schema=OUT)
    batch_pass.batch(_batch(["1"]))
    assert seen[-1] is False and gc.isenabled()
    gc.disable()
    try:
        _pass([("map", look, "map#1")]).batch(_batch(["1"]))
        assert not gc.isenabled()
    finally:
        gc.enable()


def _raw_batch(keys: list[bytes | None], values: list[bytes | None]) -> pa.RecordBatch:
    """A source's batch for a pass that decodes (``Flow.for_pass``): binary key and
    value, no error yet."""
    n = len(values)
    return pa.RecordBatch.from_pydict({
        "key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
        "_gs_ts": pa.nulls(n, TS), "_gs_where": [f"t[0]@{i}" for i in range(n)],
        "_gs_error": pa.nulls(n, pa.string()), "_gs_stage": pa.nulls(n, pa.string()),
        "_gs_raw_key": pa.array(keys, pa.binary()),
        "_gs_raw_value": pa.array(values, pa.binary())})


def test_a_pass_head_decodes_strings_at_once_and_names_the_rows_that_do_not_decode(
        ) -> None:
    """String and ByteArray decoded by the pass itself (``ArrowDecode``): the same items
    as the JVM's decode gives, a row whose bytes are not UTF-8 an error row naming the
    side (the key's before the value's), its raw bytes kept for a dead letter."""
    from gridstream.pipeline.serde import ArrowDecode, deserializer

    seen: list[Any] = []
    head = ArrowDecode(deserializer({"key.deserializer": "String"}, is_key=True),
                       deserializer({"value.deserializer": "String"}, is_key=False))
    fused = ItemPass(pipeline="p", errors="log", shape="entry", decode=None, head=head,
                     steps=[("map", lambda kv: (seen.append(kv), kv)[1], "map#1")],
                     tail=lambda kv: [kv[0].encode(), kv[1].upper().encode()],
                     tail_stage="encode", schema=OUT)
    clean = fused.batch(_raw_batch([b"a", b"b"], ["é".encode(), b"x"]))
    assert seen == [("a", "é"), ("b", "x")]
    assert clean.column("value").to_pylist() == ["É".encode(), b"X"]
    assert clean.column("_gs_error").null_count == 2
    seen.clear()
    out = fused.batch(_raw_batch([b"a", b"\xff", b"c", b"d"], [b"1", b"\xfe", b"\xfe", b"4"]))
    assert seen == [("a", "1"), ("d", "4")]
    assert out.column("_gs_error").to_pylist() == [
        None, "key is not valid UTF-8 (String)", "value is not valid UTF-8 (String)", None]
    assert out.column("_gs_stage").to_pylist() == [
        None, "key.deserializer", "value.deserializer", None]
    assert out.column("_gs_raw_value").to_pylist() == [b"1", b"\xfe", b"\xfe", b"4"]
    assert out.column("key").to_pylist() == [b"a", None, None, b"d"]
    with pytest.raises(RecordError, match="key is not valid UTF-8"):
        ItemPass(pipeline="p", errors="fail", shape="entry", decode=None, head=head,
                 steps=[], tail=lambda kv: [None, None], tail_stage="encode",
                 schema=OUT).batch(_raw_batch([b"\xff"], [b"v"]))
    raw = ArrowDecode(deserializer({"key.deserializer": "ByteArray"}, is_key=True),
                      deserializer({"value.deserializer": "String"}, is_key=False))
    assert raw(_raw_batch([b"\xff", None], [b"v", None])) == (
        {"key": [b"\xff", None], "value": ["v", None]}, {})
    with pytest.raises(ValueError, match="vectorized"):
        ArrowDecode(deserializer({"key.deserializer": "Json"}, is_key=True),
                    deserializer({"value.deserializer": "String"}, is_key=False))


def test_a_pass_without_the_hidden_columns_that_are_null_by_construction() -> None:
    """The sink's pass of a source that cannot fail a row: no error columns, event time
    or raw bytes cross into Python, and its output has no event time or raw bytes (they
    are null literals after the pass); an error row still gets its reason and stage."""
    full = _raw_batch([b"a", b"b"], [b"1", b"x"])
    lean = full.select(["key", "value", "_gs_where"])
    out_schema = pa.schema([f for f in OUT if f.name not in
                            ("_gs_ts", "_gs_raw_key", "_gs_raw_value")])
    fused = ItemPass(pipeline="p", errors="log", shape="entry", decode=None,
                     steps=[("map", lambda kv: (kv[0], int(kv[1])), "map#1")],
                     tail=lambda kv: [kv[0], str(kv[1]).encode()], tail_stage="encode",
                     schema=out_schema)
    out = fused.batch(lean)
    assert out.schema == out_schema
    assert out.column("value").to_pylist() == [b"1", None]
    assert out.column("_gs_error").to_pylist() == [
        None, "ValueError: invalid literal for int() with base 10: b'x'"]
    assert out.column("_gs_stage").to_pylist() == [None, "map#1"]
    assert out.column("_gs_where").to_pylist() == ["t[0]@0", "t[0]@1"]
    with_raw = pa.schema([*out_schema, pa.field("_gs_raw_key", pa.binary())])
    fused.target = type(fused.target)(with_raw, tuple(with_raw.names))
    with pytest.raises(KeyError, match="_gs_raw_key"):  # a compiler bug, never nulls
        fused.batch(lean)


def _kafka_sink(key: str = "String", value: str = "String") -> Any:
    from gridstream.pipeline import KafkaSinks

    return KafkaSinks.kafka({"bootstrap.servers": "127.0.0.1:9092", "key.serializer": key,
                             "value.serializer": value}, "out")


@pytest.mark.parametrize("errors", ["log", "dead_letter"])
@pytest.mark.parametrize(("serializers", "values", "failing"), [
    (("String", "String"), ["a", None, 7, b"bytes", "\ud800", "é", "z"], 3),
    (("String", "String"), ["a", None, "\ud800", "é"], 1),  # Arrow's conversion refuses
    (("String", "String"), ["a", None, "é", "z"], 0),  # every row at once
    (("ByteArray", "ByteArray"), [b"a", None, bytearray(b"ba"), "text", 7, b"\xff"], 2),
    (("ByteArray", "String"), [b"a", "a", None, b"b"], 2),
])
def test_a_kafka_sinks_columns_encoded_at_once_give_what_row_by_row_encoding_gives(
        errors: str, serializers: tuple[str, str], values: list[Any], failing: int) -> None:
    """String and ByteArray encode a batch's columns at once (``column_encoder``): the
    same bytes, and the same error rows (reason, stage) for a value they cannot write
    (a number, bytes as text, text as bytes, a lone surrogate), as the sink's encode of
    each item. The items: ``(key, value)`` tuples (even rows), a value alone (odd)."""
    sink = _kafka_sink(*serializers)
    halves = sink.column_encoder()
    assert halves is not None
    split, encode = halves
    key = "k" if serializers[0] == "String" else b"k"
    n = len(values)
    batch = pa.RecordBatch.from_pydict({
        "key": pa.array([b"k"] * n), "value": pa.array(list(range(n)), pa.int64()),
        "_gs_where": [f"t[0]@{i}" for i in range(n)]})
    schema = pa.schema([f for f in OUT if f.name not in ("_gs_ts", "_gs_raw_key",
                                                          "_gs_raw_value")])

    def item(kv: tuple[Any, int]) -> Any:
        return (key, values[kv[1]]) if kv[1] % 2 == 0 else values[kv[1]]

    def run(tail: Any, encoder: Any) -> pa.RecordBatch:
        return ItemPass(pipeline="p", errors=errors, shape="entry", decode=None,
                        steps=[("map", item, "map#1")], tail=tail, tail_stage="encode",
                        encode=encoder, schema=schema).batch(batch)

    at_once, by_row = run(split, encode), run(sink.encode_row, None)
    assert at_once.equals(by_row), (at_once.to_pydict(), by_row.to_pydict())
    assert at_once.column("_gs_error").null_count == n - failing
    with pytest.raises(RecordError) as failed:
        ItemPass(pipeline="p", errors="fail", shape="value", decode=None, steps=[],
                 tail=split, tail_stage="encode", encode=encode,
                 schema=pa.schema([("key", pa.binary()), ("value", pa.binary())])).batch(
            pa.RecordBatch.from_pydict({"value": pa.array([None, 5]),
                                        "_gs_where": ["t[0]@8", "t[0]@9"]}))
    assert failed.value.where == "t[0]@9" and failed.value.stage == "encode"


def test_only_strings_and_bytes_have_a_column_encoder() -> None:
    """String and ByteArray sides encode by columns (with ``key_fn`` / ``value_fn``
    picking the values); a serializer without a vectorized form (Json, Long), or a sink
    subclass that changes any of its encodes, encodes item by item."""
    from gridstream.pipeline import KafkaSinks
    from gridstream.pipeline.kafka import KafkaSink

    assert _kafka_sink().column_encoder() is not None
    assert _kafka_sink("ByteArray", "String").column_encoder() is not None
    assert _kafka_sink("Json", "String").column_encoder() is None
    assert _kafka_sink("String", "Long").column_encoder() is None
    props = {"bootstrap.servers": "127.0.0.1:9092", "key.serializer": "String",
             "value.serializer": "String"}
    keyed = KafkaSinks.kafka(props, "out", key_fn=str, value_fn=lambda i: f"v{i}")
    halves = keyed.column_encoder()
    assert halves is not None and halves[0](5) == ("5", "v5")

    class Tagged(KafkaSink):
        def encode(self, item: Any) -> dict[str, Any]:
            return {"key": b"tag", "value": super().encode(item)["value"]}

    class Rows(KafkaSink):
        def encode_row(self, item: Any) -> list[Any]:
            return [b"tag", *super().encode_row(item)[1:]]

    class Encoder(KafkaSink):
        def row_encoder(self) -> Any:
            return lambda item: [b"tag", b"v"]

    for kind in (Tagged, Rows, Encoder):
        assert kind(props, "out").column_encoder() is None, kind


def test_under_fail_an_earlier_row_that_does_not_encode_is_the_one_named() -> None:
    """The column encode runs after the rows' steps: a later row whose step raises
    under ``errors="fail"`` does not hide an earlier row that cannot be encoded (the
    first row in error is named, as when each row was encoded after its steps); a
    flat_map chain is refused a column encode (its rows' outputs fail together)."""
    split, encode = _kafka_sink().column_encoder() or (None, None)

    def step(kv: Any) -> Any:
        if kv[1] == "boom":
            raise ValueError("boom")
        return (kv[0], 7) if kv[1] == "seven" else kv

    fused = ItemPass(pipeline="p", errors="fail", shape="entry", decode=None,
                     steps=[("map", step, "map#1")], tail=split, tail_stage="encode",
                     encode=encode, schema=pa.schema([("key", pa.binary()),
                                                      ("value", pa.binary())]))
    with pytest.raises(RecordError) as failed:
        fused.batch(_batch(["a", "seven", "boom"]))
    assert (failed.value.where, failed.value.stage) == ("t[0]@1", "encode")
    assert "String writes a str, not a int" in str(failed.value)
    with pytest.raises(RecordError) as failed:
        fused.batch(_batch(["a", "boom", "seven"]))
    assert (failed.value.where, failed.value.stage) == ("t[0]@1", "map#1")
    fused.tail = lambda kv: (b"k", b"v", b"extra")  # a tail's bug: the step's error stands
    with pytest.raises(RecordError) as failed:
        fused.batch(_batch(["a", "boom"]))
    assert (failed.value.where, failed.value.stage) == ("t[0]@1", "map#1")
    with pytest.raises(ValueError, match="chain of maps and filters"):
        ItemPass(pipeline="p", errors="fail", shape="entry", decode=None,
                 steps=[("flat_map", lambda kv: [kv], "flat_map#1")], tail=split,
                 tail_stage="encode", encode=encode, schema=OUT)


def test_a_row_whose_key_and_value_do_not_encode_is_blamed_on_its_key() -> None:
    """``ArrowEncode`` names what each row raised, the key's before the value's (as the
    key is encoded first row by row); the other rows' bytes are kept."""
    from gridstream.pipeline.serde import ArrowEncode

    sink = _kafka_sink()
    encode = ArrowEncode("out", sink.key_ser, sink.value_ser)
    arrays, failed = encode([["k", 1, "k", None], ["v", 2, b"b", "\ud800"]])
    assert [a.to_pylist() for a in arrays] == [[b"k", None, b"k", None],
                                               [b"v", None, None, None]]
    assert {row: str(exc) for row, exc in failed.items()} == {
        1: "key: String writes a str, not a int",
        2: "value: String writes a str, not a bytes",
        3: "'utf-8' codec can't encode character '\\ud800' in position 0: surrogates "
           "not allowed"}


def _parted(batch: pa.RecordBatch, topics: list[str] | None) -> pa.RecordBatch:
    """``batch`` with the origin as its parts instead of ``_gs_where`` (as a Kafka
    source gives a first pass whose origin nothing after it reads)."""
    n = batch.num_rows
    columns = {name: batch.column(name) for name in batch.schema.names
               if name != "_gs_where"}
    if topics is not None:
        columns["_gs_origin_topic"] = pa.array(topics, pa.string())
    columns["_gs_origin_partition"] = pa.array([3] * n, pa.int32())
    columns["_gs_origin_offset"] = pa.array([40 + i for i in range(n)], pa.int64())
    return pa.RecordBatch.from_pydict(columns)


def test_the_origin_from_its_parts_names_a_failing_row_as_its_text_does(
        caplog: pytest.LogCaptureFixture) -> None:
    """The origin's parts are no visible column (the map sees the key and value as
    before) and make the text the JVM would have made, with the source's one topic or
    the row's own, under ``fail`` and under ``log``."""
    def step(kv: Any) -> Any:
        assert isinstance(kv, tuple) and len(kv) == 2, kv
        return (kv[0], int(kv[1]))

    for errors in ("fail", "log"):
        # under fail the sink's pass gives back no error columns (compile._item_pass)
        schema = pa.schema([("key", pa.binary()), ("value", pa.binary()), *(
            [] if errors == "fail" else [("_gs_error", pa.string()),
                                         ("_gs_stage", pa.string())])])
        fused = ItemPass(pipeline="p", errors=errors, shape="entry", decode=None,
                         steps=[("map", step, "map#1")], tail=_encode, tail_stage="encode",
                         schema=schema, origin_topic="orders")
        caplog.clear()
        if errors == "fail":
            with pytest.raises(RecordError) as failed:
                fused.batch(_parted(_batch(["1", "x"]), None))
            assert (failed.value.where, failed.value.stage) == ("orders[3]@41", "map#1")
            fused.origin_topic = None
            with pytest.raises(RecordError) as failed:
                fused.batch(_parted(_batch(["1", "2", "x"]), ["a", "b", "c-1"]))
            assert failed.value.where == "c-1[3]@42"
        else:
            out = fused.batch(_parted(_batch(["1", "x"]), None))
            assert out.column("value").to_pylist() == [b"1", None]
            assert out.column("_gs_stage").to_pylist() == [None, "map#1"]
            assert "pipeline p: orders[3]@41: map#1: ValueError" in caplog.text
    # a row sees its visible columns alone: the parts are none of them
    rows = ItemPass(pipeline="p", errors="fail", shape="row", decode=None,
                    steps=[("map", lambda row: (row["key"], ",".join(row)), "map#1")],
                    tail=_encode, tail_stage="encode", schema=pa.schema(
                        [("key", pa.binary()), ("value", pa.binary())]), origin_topic="t")
    seen = rows.batch(_parted(_batch(["1"]), ["t"]).select(
        ["key", "value", "_gs_origin_topic", "_gs_origin_partition", "_gs_origin_offset"]))
    assert seen.column("value").to_pylist() == [b"key,value"]
