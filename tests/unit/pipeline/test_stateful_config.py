"""Windows and joins: their arguments are checked with clear errors, and a grid join's
Arrow batch is enriched exactly (inner, left, error rows, values that do not fit)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from gridstream.errors import ConfigError
from gridstream.grid.contract import Key, Value
from gridstream.pipeline._lookup import enrich, lookup_all
from gridstream.pipeline.base import Flow
from gridstream.pipeline.stateful import late_rows, parse_duration, window_flow, window_spec
from gridstream.pipeline.tables import DeltaTables, GridTables, check_join, join_flow

_TYPES = {"string": StringType(), "long": LongType(), "int": IntegerType(),
          "timestamp": TimestampType()}


def struct(ddl: str) -> StructType:
    """A StructType of 'name type, ...' (pyspark parses DDL only with a session)."""
    return StructType([StructField(n, _TYPES[t], True)
                       for n, t in (part.split() for part in ddl.split(","))])


SCHEMA = struct(
    "service string, size long, label string, at timestamp, at_ms long, _gs_ts timestamp, "
    "_gs_where string, _gs_error string")
GRID = {"kind": "hazelcast", "members": ["127.0.0.1:5701"]}


def spec(**kwargs: Any) -> Any:
    args: dict[str, Any] = {"aggregate": {"n": "count"}}
    args.update(kwargs)
    size = args.pop("size", "1 minute")
    return window_spec(SCHEMA, size, **args)


def test_a_valid_window_is_described_with_its_emission_rule() -> None:
    w = spec(size="10 seconds", slide="5 seconds", key="service",
             aggregate={"n": "count", "total": ("sum", "size"), "who": ["collect", "label"]})
    assert (w.size, w.slide, w.key, w.watermark) == ("10 seconds", "5 seconds", "service",
                                                      "10 seconds")
    assert [(a.name, a.function, a.column) for a in w.aggregates] == [
        ("n", "count", None), ("total", "sum", "size"), ("who", "collect", "label")]
    assert "append mode" in w.describe() and "sliding 10 seconds every 5 seconds" in w.describe()
    assert spec(slide="1 minute").slide is None  # a slide of the size is tumbling
    assert spec(timestamp="at_ms").timestamp_kind == "millis"
    assert spec(timestamp="at").timestamp_kind == "timestamp"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"key": "nope"}, "window key: no column 'nope' in the flow (columns: service, size"),
    ({"aggregate": {"t": ("sum", "nope")}}, "no column 'nope'"),
    ({"aggregate": {"t": ("median", "size")}}, "unknown function 'median' (known: count, sum"),
    ({"aggregate": {"t": ("sum", "label")}}, "sum needs a numeric column, 'label' is string"),
    ({"aggregate": {"t": "sum"}}, "sum needs a column"),
    ({"aggregate": {"t": 3}}, "is not 'count' or (function, column)"),
    ({"aggregate": {"key": "count"}}, "'key' is reserved"),
    ({"aggregate": {"_gs_x": "count"}}, "is reserved"),
    ({"aggregate": {}}, "at least one aggregate"),
    ({"size": "ten seconds"}, "is not a duration like '10 seconds'"),
    ({"size": "0 seconds"}, "size must be positive"),
    ({"size": "10 fortnights"}, "is not a duration"),
    ({"slide": "2 minutes"}, "slide '2 minutes' is longer than its size"),
    ({"watermark": "soon"}, "window watermark: 'soon'"),
    ({"timestamp": "label"}, "timestamp column 'label' is string"),
])
def test_a_wrong_window_is_a_config_error_naming_the_problem(kwargs: dict[str, Any],
                                                              message: str) -> None:
    with pytest.raises(ConfigError) as err:
        spec(**kwargs)
    assert message in str(err.value)


def test_a_window_on_an_unstructured_flow_asks_for_a_schema() -> None:
    for item in ("entry", "value", "record"):
        with pytest.raises(ConfigError, match="needs a structured flow.*schema="):
            window_flow(Flow(df=None, item=item), "1 minute",  # type: ignore[arg-type]
                        aggregate={"n": "count"})
        with pytest.raises(ConfigError, match="needs a structured flow"):
            join_flow(Flow(df=None, item=item),  # type: ignore[arg-type]
                      DeltaTables.path("/tmp/t"), on="k")


def test_durations() -> None:
    assert parse_duration("500 ms", "size") == ("500 milliseconds", 500)
    assert parse_duration(" 2 minutes ", "size") == ("2 minutes", 120_000)
    assert parse_duration("1 day", "size") == ("1 days", 86_400_000)
    assert parse_duration("0 seconds", "watermark") == ("0 seconds", 0)


def test_late_rows_sums_every_state_operator_of_a_progress() -> None:
    progress = {"stateOperators": [{"numRowsDroppedByWatermark": 2},
                                   {"numRowsDroppedByWatermark": 3}, {}]}
    assert late_rows(progress) == 5
    assert late_rows({"stateOperators": []}) == 0
    assert late_rows(None) == 0


@pytest.mark.parametrize(("table", "kwargs", "message"), [
    (DeltaTables.path("/t"), {"on": "k", "how": "outer"}, "how='outer': 'inner' or 'left'"),
    (DeltaTables.path("/t"), {"on": ""}, "give a column name"),
    (DeltaTables.path("/t"), {"on": "k", "fields": "a string"}, "lists the table's column"),
    (GridTables.map(GRID, "users"), {"on": ("a", "b")}, "names the flow's column only"),
    (GridTables.map(GRID, "users"), {"on": "k", "fields": ["a"]}, "is a Spark DDL string"),
    (GridTables.map(GRID, "users"), {"on": "k", "fields": " "}, "is a Spark DDL string"),
    ("users", {"on": "k"}, "is not a table"),
])
def test_a_wrong_join_is_a_config_error(table: Any, kwargs: dict[str, Any],
                                        message: str) -> None:
    args = {"how": "inner", "fields": None, **kwargs}
    with pytest.raises(ConfigError) as err:
        check_join(table, **args)
    assert message in str(err.value)


def test_grid_tables_validate_the_grid_settings() -> None:
    with pytest.raises(ConfigError, match="invalid grid settings"):
        GridTables.map({"kind": "hazelcast", "members": []}, "users")
    with pytest.raises(ConfigError, match="invalid grid settings"):
        GridTables.map({"kind": "redis"}, "users")
    with pytest.raises(ConfigError, match="non-empty"):
        GridTables.map(GRID, "")
    assert GridTables.map(GRID, "users").grid.kind == "hazelcast"


class FakeGrid:
    def __init__(self, entries: dict[Key, Value]) -> None:
        self.entries = entries
        self.calls: list[list[Key]] = []

    def get_all(self, cache: str, keys: Collection[Key]) -> dict[Key, Value]:
        self.calls.append(list(keys))
        return {k: self.entries[k] for k in keys if k in self.entries}


def _batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({
        "user": ["u1", "u2", None, "u1", "u9", None],
        "n": [1, 2, 3, 4, 5, None],
        "_gs_ts": pa.array([0] * 6, type=pa.timestamp("us", tz="UTC")),
        "_gs_where": [f"t[0]@{i}" for i in range(6)],
        "_gs_error": [None, None, None, None, None, "bad json"],
        "_gs_stage": [None, None, None, None, None, "decode"],
    })


def test_a_grid_join_batch_inner_left_and_error_rows() -> None:
    grid = FakeGrid({"u1": {"name": "Ann", "tier": 1}, "u2": {"name": "Bob", "tier": "x"}})
    added = struct("name string, tier int")
    inner = enrich(grid, "users", "user", "inner", added, False, _batch(), 1000)  # type: ignore[arg-type]
    assert grid.calls == [["u1", "u2", "u9"]]  # distinct keys of good rows, once
    assert inner.to_pydict() == {
        "user": ["u1", None, "u1", None], "n": [1, None, 4, None],
        "_gs_ts": inner.column("_gs_ts").to_pylist(),
        "_gs_where": ["t[0]@0", "t[0]@1", "t[0]@3", "t[0]@5"],
        "_gs_error": [None, inner.column("_gs_error")[1].as_py(), None, "bad json"],
        "_gs_stage": [None, "join:users", None, "decode"],
        "name": ["Ann", None, "Ann", None], "tier": [1, None, 1, None],
    }
    assert "field 'tier'" in inner.column("_gs_error")[1].as_py()
    left = enrich(grid, "users", "user", "left",  # type: ignore[arg-type]
                  struct("name string"), False, _batch(), 1000)
    assert left.column("name").to_pylist() == ["Ann", "Bob", None, "Ann", None, None]
    assert left.column("user").to_pylist() == ["u1", "u2", None, "u1", "u9", None]
    whole = enrich(grid, "users", "user", "left",  # type: ignore[arg-type]
                   struct("users string"), True, _batch(), 1000)
    assert whole.column("users").to_pylist()[:2] == ['{"name":"Ann","tier":1}',
                                                     '{"name":"Bob","tier":"x"}']


def test_lookups_go_in_chunks() -> None:
    grid = FakeGrid({i: {"v": i} for i in range(10)})
    found = lookup_all(grid, "c", list(range(25)), 4)  # type: ignore[arg-type]
    assert found == {i: {"v": i} for i in range(10)}
    assert [len(c) for c in grid.calls] == [4, 4, 4, 4, 4, 4, 1]


def _pipeline(step: str) -> Any:
    from gridstream.pipeline import KafkaSinks, KafkaSources, Pipeline

    props = {"bootstrap.servers": "127.0.0.1:9092", "value.deserializer": "StringDeserializer"}
    out = {"bootstrap.servers": "127.0.0.1:9092", "value.serializer": "StringSerializer"}
    p = Pipeline.create(name="rt")
    stage = p.read_from(KafkaSources.kafka(props, "in", projection="value")) \
        .map(lambda v: {"k": v}, schema="k string")
    if step == "window":
        stage = stage.window("1 minute", key="k", aggregate={"n": "count"})
    else:
        stage = stage.join(DeltaTables.path("/tmp/t"), on="k")
    stage.map(lambda r: (None, str(r))).write_to(KafkaSinks.kafka(out, "out"))
    return p


@pytest.mark.parametrize("step", ["window", "join"])
def test_real_time_mode_refuses_windows_and_joins(step: str) -> None:
    from gridstream.pipeline import Guarantee

    p = _pipeline(step)
    assert [type(s).__name__ for s in p.steps][1:2] == ["JvmStep"]
    assert p.steps[1].stateful
    with pytest.raises(ConfigError, match=f"stateful steps \\({step}#2\\)"):
        p.job(guarantee=Guarantee.AT_LEAST_ONCE, checkpoint="/tmp/ck", trigger="real_time")


def test_a_window_stage_checks_its_arguments_when_added() -> None:
    from gridstream.pipeline import KafkaSources, Pipeline

    props = {"bootstrap.servers": "127.0.0.1:9092", "value.deserializer": "StringDeserializer"}
    stage = Pipeline.create().read_from(KafkaSources.kafka(props, "in"))
    with pytest.raises(ConfigError, match="unknown function 'median'"):
        stage.window("1 minute", aggregate={"m": ("median", "x")})
    with pytest.raises(ConfigError, match="how='full'"):
        stage.join(DeltaTables.path("/t"), on="k", how="full")  # type: ignore[arg-type]


RUN_FILE = """
[run]
allowed_modules = ["tests.unit.pipeline.steps"]

