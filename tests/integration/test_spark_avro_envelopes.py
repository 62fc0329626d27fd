"""The mirror's Avro envelopes decoded in the JVM give, field for field and byte for byte
in ``data``, what the Python transcoder (fastavro, then the json codec) gives; values it
cannot decode are error rows; a new schema id stops the job until it is planned."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from gridstream.operations import Operation, OpType, PropertySpec, TypeDescriptor
from gridstream.protocol import OperationEncoder
from gridstream.protocol.avro import AvroCodec, LocalSchemaRegistry
from gridstream.spark.avro_envelopes import AvroPlanner, decode_avro_envelopes, unplanned_ids
from gridstream.spark.value_codecs import Transcoder

GEO = (PropertySpec("lat", "float"), PropertySpec("seen", "datetime"),
       PropertySpec("raw", "bytes"))
THING = TypeDescriptor(
    name="com.example.Thing", id_property="id",
    fixed=(PropertySpec("id", "str"), PropertySpec("name", "str"), PropertySpec("n", "int"),
           PropertySpec("score", "float"), PropertySpec("ok", "bool"),
           PropertySpec("photo", "bytes"), PropertySpec("born", "datetime"),
           PropertySpec("day", "date"), PropertySpec("price", "decimal"),
           PropertySpec("ref", "uuid"), PropertySpec("tags", "list"),
           PropertySpec("labels", "set"), PropertySpec("meta", "dict"),
           PropertySpec("blob", "object"), PropertySpec("anything", "any"),
           PropertySpec("geo", "object", GEO), PropertySpec("odd-name", "str")))
OTHER = TypeDescriptor(name="Other", id_property="id", fixed=(PropertySpec("id", "int"),))
PLAIN = TypeDescriptor(  # kinds Spark's JSON writer spells as the json codec does
    name="Plain", id_property="id",
    fixed=(PropertySpec("id", "str"), PropertySpec("n", "int"), PropertySpec("x", "float"),
           PropertySpec("ok", "bool"), PropertySpec("raw", "bytes"),
           PropertySpec("day", "date"), PropertySpec("price", "decimal"),
           PropertySpec("ref", "uuid"),
           PropertySpec("at", "object", (PropertySpec("city", "str"),
                                         PropertySpec("y", "float")))))
PLAIN_FULL = {"id": "p\u0001\"\\ü", "n": 2**62, "x": -0.1, "ok": False, "raw": bytes(range(60)),
              "day": dt.date(2024, 2, 29), "price": Decimal("-1E+5"), "ref": uuid.UUID(int=9),
              "at": {"city": "Z\u00fcrich", "y": None}}
PLAIN_OPS = [
    Operation(OpType.WRITE, PLAIN.name, "p-1", 1, PLAIN_FULL, 0, 2000),  # one to_json
    Operation(OpType.WRITE, PLAIN.name, "p-2", 2, {**PLAIN_FULL, "n": None, "at": None}, 0,
              2001),
    Operation(OpType.PARTIAL_UPDATE, PLAIN.name, "p-1", 3, {"x": 1.5, "id": "p-1"}, 0, 2002),
    Operation(OpType.WRITE, PLAIN.name, "p-3", 4, {**PLAIN_FULL, "more": 1}, 0, 2003),
]

T0 = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
FULL = {"id": "t-1", "name": 'quo"te \\ back\nline ü €', "n": -(2**62), "score": 2.5,
        "ok": True, "photo": b"\x00\xff\x10", "born": T0, "day": dt.date(1999, 12, 31),
        "price": Decimal("10.50"), "ref": uuid.UUID(int=7), "tags": [1, "a", None],
        "labels": ["x"], "meta": {"k": {"deep": [True]}}, "blob": {"any": 1},
        "anything": "text", "geo": {"lat": -1.25, "seen": T0.replace(microsecond=120),
                                    "raw": b"\x01"},
        "odd-name": "via extra", "dyn ü\"key": [1, {"x": None}], "dyn2": None}
OPS = [
    Operation(OpType.WRITE, THING.name, "t-1", 7, FULL, 1, 1000, "txn-1"),
    Operation(OpType.WRITE, THING.name, "t-2", 8, {"id": "t-2", "born": T0.replace(
        microsecond=999_999), "geo": {"lat": None}, "name": None}, 0, 1001),
    Operation(OpType.PARTIAL_UPDATE, THING.name, "t-1", 9, {"score": None, "tags": []}, 1,
              1002),
    Operation(OpType.CHANGE, THING.name, "t-1", 10, {"geo.lat": 3.0}, 1, 1003,
              removed=("dyn2",)),
    Operation(OpType.REMOVE, THING.name, "t-2", 11, None, 0, 1004),
    Operation(OpType.WRITE, OTHER.name, 42, 12, {"id": 42, "extra": {"a": 1}}, 0, 1005),
]
ODD_FLOATS = [
    Operation(OpType.WRITE, THING.name, "t-3", 13,
              {"id": "t-3", "score": 1e20, "geo": {"lat": float("nan")}}, 0, 1006),
    Operation(OpType.WRITE, PLAIN.name, "p-9", 14,  # to_json would spell NaN "NaN"
              {**{k: None for k in PLAIN.fixed_names()}, "id": "p-9", "x": float("inf"),
               "at": {"city": None, "y": float("nan")}}, 0, 1007),
]
FIELDS = ("op", "type", "version", "txn", "ts", "partition", "removed")


def _rows(spark: Any, values: list[bytes | None]) -> Any:
    rows = [("things", 0, offset, b"k", value) for offset, value in enumerate(values)]
    return spark.createDataFrame(
        rows, "topic STRING, `partition` INT, offset BIGINT, key BINARY, value BINARY")


def _encoded(schema_dir: Path, ops: list[Operation]) -> list[bytes]:
    encoder = OperationEncoder(AvroCodec(LocalSchemaRegistry(schema_dir)))
    kinds = {THING.name: THING, OTHER.name: OTHER, PLAIN.name: PLAIN}
    return [encoder.encode(op, kinds[op.type_name], "things").value for op in ops]


def _differences(rows: list[Any], values: list[bytes], schema_dir: Path, *,
                 exact: bool = True) -> list[str]:
    """Where the JVM's rows differ from the Python transcoder's envelopes."""
    python = Transcoder("avro", avro_schema_dir=str(schema_dir))
    found = []
    for row, value in zip(rows, values, strict=True):
        want = orjson.loads(python.json_of(value))
        got = {name: row[name] for name in FIELDS}
        if {name: want.get(name, [] if name == "removed" else None) for name in FIELDS} != got:
            found.append(f"offset {row['offset']}: {got} != {want}")
        if (row["id"], row["id_int"]) != (str(want["id"]), isinstance(want["id"], int)):
            found.append(f"offset {row['offset']}: id {row['id']!r}/{row['id_int']}")
        data = want.get("data")
        text = None if data is None else orjson.dumps(data).decode()
        same = row["data"] == text if exact else (
            (row["data"] is None) == (text is None)
            and (text is None or orjson.loads(row["data"]) == orjson.loads(text)))
        if not same:
            found.append(f"offset {row['offset']}: data {row['data']!r} != {text!r}")
        if row["error"] is not None:
            found.append(f"offset {row['offset']}: error {row['error']}")
    return found


def test_the_jvm_gives_the_python_paths_envelopes(spark: Any, tmp_path: Path) -> None:
    values = _encoded(tmp_path, OPS)
    planner = AvroPlanner(avro_schema_dir=str(tmp_path))
    assert len(planner.plan.writers) == 2
    decoded = decode_avro_envelopes(_rows(spark, list(values)), planner.plan)
    rows = decoded.orderBy("offset").collect()
    assert _differences(rows, values, tmp_path) == []
    # the check can fail: one changed byte of data is found
    tampered = [r.asDict() | ({"data": r["data"].replace("2.5", "2.6")} if r["offset"] == 0
                              else {}) for r in rows]
    assert any("offset 0: data" in d for d in _differences(tampered, values, tmp_path))
    # no Python in the plan: decoded in the JVM
    plan = decoded._jdf.queryExecution().executedPlan().toString()
    assert "from_avro" in plan
    for python in ("MapInArrow", "PythonUDF", "ArrowEvalPython", "BatchEvalPython"):
        assert python not in plan


def test_a_record_of_plain_kinds_is_one_to_json_and_the_same_text(
        spark: Any, tmp_path: Path) -> None:
    from gridstream.spark.avro_envelopes import _data_text

    assert "to_json(a.data, map('ignoreNullFields', 'false'))" in _data_text("a", PLAIN.fixed)
    assert "to_json(a.data," not in _data_text("a", THING.fixed)
    values = _encoded(tmp_path, PLAIN_OPS)
    planner = AvroPlanner(types={PLAIN.name: PLAIN})
    rows = decode_avro_envelopes(_rows(spark, list(values)), planner.plan).orderBy(
        "offset").collect()
    assert _differences(rows, values, tmp_path) == []


def test_numbers_the_json_writer_spells_otherwise_keep_their_values(
        spark: Any, tmp_path: Path) -> None:
    values = _encoded(tmp_path, ODD_FLOATS)
    planner = AvroPlanner(types={THING.name: THING, PLAIN.name: PLAIN})
    rows = decode_avro_envelopes(_rows(spark, list(values)), planner.plan).orderBy(
        "offset").collect()
    assert _differences(rows, values, tmp_path, exact=False) == []
    assert '"lat":null' in rows[0]["data"]  # NaN is null, as orjson writes it
    assert '"x":null' in rows[1]["data"] and '"y":null' in rows[1]["data"]


def _not_json_text(schema_dir: Path) -> list[bytes]:
    """Records another producer could write: an ``extra`` value and a list property
    whose text is not one JSON value (embedded as it is, each would add a key)."""
    import io

    import fastavro

    codec = AvroCodec(LocalSchemaRegistry(schema_dir))
    schema_id, parsed, _ = codec._writer(THING)
    base = {"op": "WRITE", "type": THING.name, "id": "t-9", "version": 1, "txn": None,
            "ts": 0, "partition": 0, "removed": []}
    records = [
        {**base, "data": {"id": "t-9"}, "present": ["id", "k"],
         "extra": {"k": '1,"admin":true'}},
        {**base, "data": {"id": "t-9", "tags": '[1],"admin":true'}, "present": ["id", "tags"],
         "extra": {}},
    ]
    found = []
    for record in records:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, record)
        found.append(b"\x00" + schema_id.to_bytes(4, "big") + out.getvalue())
    return found


def test_undecodable_values_are_error_rows_and_a_new_id_stops_the_job(
        spark: Any, tmp_path: Path) -> None:
    good = _encoded(tmp_path, OPS[:1])[0]
    planner = AvroPlanner(avro_schema_dir=str(tmp_path))
    other = _encoded(tmp_path, OPS[-1:])[0]  # a schema file written after the plan
    unknown = b"\x00\x7f\xff\xff\xf0body"
    huge = good[:5] + b"\xee\xff\xff\xff\x0f"  # op: a 2 GiB string, Avro's bounds refuse
    values: list[bytes | None] = [good, b"\x01\x00\x00\x00\x01rest", b"\x00\x01", None,
                                  good[:5] + b"\xff" * 3, unknown, other, huge,
                                  *_not_json_text(tmp_path)]
    records = _rows(spark, values)
    with pytest.raises(Exception, match="NewSchemaError: value: schema id"):
        decode_avro_envelopes(records, planner.plan).collect()
    new = unplanned_ids(records, planner.plan)
    assert new == {2147483632, int.from_bytes(other[1:5], "big")}
    assert planner.learn(new)
    assert not planner.learn(new)  # nothing new: a re-plan would fail the same
    rows = {r["offset"]: r for r in decode_avro_envelopes(records, planner.plan).collect()}
    errors = {offset: row["error"] for offset, row in rows.items()}
    assert errors[0] is None and errors[6] is None
    assert "magic byte 0 expected, found 1" in errors[1]
    assert "5-byte header" in errors[2]
    assert "tombstone" in errors[3]
    assert "avro body does not match schema" in errors[4]
    assert "unknown avro schema id 2147483632" in errors[5]
    assert "avro body does not match schema" in errors[7]
    # without the bound Avro would allocate 2 GiB for it before reading (the JVM dies)
    jvm = spark.sparkContext._jvm
    assert jvm.System.getProperty("org.apache.avro.limits.string.maxLength") == "67108864"
    assert all("a JSON-text value does not parse" in errors[i] for i in (8, 9))
    assert (rows[6]["id"], rows[6]["id_int"]) == ("42", True)
