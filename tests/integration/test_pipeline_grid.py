"""The pipeline API's grid sink and source on real Kafka, Spark and grids (the Space and
Hazelcast).

Every check compares whole maps: each cache must equal, key by key and value by value,
its topic's latest value per key as read back from Kafka (``sink_helpers.latest``); the
comparison is shown to fail when one value differs.
"""

from __future__ import annotations

import os
import signal
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from gridstream.errors import RecordError
from gridstream.grid import Write
from gridstream.pipeline import (
    GridSources,
    Guarantee,
    KafkaSinks,
    KafkaSources,
    Pipeline,
    RunContext,
)
from gridstream.pipeline.grids import GridMapSink, GridSinks
from tests.integration.support.child_output import await_line, start_piped
from tests.integration.support.pipeline_grid_flow import kafka_batch
from tests.integration.support.sink_helpers import (
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


def context(tmp: Path, guarantee: Guarantee, **more: Any) -> RunContext:
    name = f"p-{uuid.uuid4().hex[:6]}"
    return RunContext(name, guarantee, str(tmp / f"ckpt-{name}"), **more)


def map_sink(grid: Grid, cache: str, **options: Any) -> GridMapSink:
    return GridSinks.map(grid.settings, cache, space=grid.space, **options)


def json_entry(kv: tuple[bytes, bytes | None]) -> tuple[Any, Any]:
    """A Kafka record's JSON key and value → a grid entry (no value: a remove)."""
    return orjson.loads(kv[0]), None if kv[1] is None else orjson.loads(kv[1])


def run_pipeline(spark: Any, bootstrap: str, topic: str, sink: GridMapSink,
                 guarantee: Guarantee, checkpoint: Path, **options: Any) -> Any:
    """Kafka → ``json_entry`` → ``sink`` through the pipeline API, everything the topic
    holds now; the job (its batches and failure)."""
    props = {"bootstrap.servers": bootstrap, "key.deserializer": "ByteArrayDeserializer",
             "value.deserializer": "ByteArrayDeserializer", "auto.offset.reset": "earliest"}
    p = Pipeline.create(name=f"grid-{uuid.uuid4().hex[:6]}")
    (p.read_from(KafkaSources.kafka(props, topic, max_offsets_per_trigger=800))
      .map(json_entry)
      .write_to(sink))
    job = p.job(guarantee=guarantee, checkpoint=str(checkpoint), trigger="available_now",
                **options)
    try:
        query = job.start(spark)
        query.awaitTermination(600)
        assert not query.isActive
    finally:
        job.close()
    return job


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
    job = run_pipeline(spark, kafka_bootstrap, topic, sink, guarantee, tmp_path / "ck")
    assert job.failure is None
    assert len(job.batches) >= 3  # several batches: later ones overwrite and remove
    assert sum(b["written"] for b in job.batches.values()) == 2400
    reports = [job.reports.popleft() for _ in range(len(job.reports))]
    assert sum(r.rows_in for r in reports) == 2400
    assert sum(r.rows_out for r in reports) == 2400  # counted at the sink (observed)
    assert sum(r.errors for r in reports) == 0
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
            assert sources == {f"pipeline:{job.name}:{job.query.id}"}
            assert {v for _, v in marks} <= set(job.batches)
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


@pytest.mark.parametrize("guarantee", [Guarantee.EXACTLY_ONCE, Guarantee.AT_LEAST_ONCE])
def test_a_space_map_sink_applies_a_batch_in_bounded_chunks(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, guarantee: Guarantee) -> None:
    """The driver never holds the whole batch: it reads the rows key by key and hands the
    Space at most ``DRIVER_CHUNK`` keys at once (40 here: 1500 records over 150 keys).
    The map is what one apply of the batch gives, and a versioned re-run still writes
    nothing (no key is split between chunks), whatever another writer did in between."""
    from gridstream.grid.space import SpaceAdapter
    from gridstream.spark import grid_apply as apply

    monkeypatch.setattr(apply, "DRIVER_CHUNK", 40)
    sizes: list[int] = []
    original = SpaceAdapter.apply

    def recording(self: SpaceAdapter, cache: str, writes: Any, *,
                  overwrite: bool = True) -> None:
        sizes.append(len(writes))
        original(self, cache, writes, overwrite=overwrite)

    monkeypatch.setattr(SpaceAdapter, "apply", recording)
    topic = topic_factory(3)
    produce(kafka_bootstrap, topic, workload(8, keys=150, count=1500))
    with make_grid("space", tmp_path) as grid:
        cache = cache_prefix(grid) + "m"
        sink = map_sink(grid, cache)
        sink.bind("q-chunks")
        ctx = context(tmp_path, guarantee)
        batch = kafka_batch(spark, kafka_bootstrap, topic, sink)
        want = grid.expected(latest(kafka_bootstrap, topic))
        try:
            counts = sink.process(batch, 3, ctx)
            keys = {orjson.loads(m.key()) for m in read_topic(kafka_bootstrap, topic)}
            assert counts["written"] == 1500 and counts["key_writes"] == len(keys) > 120
            assert max(sizes) <= 40 and sum(sizes) == counts["key_writes"]
            assert len(sizes) == -(-counts["key_writes"] // 40)
            assert differences(want, grid.read(cache)) == []
            key = sorted(want, key=str)[0]
            other = {**want[key], "n": -5}
            with grid.adapter() as adapter:
                adapter.apply(cache, [Write(key, other)])
            sizes.clear()
            sink.process(batch, 3, ctx)
            assert max(sizes) <= 40
        finally:
            sink.close()
        if guarantee is Guarantee.EXACTLY_ONCE:
            assert differences(want, grid.read(cache)) == [
                f"{key!r}: {other!r} != {want[key]!r}"]
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


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a fault run (two driver processes): the slow suite (make test-slow)
def test_a_driver_killed_between_the_write_and_the_checkpoint_reruns_the_batch(
        grid: Grid, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    """EXACTLY_ONCE, a child driver SIGKILLed after batch 1 was written to the grid and
    before Spark committed it: the restarted driver runs batch 1 again (same query id,
    so the same writer source and versions) and the map ends equal to the topic's
    latest value per key."""
    topic = topic_factory(3)
    produce(kafka_bootstrap, topic, workload(23, keys=250, count=3000))
    cache = cache_prefix(grid) + "killed"
    grid.release_space()  # the child driver owns the Space
    argv = [sys.executable, "-m", "tests.integration.support.pipeline_grid_child",
            "--bootstrap", kafka_bootstrap, "--topic", topic,
            "--grid", grid.settings.model_dump_json(), "--cache", cache,
            "--checkpoint", str(tmp_path / "ck"), "--name", "grid-kill"]
    seen: list[str] = []
    child, lines = start_piped([*argv, "--pause-after", "1"], ROOT)
    try:
        await_line(child, lines, seen, lambda line: line.startswith("applied batch 1"))
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(60)
    first_id = next(line.split()[1] for line in seen if line.startswith("query "))
    assert len(grid.read(cache)) > 0  # batches 0 and 1 are in the grid
    again: list[str] = []
    child, lines = start_piped(argv, ROOT)
    try:
        await_line(child, lines, again, lambda line: line.strip() in ("finished", "FAILED"),
                   timeout=400)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(60)
    assert "finished\n" in again, "".join(again[-30:])
    applied = [line.strip() for line in again if line.startswith("applied batch")]
    assert applied[0] == "applied batch 1"  # the uncommitted batch, run again
    assert applied == [f"applied batch {n}" for n in range(1, len(applied) + 1)]
    assert len(applied) >= 2  # and the batches after it
    assert next(line.split()[1] for line in again if line.startswith("query ")) == first_id
    want = grid.expected(latest(kafka_bootstrap, topic))
    assert len(want) > 150
    grid.reopen_space()  # the child has ended: the test writes again (check_equal's proof)
    check_equal(grid, cache, want)


def change_item(change: dict[str, Any]) -> tuple[str, str]:
    """A change item → a Kafka entry: the key's JSON text, the whole item as JSON."""
    return orjson.dumps(change["key"]).decode(), orjson.dumps(change).decode()


def test_grid_changes_to_kafka_give_the_snapshot_then_every_change_in_order(
        grid: Grid, spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    cache = cache_prefix(grid) + "src"
    first = {f"k{i}": {"n": i} for i in range(40)}
    with grid.adapter() as adapter:
        adapter.apply(cache, [Write(k, v) for k, v in first.items()])
    out = topic_factory(1)
    p = Pipeline.create(name=f"changes-{uuid.uuid4().hex[:6]}")
    (p.read_from(GridSources.changes(grid.settings, cache))
      .map(change_item)
      .write_to(KafkaSinks.kafka({"bootstrap.servers": kafka_bootstrap,
                                  "key.serializer": "StringSerializer",
                                  "value.serializer": "StringSerializer"}, out)))
    job = p.job(guarantee=Guarantee.EXACTLY_ONCE, checkpoint=str(tmp_path / "ck"))
    removed = [f"k{i}" for i in range(0, 40, 5)]
    updated = {f"k{i}": {"n": i * 10} for i in range(1, 40, 5)}
    try:
        query = job.start(spark)
        query.processAllAvailable()
        with grid.adapter() as adapter:
            adapter.apply(cache, [Write(k, None) for k in removed])
            adapter.apply(cache, [Write(k, v) for k, v in updated.items()])
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        job.close()
    items = [orjson.loads(msg.value()) for msg in read_topic(kafka_bootstrap, out)]
    assert all(i["cache"] == cache for i in items)
    snapshot, changes = items[:40], items[40:]
    assert {i["key"]: i["value"] for i in snapshot} == grid.expected(first)
    assert {i["op"] for i in snapshot} == {"put"}
    per_key: dict[str, list[tuple[str, Any]]] = {}
    for i in changes:  # in order per key (Hazelcast: no order between its partitions)
        per_key.setdefault(i["key"], []).append((i["op"], i["value"]))
    assert per_key == {**{k: [("remove", None)] for k in removed},
                       **{k: [("put", v)] for k, v in grid.expected(updated).items()}}
    versions = [i["version"] for i in changes]
    if grid.kind == "space":  # the log's sequence numbers: growing
        assert versions == sorted(versions)
        assert all(isinstance(v, int) for v in versions)
    else:
        assert all(isinstance(v, int) for v in versions)
    latest_items = {i["key"]: i["value"] for i in items if i["op"] == "put"}
    for i in changes:
        if i["op"] == "remove":
            latest_items.pop(i["key"])
    assert differences(latest_items, grid.read(cache)) == []
