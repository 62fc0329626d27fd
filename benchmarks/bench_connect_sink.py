"""The sink connector (Kafka topics → Hazelcast maps) against a hand-written loop, same run.

``--changes`` JSON records (key: the entry's id as a JSON string, value: a ~130-byte JSON
object; ``--keys`` ids per topic, so keys are updated again and again) are produced once
over 4 topics (``--partitions`` each). Then, in each round, every side reads all of them
into 4 fresh Hazelcast maps of its own:

- ``raw_loop``: one confluent-kafka consumer (read_committed, every partition assigned
  from the start) calling ``consume(1000)``, JSON-decoding each key and value, and one
  ``put_all`` per topic of the batch's last value per key (``HazelcastJsonValue``, as the
  adapter stores values) — the loop one would write by hand;
- ``sink_tasks1`` / ``sink_tasks2``: the sink connector (JSON converter, ``keyPolicy``
  key, ``shallProcessUpdates`` on) with ``tasks.max`` 1 and 2, a fresh checkpoint each.

Every side's maps are then checked: each holds ``--keys`` entries, equal to the last
value produced per key. Start-up and drain are measured apart (see
``benchmarks/_connect_bench.py``); rates and ratios are of the drain. ``--repeat``
rounds, the order of the sides reversed every other round; medians (and best-of).
Prints JSON.

Usage: python benchmarks/bench_connect_sink.py [--changes 50000] [--keys 5000]
    [--repeat 3] [--warmup 1] [--tasks 1 2] [--baselines-only] [--smoke]
(``--smoke``: 40 changes over 5 keys per topic, one round, no warm-up, every side:
seconds after Spark's start, and the figures mean nothing.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson

from benchmarks._connect_bench import (
    CACHES,
    Side,
    cache_of,
    create_topics,
    delete_topics,
    drain_query,
    entry,
    names,
    parse_common,
    produce_json,
    ratio,
    raw_sink_loop,
    rounds,
    services_up,
    spark_unless,
    summary,
)
from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig


def expected_maps(topics: list[str], changes: int, keys: int) -> dict[str, dict[str, Any]]:
    """Per topic, the last value produced per key."""
    latest: dict[str, dict[str, Any]] = {t: {} for t in topics}
    for i in range(changes):
        value = entry(i, keys)
        latest[cache_of(i, topics)][value["id"]] = value
    return latest


def check_maps(grid: HazelcastAdapter, maps: dict[str, str],
               expected: dict[str, dict[str, Any]], side: str) -> None:
    for topic, name in maps.items():
        held = {k: orjson.loads(v.to_string()) for k, v in
                grid.client.get_map(name).blocking().entry_set()}
        if held != expected[topic]:
            wrong = sum(1 for k, v in expected[topic].items() if held.get(k) != v)
            raise AssertionError(f"{side}: map {name} holds {len(held)} entries, "
                                 f"{wrong} of {len(expected[topic])} differ from the topic")


class SinkSide:
    """The sink connector with ``tasks.max`` tasks: a fresh checkpoint and maps per run,
    started and run until its reports account for every record (all in one batch or
    more: ``maxOffsetsPerTrigger`` keeps its default)."""

    def __init__(self, spark: Any, bootstrap: str, grid: dict[str, Any], topics: list[str],
                 tasks: int, root: str) -> None:
        self.spark, self.bootstrap, self.grid = spark, bootstrap, grid
        self.topics, self.tasks, self.root = topics, tasks, root
        self.maps: dict[str, str] = {}
        self.last: Any = None

    def run(self, expected: int) -> dict[str, float]:
        from gridstream.connect.config import SinkConnectorConfig
        from gridstream.connect.sink import SinkConnector

        prefix = f"sink{self.tasks}-{uuid.uuid4().hex[:6]}-"
        self.maps = {t: prefix + t for t in self.topics}
        config = SinkConnectorConfig.model_validate({
            "name": f"bench-{uuid.uuid4().hex[:8]}", "grid": self.grid,
            "checkpoint": tempfile.mkdtemp(prefix="checkpoint-", dir=self.root),
            "topics": self.topics, "cachePrefix": prefix, "tasks.max": self.tasks,
            "shallProcessUpdates": True, "keyPolicy": "key"})
        connector = SinkConnector(config, bootstrap_servers=self.bootstrap)
        self.last = connector
        try:
            run = drain_query(lambda: connector.start(self.spark),
                              lambda: list(connector.reports), lambda: connector.failure,
                              expected)
        finally:
            connector.close()
        run["foreach_batch_s"] = sum(r.seconds for r in connector.reports)
        return run


def breakdown(spark: Any, bootstrap: str, grid: HazelcastAdapter, grid_settings: dict[str, Any],
              topics: list[str], changes: int, tasks: int, root: str) -> dict[str, Any]:
    """Where a sink run's time goes: one more run with the apply step timed (the Spark job
    that spreads the rows over the tasks and applies them), the rest of its batches being
    the decode job (read Kafka, decode in Python, count by status); then the same Python
    steps alone on the same records, in this process, without Spark: the decode
    (``decode_batches`` over one Arrow batch), the fold and the adapter's ``apply``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from confluent_kafka import Consumer, TopicPartition

    from gridstream.connect.sink import connector as sink_connector
    from gridstream.connect.sink.decode import OK, decode_batches
    from gridstream.spark import grid_apply as sink_apply

    applied: list[float] = []
    original = sink_connector.apply_tasks

    def timed_apply(*a: Any, **k: Any) -> int:
        started = time.perf_counter()
        try:
            return original(*a, **k)
        finally:
            applied.append(time.perf_counter() - started)

    side = SinkSide(spark, bootstrap, grid_settings, topics, tasks, root)
    sink_connector.apply_tasks = timed_apply  # type: ignore[assignment]
    try:
        run = side.run(changes)
    finally:
        sink_connector.apply_tasks = original  # type: ignore[assignment]
    out: dict[str, Any] = {"drain_s": round(run["drain_s"], 2), "batches": run["batches"],
                           "foreach_batch_s": round(run["foreach_batch_s"], 2),
                           "apply_job_s": round(sum(applied), 2),
                           "decode_job_s": round(run["foreach_batch_s"] - sum(applied), 2)}
    # the Python steps alone, on the same records
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False})
    parts = [TopicPartition(t, p, 0) for t in topics
             for p in consumer.list_topics(t, timeout=30).topics[t].partitions]
    consumer.assign(parts)
    msgs: list[Any] = []
    while len(msgs) < changes:
        msgs += [m for m in consumer.consume(10_000, timeout=5) if m.error() is None]
    consumer.close()
    batch = pa.RecordBatch.from_pydict({
        "key": pa.array([m.key() for m in msgs], pa.binary()),
        "value": pa.array([m.value() for m in msgs], pa.binary()),
        "topic": pa.array([m.topic() for m in msgs], pa.string()),
        "partition": pa.array([m.partition() for m in msgs], pa.int32()),
        "offset": pa.array([m.offset() for m in msgs], pa.int64()),
        "timestamp": pa.array([m.timestamp()[1] * 1000 for m in msgs], pa.timestamp("us"))})
    connector = side.last
    started = time.perf_counter()
    decoded = pa.Table.from_batches(list(decode_batches(connector.spec)(iter([batch]))))
    decode_s = time.perf_counter() - started
    ok = decoded.filter(pc.equal(decoded.column("status"), OK))
    rows = list(zip(ok.column("cache").to_pylist(), ok.column("key").to_pylist(),
                    ok.column("value").to_pylist(), strict=True))
    started = time.perf_counter()
    writes = sink_apply.fold_writes(rows, updates=True)
    fold_s = time.perf_counter() - started
    prefix = f"bd-{uuid.uuid4().hex[:6]}-"
    writes = {prefix + cache: w for cache, w in writes.items()}
    started = time.perf_counter()
    sink_apply.apply_all(grid, writes, updates=True)
    apply_s = time.perf_counter() - started
    for cache in writes:
        grid.client.get_map(cache).blocking().destroy()
    out["maps"] = list(side.maps.values())
    out["python_alone_s"] = {"decode": round(decode_s, 2), "fold": round(fold_s, 2),
                             "apply_put_all": round(apply_s, 2)}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, nargs="+", default=[1, 2],
                        help="tasks.max of the connector's runs")
    args = parse_common(parser, "topic", 50_000, argv)
    bootstrap, hz = services_up()
    config = HazelcastGridConfig(cluster_name=hz.settings.cluster_name, members=(hz.address,))
    topics = names("bsink")
    created: list[str] = []
    loads = [os.getloadavg()[0]]
    result: dict[str, Any] = {
        "benchmark": "connect_sink", "changes": args.changes, "topics": CACHES,
        "keys_per_topic": args.keys, "partitions": args.partitions, "repeat": args.repeat}
    spark = spark_unless(args.baselines_only, "bench-connect-sink", result)
    root = tempfile.mkdtemp(prefix="bench-connect-sink-")
    grid_settings = {"kind": "hazelcast", "cluster_name": config.cluster_name,
                     "members": list(config.members)}
    with HazelcastAdapter(config) as grid:
        try:
            create_topics(bootstrap, topics, args.partitions)
            produce_json(bootstrap, topics, args.changes, args.keys)
            expected = expected_maps(topics, args.changes, args.keys)

            def checked(maps: dict[str, str], side: str) -> None:
                """Check a side's maps, then destroy them: a member's heap holds every
                map and its event journal, and rounds would fill it."""
                try:
                    check_maps(grid, maps, expected, side)
                finally:
                    for name in maps.values():
                        grid.client.get_map(name).blocking().destroy()

            def raw() -> dict[str, float]:
                maps = {t: f"raw-{uuid.uuid4().hex[:6]}-{t}" for t in topics}
                created.extend(maps.values())
                run = raw_sink_loop(grid, topics, maps, bootstrap, args.changes)
                checked(maps, "raw_loop")
                return run

            def sink(tasks: int) -> Side:
                side = SinkSide(spark, bootstrap, grid_settings, topics, tasks, root)

                def run() -> dict[str, float]:
                    try:
                        return side.run(args.changes)
                    finally:
                        created.extend(side.maps.values())
                        if side.maps:
                            checked(side.maps, f"sink_tasks{tasks}")
                return run

            sides: dict[str, Side] = {"raw_loop": raw}
            if spark is not None:
                sides.update({f"sink_tasks{n}": sink(n) for n in args.tasks})
            runs = rounds(args.repeat, args.warmup, None, sides)
            if args.breakdown and spark is not None:
                result["breakdown"] = {
                    f"sink_tasks{n}": breakdown(spark, bootstrap, grid, grid_settings, topics,
                                                args.changes, n, root) for n in args.tasks}
                for side in result["breakdown"].values():
                    created.extend(side.pop("maps", []))
        finally:
            if spark is not None:
                spark.stop()
            shutil.rmtree(root, ignore_errors=True)
            delete_topics(bootstrap, topics)
            for name in created:
                grid.client.get_map(name).blocking().destroy()
    loads.append(os.getloadavg()[0])
    result.update({side: summary(r, args.changes) for side, r in runs.items()})
    result["ratios"] = {f"{side}/raw_loop": ratio(result[side], result["raw_loop"])
                        for side in runs if side != "raw_loop"}
    result["load_1min"] = [round(v, 2) for v in loads]
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
