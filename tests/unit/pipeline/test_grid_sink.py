"""The grid sink's item encoding and its versioned fold, and the grid changes source's
options and decoding (no Spark, no grid)."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import pickle
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import orjson
import pytest

from gridstream.errors import CodecError, ConfigError
from gridstream.grid import Write
from gridstream.grid.settings import HazelcastGridSettings, SpaceGridSettings
from gridstream.pipeline import Guarantee
from gridstream.pipeline.grid_changes import decode_change
from gridstream.pipeline.grids import GridSinks, GridSources, grid_settings, map_source
from gridstream.spark.grid_apply import apply_all, fold_writes

HZ = {"kind": "hazelcast", "members": ["127.0.0.1:5701"], "cluster_name": "c"}
SPACE = {"kind": "space", "data_dir": "/tmp/nowhere", "space_name": "s"}


def test_a_versioned_fold_keeps_each_keys_last_write_with_the_batch_id() -> None:
    rows = [("m", '"a"', b'{"n":1}'), ("m", "1", b'{"n":2}'), ("m", '"1"', b'{"n":3}'),
            ("m", '"a"', None), ("m", "1", b'{"n":4}'), ("m", '"b"', b'{"n":5}'),
            ("m", '"b"', None), ("m", '"a"', b'{"n":6}')]
    assert fold_writes(rows, updates=True, version=42) == {"m": [
        Write("a", {"n": 6}, 42), Write(1, {"n": 4}, 42), Write("1", {"n": 3}, 42),
        Write("b", None, 42)]}
    # the same rows give the same writes: a re-run batch hands the grid the same batch
    assert fold_writes(list(rows), updates=True, version=42) == fold_writes(
        rows, updates=True, version=42)
    assert fold_writes(rows, updates=True) == {"m": [
        Write("a", {"n": 6}), Write(1, {"n": 4}), Write("1", {"n": 3}), Write("b", None)]}


@pytest.mark.parametrize("version", [-1, True, 1.5])
def test_a_write_version_must_be_a_non_negative_integer(version: Any) -> None:
    with pytest.raises(ValueError, match="non-negative integer"):
        fold_writes([("m", '"a"', None)], updates=True, version=version)


class Recording:
    """Records what ``apply_all`` hands to the grid."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Write], bool]] = []

    def apply(self, cache: str, writes: Sequence[Write], *, overwrite: bool = True) -> None:
        self.calls.append((cache, list(writes), overwrite))


def test_apply_all_hands_every_cache_its_versioned_writes() -> None:
    grid = Recording()
    writes = fold_writes([("b", "1", b"{}"), ("a", "2", None)], updates=True, version=3)
    assert apply_all(grid, writes, updates=True) == 2  # type: ignore[arg-type]
    assert grid.calls == [("a", [Write(2, None, 3)], True), ("b", [Write(1, {}, 3)], True)]


def test_encode_gives_the_key_as_json_text_and_the_value_as_json_bytes() -> None:
    sink = GridSinks.map(HZ, "people")
    assert sink.encode(("k-1", {"n": 1})) == {"key": '"k-1"', "value": b'{"n":1}'}
    assert sink.encode((12, {"n": 1}))["key"] == "12"  # an integer key stays one
    assert sink.encode(["k", None]) == {"key": '"k"', "value": None}  # a remove
    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    value = orjson.loads(sink.encode(("k", {"at": when, "d": Decimal("1.50"), "b": b"\x01",
                                            "s": {2, 1}}))["value"])
    assert value == {"at": "2026-01-02T03:04:05+00:00", "d": "1.50", "b": "AQ==", "s": [1, 2]}
    assert sink.columns() == "key string, value binary"


def test_key_fn_and_value_fn_take_the_key_and_value_from_any_item() -> None:
    sink = GridSinks.map(HZ, "m", key_fn=lambda r: r["id"], value_fn=lambda r: r)
    assert sink.encode({"id": 7, "x": 1}) == {"key": "7", "value": b'{"id":7,"x":1}'}


