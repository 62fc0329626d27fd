"""The pipeline API's grid sink and source on real Kafka, Spark and grids (the Space and
Hazelcast).

Every check compares whole maps: each cache must equal, key by key and value by value,
its topic's latest value per key as read back from Kafka (``sink_helpers.latest``); the
comparison is shown to fail when one value differs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from gridstream.errors import RecordError
from gridstream.grid import Write
from gridstream.pipeline.base import Guarantee, RunContext
from gridstream.pipeline.grids import GridMapSink, GridSinks
from tests.integration.pipeline_grid_flow import kafka_batch, kafka_flow
from tests.integration.sink_helpers import (
    Grid,
    cache_prefix,
    differences,
    latest,
    make_grid,
    produce,
    read_topic,
    workload,
)


@pytest.fixture(params=["space", "hazelcast"])
def grid(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Grid]:
    with make_grid(request.param, tmp_path) as made:
        yield made


@dataclass(frozen=True)
class Context(RunContext):
    """The run context with the pipeline's error policy."""

    errors: str = "fail"
    dead_letter_topic: str | None = None
    dead_letter_options: dict[str, str] | None = None


def context(tmp: Path, guarantee: Guarantee, **more: Any) -> Context:
    name = f"p-{uuid.uuid4().hex[:6]}"
    return Context(name, guarantee, str(tmp / f"ckpt-{name}"), **more)


def map_sink(grid: Grid, cache: str, **options: Any) -> GridMapSink:
    return GridSinks.map(grid.settings, cache, space=grid.space, **options)


def run_stream(spark: Any, sink: GridMapSink, flow: Any, ctx: RunContext
               ) -> list[tuple[int, dict[str, Any]]]:
    """Start the sink's query, process everything available, stop; the batch reports."""
    reports: list[tuple[int, dict[str, Any]]] = []
    query = sink.start(flow, ctx, lambda batch_id, counts: reports.append((batch_id, counts)))
    try:
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
        sink.close()
    return reports


def check_equal(grid: Grid, cache: str, want: dict[Any, Any]) -> None:
    """The cache equals ``want``; and the check fails when one value differs."""
    assert differences(want, grid.read(cache)) == []
    key, value = sorted(want.items(), key=lambda kv: str(kv[0]))[0]
    changed = {**value, "n": -1}
    with grid.adapter() as adapter:
        adapter.apply(cache, [Write(key, changed)])
    assert differences(want, grid.read(cache)) == [f"{key!r}: {changed!r} != {value!r}"]
    with grid.adapter() as adapter:
        adapter.apply(cache, [Write(key, value)])


@pytest.mark.parametrize("guarantee", list(Guarantee))
def test_kafka_to_a_grid_map_holds_each_keys_latest_value(
        grid: Grid, spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path, guarantee: Guarantee) -> None:
    topic = topic_factory(3)
    produce(kafka_bootstrap, topic, workload(11, keys=200, count=2400))
    cache = cache_prefix(grid) + "people"
    sink = map_sink(grid, cache)
    ctx = context(tmp_path, guarantee)
    flow = kafka_flow(spark, kafka_bootstrap, topic, sink, max_offsets=800)
    reports = run_stream(spark, sink, flow, ctx)
    assert len(reports) >= 3  # several batches: later ones overwrite and remove
    assert sum(r["records"] for _, r in reports) == 2400
    assert sum(r["written"] for _, r in reports) == 2400
    want = grid.expected(latest(kafka_bootstrap, topic))
    assert 100 < len(want) < 200  # tombstones removed some keys
    check_equal(grid, cache, want)
    if grid.kind == "hazelcast":  # the versions' writer: one per pipeline and checkpoint
        from gridstream.grid.hazelcast import HazelcastAdapter
        from gridstream.grid.hazelcast._writes import versions_map

        with grid.adapter() as adapter:
            assert isinstance(adapter, HazelcastAdapter)
            marks = adapter.client.get_map(versions_map(cache)).blocking().entry_set()
        sources = {orjson.loads(k)[0] for k, _ in marks}
        if guarantee is Guarantee.EXACTLY_ONCE:
            assert sources == {f"pipeline:{ctx.name}:{sink._query_id}"}
            assert {v for _, v in marks} <= {r[0] for r in reports}
        else:
            assert sources == set()


