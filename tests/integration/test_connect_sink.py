"""The sink connector on real Kafka, Spark and grids (the Space and Hazelcast).

Every check compares whole values: each cache must equal its topic's latest value per key
as read back from Kafka (``sink_helpers.latest``), and the comparison itself is shown to
fail when one entry differs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from gridstream.connect.config import SinkConnectorConfig
from gridstream.connect.sink import SinkConnector
from gridstream.grid import Write
from tests.integration.sink_helpers import (
    Grid,
    cache_prefix,
    differences,
    entity,
    key_bytes,
    latest,
    make_grid,
    produce,
    workload,
)


@pytest.fixture(params=["space", "hazelcast"])
def grid(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Grid]:
    with make_grid(request.param, tmp_path) as made:
        yield made


def sink(grid: Grid, bootstrap: str, tmp: Path, **options: Any) -> SinkConnector:
    raw = {"name": f"sink-{uuid.uuid4().hex[:6]}", "grid": grid.settings,
           "checkpoint": str(tmp / f"ckpt-{uuid.uuid4().hex[:6]}"), "pushInterval": 500,
           **options}
    config = SinkConnectorConfig.model_validate(raw)
    return SinkConnector(config, bootstrap_servers=bootstrap, space=grid.space)


def run_once(connector: SinkConnector, spark: Any) -> None:
    """Start, process everything the topics hold now, stop."""
    query = connector.start(spark)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
        connector.close()


@pytest.mark.parametrize("tasks", [1, 4])
def test_three_topics_into_three_caches_hold_each_keys_latest_value(
        grid: Grid, spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path, tasks: int) -> None:
    topics = [topic_factory(3) for _ in range(3)]
    for seed, topic in enumerate(topics):
        produce(kafka_bootstrap, topic, workload(seed, keys=300, count=3000))
    prefix = cache_prefix(grid)
    connector = sink(grid, kafka_bootstrap, tmp_path, topics=topics, cachePrefix=prefix,
                     shallProcessUpdates=True, **{"tasks.max": tasks,
                                                  "maxOffsetsPerTrigger": 4000})
    run_once(connector, spark)
    reports = list(connector.reports)
    assert sum(r.records for r in reports) == 9000
    assert sum(r.written for r in reports) == 9000
    assert len(reports) >= 2  # more than one batch: later batches overwrite earlier ones
    for topic in topics:
        want = grid.expected(latest(kafka_bootstrap, topic))
        assert len(want) > 200
        assert differences(want, grid.read(prefix + topic)) == []
    # the check sees one value changed (one nested field) and a key removed
    cache = prefix + topics[0]
    want = grid.expected(latest(kafka_bootstrap, topics[0]))
    key, value = sorted(want.items(), key=lambda kv: str(kv[0]))[0]
    changed = {**value, "address": {**value["address"], "zip": "00000"}}
    with grid.adapter() as adapter:
        adapter.apply(cache, [Write(key, changed)])
    assert differences(want, grid.read(cache)) == [f"{key!r}: {changed!r} != {value!r}"]
    other = sorted(want, key=str)[1]
    with grid.adapter() as adapter:
        adapter.apply(cache, [Write(other, None)])
    assert f"missing {other!r}" in differences(want, grid.read(cache))


def test_a_batch_applied_twice_changes_nothing(
        grid: Grid, spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    topic = topic_factory(3)
    produce(kafka_bootstrap, topic, workload(7, keys=100, count=1000))
    prefix = cache_prefix(grid)
    connector = sink(grid, kafka_bootstrap, tmp_path, topics=[topic], cachePrefix=prefix,
                     shallProcessUpdates=True, **{"tasks.max": 2})
    if grid.kind == "space":
        connector.start(spark).stop()  # opens the Space's adapter on the driver
    batch = spark.read.format("kafka").options(**{
        "kafka.bootstrap.servers": kafka_bootstrap, "subscribe": topic,
        "startingOffsets": "earliest"}).load()
    try:
        connector.process_batch(batch, 0)
        first = grid.read(prefix + topic)
        connector.process_batch(batch, 0)
        assert grid.read(prefix + topic) == first
    finally:
        connector.close()
    assert differences(grid.expected(latest(kafka_bootstrap, topic)), first) == []


def test_without_updates_nothing_held_is_overwritten_or_removed_and_with_them_tombstones_remove(
        grid: Grid, spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    topic = topic_factory(2)
    held_prefix, fresh_prefix = cache_prefix(grid), cache_prefix(grid)
    held = {"a": entity("a", 0), 1: entity(1, 0), "gone": entity("gone", 0)}
    with grid.adapter() as adapter:
        adapter.apply(held_prefix + topic, [Write(k, v) for k, v in held.items()])
        adapter.apply(fresh_prefix + topic, [Write(k, v) for k, v in held.items()])
    sent = [(key_bytes("a"), orjson.dumps(entity("a", 1))),   # an update: refused
            (key_bytes(1), None),                              # a removal: refused
            (key_bytes("gone"), None),
            (key_bytes("new"), None),                          # absent: nothing to do
            (key_bytes("new"), orjson.dumps(entity("new", 1))),  # created (first put)
            (key_bytes("new"), orjson.dumps(entity("new", 2))),  # an update: refused
            (key_bytes(9), orjson.dumps(entity(9, 1)))]
    produce(kafka_bootstrap, topic, sent)
    run_once(sink(grid, kafka_bootstrap, tmp_path, topics=[topic], cachePrefix=held_prefix,
                  shallProcessUpdates=False), spark)
    assert differences(grid.expected({**held, "new": entity("new", 1), 9: entity(9, 1)}),
                       grid.read(held_prefix + topic)) == []
    # a later batch updating what the first created changes nothing either
    produce(kafka_bootstrap, topic, [(key_bytes(9), orjson.dumps(entity(9, 2))),
                                     (key_bytes(9), None)])
    run_once(sink(grid, kafka_bootstrap, tmp_path, topics=[topic], cachePrefix=held_prefix,
                  shallProcessUpdates=False), spark)
    assert differences(grid.expected({**held, "new": entity("new", 1), 9: entity(9, 1)}),
                       grid.read(held_prefix + topic)) == []
    run_once(sink(grid, kafka_bootstrap, tmp_path, topics=[topic], cachePrefix=fresh_prefix,
                  shallProcessUpdates=True), spark)
    assert differences(grid.expected({"a": entity("a", 1), "new": entity("new", 2)}),
                       grid.read(fresh_prefix + topic)) == []


def test_key_policies_value_and_kafka(grid: Grid, spark: Any, kafka_bootstrap: str,
                                      topic_factory: Callable[..., str],
                                      tmp_path: Path) -> None:
    topic = topic_factory(1)  # one partition: Kafka's order is the order sent
    values = [{"region": f"r{i % 3}", "num": i % 5, "n": i} for i in range(40)]
    where = produce(kafka_bootstrap, topic, [(None, orjson.dumps(v)) for v in values])
    one, two, by_kafka = cache_prefix(grid), cache_prefix(grid), cache_prefix(grid)
    run_once(sink(grid, kafka_bootstrap, tmp_path, topics=[topic], cachePrefix=one,
                  shallProcessUpdates=True, keyPolicy="value", keyFields="region"), spark)
    run_once(sink(grid, kafka_bootstrap, tmp_path, topics=[topic], cachePrefix=two,
                  shallProcessUpdates=True, keyPolicy="value", keyFields=["region", "num"]),
             spark)
    run_once(sink(grid, kafka_bootstrap, tmp_path, topics=[topic], cachePrefix=by_kafka,
                  keyPolicy="kafka"), spark)
    by_region = {v["region"]: v for v in values}
    by_pair = {orjson.dumps([v["region"], v["num"]]).decode(): v for v in values}
    assert len(by_region) == 3 and len(by_pair) == 15
    assert differences(grid.expected(by_region), grid.read(one + topic)) == []
    assert differences(grid.expected(by_pair), grid.read(two + topic)) == []
    expected_kafka = {f"{topic}/{p}/{o}": v for (p, o), v in zip(where, values, strict=True)}
    assert len(expected_kafka) == 40
    assert differences(grid.expected(expected_kafka), grid.read(by_kafka + topic)) == []