@pytest.mark.parametrize(("item", "message"), [
    (("k", [1, 2]), "must be a JSON object"),
    (("k", "text"), "must be a JSON object"),
    (("k", {"x": float("nan")}), "no JSON form"),
    (("k", {"x": 2**70}), "cannot be written as JSON"),
    ((True, {}), "string or an integer"),
    ((1.5, {}), "string or an integer"),
    ((2**64, {}), "beyond 64 bits"),
    (("", {}), "must not be empty"),
    (("k", {"x": object()}), "cannot be written as JSON"),
    ((1, 2, 3), r"\(key, value\) items"),
    ("kv", r"\(key, value\) items"),
])
def test_items_a_grid_cannot_hold_are_codec_errors(item: Any, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        GridSinks.map(HZ, "m").encode(item)


@dataclasses.dataclass
class _Reading:
    at: float


@pytest.mark.parametrize("value", [
    collections.OrderedDict(x=float("nan")),
    collections.defaultdict(list, x=float("inf")),
    {"d": collections.OrderedDict(deep=[1.0, float("-inf")])},
    _Reading(float("nan")),
    {"r": [_Reading(float("inf"))]},
    {"s": {1.0, float("nan")}},
])
def test_not_finite_floats_in_dict_subclasses_dataclasses_and_sets_are_codec_errors(
        value: Any) -> None:
    """The grid sink wrote them as null: its check looked into exact dicts and lists only
    (and not into what ``wire_default`` makes of a set)."""
    with pytest.raises(CodecError, match="has no JSON form"):
        GridSinks.map(HZ, "m").encode(("k", value))


def test_a_space_value_whose_id_names_another_key_is_refused() -> None:
    sink = GridSinks.map(SPACE, "m")
    assert sink.encode(("a", {"id": "a"}))["key"] == '"a"'
    with pytest.raises(CodecError, match="is not the item's key"):
        sink.encode(("a", {"id": "b"}))
    with pytest.raises(CodecError, match="is not the item's key"):
        sink.encode((1, {"id": "1"}))  # a string id is not the integer key
    assert GridSinks.map(HZ, "m").encode(("a", {"id": "b"}))["key"] == '"a"'  # no id rule


def test_the_sink_pickles_for_the_executors_without_its_driver_state() -> None:
    sink = GridSinks.map(HZ, "m", key_fn=len, value_fn=dict)
    sink.bind("q")
    copy = pickle.loads(pickle.dumps(sink))
    assert copy.encode({"a": 1}) == {"key": "1", "value": b'{"a":1}'}
    assert copy._query_id == "q"
    assert not copy._started.is_set()  # the driver's event is not shipped


def test_grid_settings_from_a_dict_and_the_guarantee_lowered() -> None:
    settings = grid_settings(HZ)
    assert isinstance(settings, HazelcastGridSettings)
    assert settings.members == ("127.0.0.1:5701",)
    assert isinstance(grid_settings(SPACE), SpaceGridSettings)
    assert GridSinks.map(HZ, "m").cap is Guarantee.EXACTLY_ONCE
    sink = GridSinks.map(HZ, "m", guarantee="at_least_once")
    assert sink.cap is Guarantee.AT_LEAST_ONCE
    assert "AT_LEAST_ONCE" in sink.describe()
    assert map_source("logs", "0e1f") == "pipeline:logs:0e1f"


@pytest.mark.parametrize(("grid", "name", "more", "message"), [
    ({"kind": "redis"}, "m", {}, "grid"),
    ({"kind": "hazelcast", "members": []}, "m", {}, "grid"),
    ("hazelcast", "m", {}, "expected GridSettings"),
    (HZ, "", {}, "not a cache name"),
    (HZ, "__internal", {}, "not a cache name"),
    (HZ, "m", {"guarantee": "twice"}, "guarantee"),
    (HZ, "m", {"tasks": 0}, "tasks"),
])
def test_bad_sink_options_are_config_errors(grid: Any, name: str, more: dict[str, Any],
                                            message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        GridSinks.map(grid, name, **more)


def test_the_changes_source_reads_the_named_caches_only_with_removals() -> None:
    source = GridSources.changes(HZ, ["orders", "a.b"], failover="full-snapshot")
    config = source.config("my pipeline!", "/tmp/ck")
    assert config.cache_whitelist == ("orders", r"a\.b")  # names, not patterns
    assert config.shall_process_removals
    assert config.failover_policy.value == "FULL_SNAPSHOT"
    assert config.name == "my_pipeline_"
    assert "orders, a.b" in source.describe()
    # the pipeline's trigger decides how often the grid is read: the connector's
    # quiet-grid back-off (up to 2 s) would delay a pipeline's first change after a lull
    assert config.poll_interval_ms == config.idle_poll_interval_ms == 10


@pytest.mark.parametrize(("caches", "more", "message"), [
    ([], {}, "at least one cache"),
    ("orders", {"failover": "NONE"}, "not offered"),
    ("orders", {"failover": "sometimes"}, "failover_policy"),
    ("orders", {"on_position_lost": "ignore"}, "on_position_lost"),
    ("orders", {"batch_size": 0}, "batch_size"),
])
def test_bad_changes_options_are_config_errors(caches: Any, more: dict[str, Any],
                                               message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        GridSources.changes(HZ, caches, **more)


def test_a_change_row_decodes_to_an_item() -> None:
    row = {"cache": "c", "key": b'"k"', "value": b'{"n":1}', "version": 9}
    assert decode_change(row) == {"cache": "c", "key": "k", "value": {"n": 1},
                                  "version": 9, "op": "put"}
    removed = {**row, "key": b"12", "value": None, "version": None}
    assert decode_change(removed) == {"cache": "c", "key": 12, "value": None,
                                      "version": None, "op": "remove"}
    with pytest.raises(CodecError, match="not JSON"):
        decode_change({**row, "value": b"{nope"})


class _Query:
    id = "q-1"


class _Writer:
    def __init__(self, df: _Frame) -> None:
        self.df = df

    def queryName(self, name: str) -> _Writer:  # noqa: N802 - Spark's name
        return self

    def option(self, key: str, value: str) -> _Writer:
        return self

    def foreachBatch(self, fn: Any) -> _Writer:  # noqa: N802 - Spark's name
        return self

    def trigger(self, **options: Any) -> _Writer:
        return self

    def start(self) -> _Query:
        self.df.started = True
        return _Query()


class _Frame:
    """A streaming DataFrame: records whether it was observed and which one started."""

    def __init__(self, observed: bool = False) -> None:
        self.is_observed = observed
        self.started = False

    @property
    def writeStream(self) -> _Writer:  # noqa: N802 - Spark's name
        return _Writer(self)


def test_the_grid_sink_writes_the_observed_flow_so_batch_reports_count_its_rows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from gridstream.pipeline import grids
    from gridstream.pipeline.base import Flow, RunContext

    frames: list[_Frame] = []

    def observe(df: _Frame) -> _Frame:  # stands for the JVM's df.observe(OBSERVED, ...)
        frames.append(_Frame(observed=True))
        return frames[-1]

    monkeypatch.setattr(grids, "observed", observe, raising=False)
    raw = _Frame()
    sink = GridSinks.map(HZ, "m")
    sink.start(Flow(raw, "entry"),  # type: ignore[arg-type]
               RunContext("p", Guarantee.AT_LEAST_ONCE, "/tmp/ck"), lambda i, r: None)
    assert not raw.started
    assert [f.started for f in frames] == [True]


@pytest.mark.parametrize(("options", "expected"), [
    ({}, Guarantee.EXACTLY_ONCE),
    ({"failover": "FULL_SNAPSHOT"}, Guarantee.AT_LEAST_ONCE),
    ({"on_position_lost": "snapshot"}, Guarantee.AT_LEAST_ONCE),
])
def test_a_changes_source_that_replays_on_restart_lowers_the_guarantee(
        options: dict[str, Any], expected: Guarantee, tmp_path: Any) -> None:
    from gridstream.pipeline import KafkaSinks, Pipeline

    source = GridSources.changes(HZ, "orders", **options)
    p = Pipeline.create(name="changes")
    (p.read_from(source).map(lambda c: (str(c["key"]), str(c["value"])))
     .write_to(KafkaSinks.kafka({"bootstrap.servers": "127.0.0.1:9092",
                                 "value.serializer": "StringSerializer",
                                 "key.serializer": "StringSerializer"}, "out")))
    job = p.job(guarantee=Guarantee.EXACTLY_ONCE, checkpoint=str(tmp_path))
    assert job.guarantee == expected
    described = job.describe()
    if expected == Guarantee.EXACTLY_ONCE:
        assert "guarantee EXACTLY_ONCE," in described
    else:
        assert (f"guarantee AT_LEAST_ONCE (asked EXACTLY_ONCE, lowered by the source "
                f"({source.describe()}))") in described