@pytest.mark.parametrize("guarantee", [Guarantee.EXACTLY_ONCE, Guarantee.AT_LEAST_ONCE])
def test_a_batch_run_again_leaves_the_map_as_its_first_run(
        grid: Grid, spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path, guarantee: Guarantee) -> None:
    """The same batch id twice: the map equals the expected content after each run.
    Between the runs another writer changes one key: the versioned re-run writes nothing
    (the change stays), the unversioned one puts the batch's value again."""
    topic = topic_factory(3)
    produce(kafka_bootstrap, topic, workload(5, keys=150, count=1500))
    cache = cache_prefix(grid) + "m"
    sink = map_sink(grid, cache)
    sink.bind("q-test")
    ctx = context(tmp_path, guarantee)
    batch = kafka_batch(spark, kafka_bootstrap, topic, sink)
    want = grid.expected(latest(kafka_bootstrap, topic))
    try:
        counts = sink.process(batch, 7, ctx)
        assert counts["written"] == 1500
        assert differences(want, grid.read(cache)) == []
        key = sorted(want, key=str)[0]
        other = {**want[key], "n": -5}
        with grid.adapter() as adapter:
            adapter.apply(cache, [Write(key, other)])
        sink.process(batch, 7, ctx)
    finally:
        sink.close()
    if guarantee is Guarantee.EXACTLY_ONCE:
        assert differences(want, grid.read(cache)) == [f"{key!r}: {other!r} != {want[key]!r}"]
    else:
        assert differences(want, grid.read(cache)) == []


def bad_values(item: tuple[Any, Any]) -> list[Any]:
    """Items whose value ``n`` is divisible by 97 cannot be written (not a JSON object)."""
    key, value = item
    if value is not None and value["n"] % 97 == 0:
        return [(key, [value["n"]])]
    return [item]


def test_error_rows_fail_the_batch_before_anything_is_written(
        grid: Grid, spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    topic = topic_factory(3)
    produce(kafka_bootstrap, topic, workload(3, keys=100, count=500, tombstones=False))
    cache = cache_prefix(grid) + "e"
    sink = map_sink(grid, cache)
    sink.bind("q")
    batch = kafka_batch(spark, kafka_bootstrap, topic, sink, bad_values)
    with pytest.raises(RecordError) as failed:
        sink.process(batch, 0, context(tmp_path, Guarantee.EXACTLY_ONCE))
    sink.close()
    assert failed.value.stage == "encode"
    assert "must be a JSON object" in failed.value.reason
    assert f"{topic}[" in failed.value.where
    assert grid.read(cache) == {}


def test_error_rows_logged_or_dead_lettered_and_the_rest_written(
        grid: Grid, spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    topic, letters = topic_factory(3), topic_factory(1)
    records = workload(3, keys=100, count=500, tombstones=False)
    where = produce(kafka_bootstrap, topic, records)
    bad = {w for w, (_, v) in zip(where, records, strict=True)
           if v is not None and orjson.loads(v)["n"] % 97 == 0}
    good = {w: r for w, r in zip(where, records, strict=True) if w not in bad}
    assert len(bad) == 6
    want: dict[Any, Any] = {}
    for _, (k, v) in sorted(good.items()):
        want[orjson.loads(k)] = orjson.loads(v)  # type: ignore[arg-type]
    for errors in ("log", "dead_letter"):
        cache = cache_prefix(grid) + errors
        sink = map_sink(grid, cache)
        sink.bind("q")
        ctx = context(tmp_path, Guarantee.EXACTLY_ONCE, errors=errors,
                      dead_letter_topic=letters,
                      dead_letter_options={"kafka.bootstrap.servers": kafka_bootstrap})
        batch = kafka_batch(spark, kafka_bootstrap, topic, sink, bad_values)
        counts = sink.process(batch, 0, ctx)
        sink.close()
        assert counts["errors"] == 6
        assert counts["written"] == 494
        assert differences(grid.expected(want), grid.read(cache)) == []
    dead = read_topic(kafka_bootstrap, letters)
    assert len(dead) == 6
    seen = set()
    for msg in dead:
        headers = {k: v.decode() for k, v in msg.headers()}
        assert headers["gs.error.stage"] == "encode"
        assert "must be a JSON object" in headers["gs.error.reason"]
        spot = (int(headers["gs.error.partition"]), int(headers["gs.error.offset"]))
        assert headers["gs.error.topic"] == topic
        seen.add(spot)
        assert records[where.index(spot)] == (msg.key(), msg.value())
    assert seen == bad
