"""The sink connector on real Kafka, Spark and grids (the Space and Hazelcast).

Every check compares whole values: each cache must equal its topic's latest value per key
as read back from Kafka (``sink_helpers.latest``), and the comparison itself is shown to
fail when one entry differs.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from gridstream.connect.config import SinkConnectorConfig
from gridstream.connect.sink import SinkConnector
from gridstream.errors import RecordError
from gridstream.grid import Write
from tests.integration.support.child_output import await_line, start_piped
from tests.integration.support.sink_helpers import (
    Grid,
    Sent,
    cache_prefix,
    differences,
    entity,
    key_bytes,
    latest,
    make_grid,
    produce,
    read_topic,
    wait_equal,
    workload,
)

ROOT = Path(__file__).resolve().parents[2]


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
    connector.open()
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


def malformed_mix(seed: int) -> tuple[list[Sent], list[bool]]:
    """3,000 valid records and 1,200 bad ones, shuffled: values that are not JSON or not
    an object (on valid keys), keys that are not JSON, not a string or integer, or
    missing. Returns the records and which are bad."""
    rng = random.Random(seed)
    valid = workload(seed, keys=200, count=3000)
    bad: list[Sent] = []
    for i in range(400):
        good_key = key_bytes(f"k{i % 200}")
        bad.append((good_key, b"not json {" + str(i).encode()))
        bad.append((good_key, [b"[1, 2]", b"42", b'"text"', b"null"][i % 4]))
        bad.append(([b"\xff\xfe", b"1.5", b"true", b"{}", None][i % 5],
                    orjson.dumps(entity(i, i))))
    mixed = [(r, False) for r in valid] + [(r, True) for r in bad]
    rng.shuffle(mixed)
    return [r for r, _ in mixed], [b for _, b in mixed]


def latest_sent(records: list[Sent]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key, value in records:
        k = orjson.loads(key) if key is not None else None
        if value is None:
            out.pop(k, None)
        else:
            out[k] = orjson.loads(value)
    return out


def test_malformed_records_stop_or_are_skipped_or_dead_lettered(
        grid: Grid, spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    topic, dead = topic_factory(3), topic_factory(1)
    records, is_bad = malformed_mix(5)
    where = produce(kafka_bootstrap, topic, records)
    bad_at = {w for w, b in zip(where, is_bad, strict=True) if b}
    assert len(bad_at) == 1200
    valid = [r for r, b in zip(records, is_bad, strict=True) if not b]
    want = grid.expected(latest_sent(valid))

    # STOP_TASK: fails naming the first bad record, applies nothing, commits nothing
    first = min(bad_at)
    stop_prefix = cache_prefix(grid)
    ckpt = tmp_path / "ckpt-stop"
    for _ in range(2):  # a restart from the checkpoint meets the same record
        connector = sink(grid, kafka_bootstrap, tmp_path, topics=[topic],
                         cachePrefix=stop_prefix, checkpoint=str(ckpt))
        with pytest.raises(Exception) as caught:
            run_once(connector, spark)
        assert isinstance(connector.failure, RecordError), caught.value
        assert f"{topic}[{first[0]}]@{first[1]}: " in str(connector.failure)
        assert "1200 bad record(s)" in str(connector.failure)
        assert not (ckpt / "commits" / "0").exists()
        assert grid.read(stop_prefix + topic) == {}

    # LOG_ONLY: every valid record applied, every bad one counted
    skip_prefix = cache_prefix(grid)
    connector = sink(grid, kafka_bootstrap, tmp_path, topics=[topic], cachePrefix=skip_prefix,
                     shallProcessUpdates=True, errorHandlingPolicy="LOG_ONLY")
    run_once(connector, spark)
    assert sum(r.skipped for r in connector.reports) == 1200
    assert sum(r.written for r in connector.reports) == 3000
    assert differences(want, grid.read(skip_prefix + topic)) == []

    # DEAD_LETTER: every valid record applied, every bad one in the dead-letter topic
    dlq_prefix = cache_prefix(grid)
    connector = sink(grid, kafka_bootstrap, tmp_path, topics=[topic], cachePrefix=dlq_prefix,
                     shallProcessUpdates=True, errorHandlingPolicy="DEAD_LETTER",
                     deadLetterTopic=dead)
    run_once(connector, spark)
    assert sum(r.dead_lettered for r in connector.reports) == 1200
    assert differences(want, grid.read(dlq_prefix + topic)) == []
    letters = read_topic(kafka_bootstrap, dead)
    assert len(letters) == 1200
    sent_at = dict(zip(where, records, strict=True))
    found = set()
    for msg in letters:
        headers = {k: v.decode() for k, v in msg.headers()}
        at = (int(headers["gs.error.partition"]), int(headers["gs.error.offset"]))
        assert headers["gs.error.topic"] == topic
        assert headers["gs.error.connector"] == connector.name
        assert headers["gs.error.stage"] in {"key", "value"}
        assert headers["gs.error.reason"].startswith(headers["gs.error.stage"] + ": ")
        assert (msg.key(), msg.value()) == sent_at[at]
        found.add(at)
    assert found == bad_at


def test_a_poisoned_record_named_in_skip_records_is_passed_over_and_recorded(
        grid: Grid, spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    topic = topic_factory(1)
    records = workload(3, keys=50, count=300, tombstones=False)
    poisoned = (key_bytes("k7"), b"not json {")
    where = produce(kafka_bootstrap, topic, [*records[:100], poisoned, *records[100:]])
    at = f"{topic}[{where[100][0]}]@{where[100][1]}"
    prefix, ckpt = cache_prefix(grid), tmp_path / "ckpt-skip"

    def connector(**more: Any) -> SinkConnector:
        return sink(grid, kafka_bootstrap, tmp_path, topics=[topic], cachePrefix=prefix,
                    checkpoint=str(ckpt), shallProcessUpdates=True, **more)

    stopped = connector()  # STOP_TASK: the failure says how to pass over this one record
    with pytest.raises(Exception):  # noqa: B017, PT011 - what matters is the failure kept
        run_once(stopped, spark)
    assert isinstance(stopped.failure, RecordError)
    assert f'skipRecords = ["{at}"]' in str(stopped.failure), stopped.failure
    passed = connector(skipRecords=[at])
    run_once(passed, spark)
    reports = list(passed.reports)
    assert sum(r.skipped for r in reports) == 1
    assert sum(r.written for r in reports) == 300
    assert any(f"skipped by skipRecords: {at}" in r.line() for r in reports)
    assert differences(grid.expected(latest_sent(records)), grid.read(prefix + topic)) == []
    lines = [orjson.loads(line) for line in (ckpt / "skipped.jsonl").read_text().splitlines()]
    assert [(line["flow"], line["record"]) for line in lines] == [(passed.name, at)]


def _child(config: SinkConnectorConfig, bootstrap: str) -> tuple[Any, Any]:
    return start_piped([sys.executable, "-m", "tests.integration.support.sink_connector_child",
                        config.model_dump_json(), bootstrap], ROOT)


def kill_and_resume(grid: Grid, bootstrap: str, topic_factory: Callable[..., str],
                    tmp: Path, *, kills: int, records: int, seed: int) -> list[str]:
    """Three topics fed while the connector's driver (a child process) is SIGKILLed
    ``kills`` times mid-stream and restarted from its checkpoint; at the end each cache
    must equal its topic's latest values. Returns the child's lines."""
    topics = [topic_factory(3) for _ in range(3)]
    prefix = cache_prefix(grid)
    grid.release_space()  # the connector's driver owns the Space (opened writable)
    config = SinkConnectorConfig.model_validate({
        "name": "killed", "grid": grid.settings, "checkpoint": str(tmp / "ckpt-killed"),
        "topics": topics, "cachePrefix": prefix, "shallProcessUpdates": True,
        "tasks.max": 2, "pushInterval": 500, "maxOffsetsPerTrigger": 900})
    chunks = [workload(seed + i, keys=400, count=records) for i in range(len(topics))]
    step = records // 10
    for topic, chunk in zip(topics, chunks, strict=True):  # some before the first start
        produce(bootstrap, topic, chunk[:step])

    def feed() -> None:
        for start in range(step, records, step):
            for topic, chunk in zip(topics, chunks, strict=True):
                produce(bootstrap, topic, chunk[start:start + step])
            time.sleep(0.5)

    feeder = threading.Thread(target=feed)
    feeder.start()
    rng, seen = random.Random(seed), []
    try:
        for _ in range(kills):
            process, lines = _child(config, bootstrap)
            try:
                # a batch reported with the lag from the query's progress (so not the
                # first batch of this run: the kill lands mid-stream)
                await_line(process, lines, seen,
                           lambda line: " batch " in line and ", lag " in line)
                time.sleep(rng.uniform(0.0, 2.0))
            finally:  # killed whatever happened: no driver outlives the test
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(60)
            seen.append("--- killed ---\n")
    finally:
        feeder.join()
    process, lines = _child(config, bootstrap)
    try:
        want = {prefix + t: grid.expected(latest(bootstrap, t)) for t in topics}

        def alive() -> None:
            while not lines.empty():
                seen.append(lines.get())
            assert process.poll() is None, "".join(seen[-40:])

        wait_equal(grid, want, timeout_s=240, alive=alive)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(60)
    return seen


@pytest.mark.slow  # a fault run: 45-100 s (make test-slow)
def test_driver_killed_mid_stream_resumes_to_each_keys_latest_value(
        grid: Grid, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    seen = kill_and_resume(grid, kafka_bootstrap, topic_factory, tmp_path, kills=2,
                           records=3000, seed=31)
    assert "".join(seen).count("--- killed ---") == 2
    # the runner's progress lines carry the lag from the query's progress
    assert any(" batch " in line and ", lag " in line for line in seen), seen[-20:]


@pytest.mark.slow
def test_driver_killed_ten_times_resumes_to_each_keys_latest_value(
        grid: Grid, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    seen = kill_and_resume(grid, kafka_bootstrap, topic_factory, tmp_path, kills=10,
                           records=20_000, seed=47)
    assert "".join(seen).count("--- killed ---") == 10


def test_the_runner_commits_a_sinks_positions_to_its_consumer_group(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    """Kafka's lag tools read consumer groups: run by the runner, a sink commits each
    completed batch's end offsets to ``connect-<name>`` (the checkpoint stays the truth).
    Without the commit the group has no offsets and the wait below fails."""
    import io

    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    from gridstream.connect.sink.positions import group_id
    from gridstream.spark.runner import PipelineRunner

    topic = topic_factory(2)
    where = produce(kafka_bootstrap, topic, workload(7, keys=50, count=400))
    ends = {p: max(o for q, o in where if q == p) + 1 for p, _ in where}
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    committed: dict[int, int] = {}
    with make_grid("space", tmp_path) as grid:
        connector = sink(grid, kafka_bootstrap, tmp_path, topics=[topic],
                         cachePrefix=cache_prefix(grid))
        out = io.StringIO()
        runner = PipelineRunner([connector], lambda: spark, out=out, poll_s=0.2)

        def watch() -> None:  # the runner takes the main thread (its signal handlers)
            deadline = time.monotonic() + 120
            try:
                while time.monotonic() < deadline and committed != ends:
                    request = ConsumerGroupTopicPartitions(
                        group_id(connector.name), [TopicPartition(topic, p) for p in ends])
                    answer = admin.list_consumer_group_offsets([request])
                    got = next(iter(answer.values())).result()
                    committed.clear()
                    committed.update({tp.partition: tp.offset for tp in got.topic_partitions
                                      if tp.offset >= 0})
                    time.sleep(0.5)
            finally:
                runner.stop()

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        assert runner.run() == 0
        watcher.join(30)
    assert committed == ends
    import re  # the runner printed (and took) the reports: every record was read
    assert sum(int(n) for n in re.findall(r"batch \d+: (\d+) records", out.getvalue())) == 400