[[pipeline]]
name = "windows"
guarantee = "AT_LEAST_ONCE"
checkpoint = "/tmp/ck-windows"
[pipeline.source]
kind = "kafka"
topics = ["in"]
properties = { "value.deserializer" = "StringDeserializer" }
[[pipeline.steps]]
map = "tests.unit.pipeline.steps:upper"
schema = "user string, n long"
[[pipeline.steps]]
join = { table = { kind = "delta", path = "/tmp/users" }, on = ["user", "id"], how = "left" }
[[pipeline.steps]]
window = { size = "1 minute", key = "user", aggregate = { n = "count", total = ["sum", "n"] } }
[pipeline.sink]
kind = "kafka"
topic = "out"
properties = { "value.serializer" = "StringSerializer" }
"""


def test_run_files_declare_windows_and_joins(tmp_path: Path) -> None:
    from gridstream.run.config import build_api_jobs, load_config

    path = tmp_path / "run.toml"
    path.write_text(RUN_FILE)
    (job,) = build_api_jobs(load_config(path))
    assert [s.label for s in job.steps] == ["map#1", "join#2", "window#3"]
    assert "left join with Delta table /tmp/users on user = id" in job.steps[1].note
    assert "total=sum(n)" in job.steps[2].note
    path.write_text(RUN_FILE.replace('how = "left"', 'how = "left", size = 3'))
    with pytest.raises(ConfigError, match="steps.1.join: .*unexpected keyword argument 'size'"):
        build_api_jobs(load_config(path))
    path.write_text(RUN_FILE.replace('kind = "delta", path', 'kind = "delta", paht'))
    with pytest.raises(ConfigError, match=r"join table \(delta\): unknown key\(s\) \['paht'\]"):
        build_api_jobs(load_config(path))
    path.write_text(RUN_FILE.replace('["sum", "n"]', '["median", "n"]'))
    with pytest.raises(ConfigError, match="unknown function 'median'"):
        build_api_jobs(load_config(path))


def test_tables_from_their_description() -> None:
    from gridstream.pipeline.tables import DeltaTable, GridTable, table_from

    assert table_from({"kind": "delta", "path": "/t"}) == DeltaTable("/t")
    grid = table_from({"kind": "grid", "grid": GRID, "name": "users"})
    assert isinstance(grid, GridTable) and grid.name == "users"
    with pytest.raises(ConfigError, match="'delta' or 'grid'"):
        table_from({"kind": "redis"})
    with pytest.raises(ConfigError, match=r"missing \['name'\]"):
        table_from({"kind": "grid", "grid": GRID})


@pytest.mark.parametrize(("value", "kind", "why"), [
    (1.7, LongType(), "not an integer"),
    (2.0, IntegerType(), "not an integer"),
    ({"a": 1, "b": 2}, StructType([StructField("a", LongType())]), "field 'b' is not in"),
    (b"x", StringType(), "not text"),
    ("x", BinaryType(), "not bytes"),
    ([1, 2.5], ArrayType(LongType()), "not an integer"),
])
def test_a_joined_value_that_does_not_fit_exactly_is_an_error_row_not_converted(
        value: Any, kind: DataType, why: str) -> None:
    grid = FakeGrid({"u1": {"v": value}, "u2": {"v": None}})
    added = StructType([StructField("v", kind)])
    out = enrich(grid, "users", "user", "inner", added, False, _batch(), 1000)  # type: ignore[arg-type]
    assert out.column("_gs_error")[0].as_py() is not None
    assert why in out.column("_gs_error")[0].as_py()
    assert out.column("v").to_pylist()[0] is None
    assert out.column("_gs_error")[1].as_py() is None  # u2: a null fits
