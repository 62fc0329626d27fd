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

Usage: python benchmarks/bench_connect_sink.py [--changes 100000] [--keys 5000]
    [--repeat 3] [--tasks 1 2] [--baselines-only]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson

from benchmarks._connect_bench import (
    CACHES,
    cache_of,
    create_topics,
    delete_topics,
    entry,
    names,
    produce_json,
    ratio,
    raw_sink_loop,
    summary,
)
from gridstream import stack
from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig
from gridstream.stack.hazelcast import HazelcastService

Side = Callable[[], dict[str, float]]


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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=5_000, help="distinct keys per topic")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2, help="per topic")
    parser.add_argument("--tasks", type=int, nargs="+", default=[1, 2],
                        help="tasks.max of the connector's runs")
    parser.add_argument("--baselines-only", action="store_true",
                        help="only the hand-written loop (no Spark)")
    args = parser.parse_args()
    if args.changes % CACHES:
        parser.error(f"--changes must be a multiple of {CACHES}")
    kafka, hz = stack.services(["kafka", "hazelcast"])
    assert isinstance(hz, HazelcastService)
    kafka.up()
    hz.up()
    bootstrap = kafka.address
    config = HazelcastGridConfig(cluster_name=hz.settings.cluster_name, members=(hz.address,))
    topics = names("bsink")
    created: list[str] = []
    loads = [os.getloadavg()[0]]
    with HazelcastAdapter(config) as grid:
        try:
            create_topics(bootstrap, topics, args.partitions)
            produce_json(bootstrap, topics, args.changes, args.keys)
            expected = expected_maps(topics, args.changes, args.keys)

            def raw() -> dict[str, float]:
                maps = {t: f"raw-{uuid.uuid4().hex[:6]}-{t}" for t in topics}
                created.extend(maps.values())
                run = raw_sink_loop(grid, topics, maps, bootstrap, args.changes)
                check_maps(grid, maps, expected, "raw_loop")
                return run

            sides: dict[str, Side] = {"raw_loop": raw}
            runs: dict[str, list[dict[str, float]]] = {s: [] for s in sides}
            order = list(sides)
            for r in range(args.repeat):
                for side in order if r % 2 == 0 else order[::-1]:
                    run = sides[side]()
                    runs[side].append(run)
                    print(json.dumps({"round": r, "side": side,
                                      **{k: round(v, 2) for k, v in run.items()}}),
                          file=sys.stderr, flush=True)
        finally:
            delete_topics(bootstrap, topics)
            for name in created:
                grid.client.get_map(name).blocking().destroy()
    loads.append(os.getloadavg()[0])
    result: dict[str, Any] = {
        "benchmark": "connect_sink", "changes": args.changes, "topics": CACHES,
        "keys_per_topic": args.keys, "partitions": args.partitions, "repeat": args.repeat,
        **{side: summary(r, args.changes) for side, r in runs.items()}}
    result["ratios"] = {f"{side}/raw_loop": ratio(result[side], result["raw_loop"])
                        for side in runs if side != "raw_loop"}
    result["load_1min"] = [round(v, 2) for v in loads]
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
