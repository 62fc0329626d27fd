"""The source connector (grid caches → Kafka) against hand-written baselines, same run.

(a) **The Space.** ``--changes`` single-entry writes over 4 types (caches) of a fresh
    embedded Space (``--keys`` ids per type, so keys are updated again and again), the
    Space closed, then its log drained to Kafka by the mirror (``Mirror`` over
    ``open_log_reader``, ``KafkaSyncEndpoint`` exactly-once, the settings of
    ``gridstream mirror``: batches of ≤ 10 000 operations, one transaction each) and by
    the source connector (``failoverPolicy`` BACKLOG, resumed from a checkpoint taken
    before the workload was written, so that it drains the same backlog of changes, as
    the mirror does; exactly-once and at-least-once).
(b) **Hazelcast.** The same changes ``put_all`` into 4 fresh maps, then drained from their
    event journals by a raw loop (the adapter's ``read_changes`` + a confluent-kafka
    producer with the writer's settings: idempotent, acks=all, lz4; transactional — one
    transaction per read — to compare with exactly-once, idempotent to compare with
    at-least-once) and by the source connector (as in (a)).
(c) Exactly-once against at-least-once (``deliveryGuarantee``) for the connector, on both.

Every side writes to topics of its own (``--partitions`` each, created beforehand) and
its output is counted by a read_committed consumer (exactly-once sides: exactly the
changes). Start-up and drain are measured apart (see ``benchmarks/_connect_bench.py``);
rates and ratios are of the drain. ``--repeat`` rounds, the order of the sides reversed
every other round; the medians (and best-of) are reported. Prints JSON.

Usage: python benchmarks/bench_connect_source.py [--changes 100000] [--keys 5000]
    [--repeat 3] [--grids space hazelcast] [--baselines-only]
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._connect_bench import (
    CACHES,
    cache_of,
    count_records,
    create_topics,
    delete_topics,
    entry,
    hazelcast_workload,
    names,
    ratio,
    raw_journal_drain,
    summary,
)
from gridstream import stack
from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig
from gridstream.mirror import KafkaSyncEndpoint, Mirror
from gridstream.mirror.kafka import TopicSettings
from gridstream.model import SpaceDocument
from gridstream.operations import PropertySpec, TypeDescriptor
from gridstream.space import Space, open_log_reader
from gridstream.stack.hazelcast import HazelcastService

FIXED = (PropertySpec("id", "str"), PropertySpec("name", "str"), PropertySpec("qty", "int"),
         PropertySpec("price", "float"), PropertySpec("active", "bool"),
         PropertySpec("note", "str"))
Side = Callable[[], dict[str, float]]


def space_workload(data_dir: str, caches: list[str], mirror_topics: dict[str, str],
                   changes: int, keys: int) -> None:
    space = Space.embedded("bench", data_dir=data_dir)
    try:
        for cache in caches:
            space.introduce_type(TypeDescriptor(name=cache, id_property="id",
                                                topic=mirror_topics[cache], fixed=FIXED))
        for i in range(changes):
            space.write(SpaceDocument(cache_of(i, caches), entry(i, keys)))
    finally:
        space.close()


def mirror_drain(data_dir: str, bootstrap: str, expected: int) -> dict[str, float]:
    """The mirror as ``gridstream mirror`` runs it (its defaults), from a fresh name
    (the log's start): start-up = ``open()``, drain = ``run_once()`` until caught up."""
    reader = open_log_reader(data_dir)
    endpoint = KafkaSyncEndpoint(bootstrap, exactly_once=True,
                                 topics=TopicSettings(create=False))
    mirror = Mirror(reader, endpoint, name=f"bench-{uuid.uuid4().hex[:8]}",
                    max_batch_operations=10_000, max_batch_ms=2, poll_interval_ms=5)
    try:
        started = time.perf_counter()
        mirror.open()
        ready = time.perf_counter()
        moved = 0
        while moved < expected:
            delivered = mirror.run_once()
            if not delivered:
                raise AssertionError(f"the mirror stopped after {moved} of {expected}")
            moved += delivered
        done = time.perf_counter()
    finally:
        mirror.stop()
        reader.close()
    return {"startup_s": ready - started, "drain_s": done - ready, "records": moved}


def _check(counts: dict[str, int], expected: int, exact: bool, side: str) -> None:
    total = sum(counts.values())
    if total < expected or (exact and total != expected):
        raise AssertionError(f"{side}: {total} records in Kafka, expected "
                             f"{'exactly ' if exact else 'at least '}{expected}")


def _rounds(repeat: int, prepare: Callable[[], None],
            sides: dict[str, Side]) -> dict[str, list[dict[str, float]]]:
    """Each round prepares a fresh workload, then runs every side on it, in the given
    order or reversed (odd rounds)."""
    runs: dict[str, list[dict[str, float]]] = {s: [] for s in sides}
    order = list(sides)
    for r in range(repeat):
        prepare()
        for side in order if r % 2 == 0 else order[::-1]:
            run = sides[side]()
            runs[side].append(run)
            print(json.dumps({"round": r, "side": side,
                              **{k: round(v, 2) for k, v in run.items()}}),
                  file=sys.stderr, flush=True)
    return runs


class SpaceRound:
    """One fresh Space workload per round, drained by every side of (a)."""

    def __init__(self, bootstrap: str, changes: int, keys: int, partitions: int) -> None:
        self.bootstrap, self.changes, self.keys = bootstrap, changes, keys
        self.partitions = partitions
        self.root = tempfile.mkdtemp(prefix="bench-connect-space-")
        self.topics: list[str] = []
        self.data_dir = ""
        self.caches: list[str] = []

    def fresh(self) -> None:
        self.data_dir = tempfile.mkdtemp(dir=self.root)
        self.caches = names("bsrc")
        mirror_topics = {c: f"m-{c}" for c in self.caches}
        create_topics(self.bootstrap, mirror_topics.values(), self.partitions)
        self.topics += mirror_topics.values()
        space_workload(self.data_dir, self.caches, mirror_topics, self.changes, self.keys)

    def mirror(self) -> dict[str, float]:
        run = mirror_drain(self.data_dir, self.bootstrap, self.changes)
        _check(count_records(self.bootstrap, [f"m-{c}" for c in self.caches]),
               self.changes, True, "mirror")
        return run

    def close(self) -> None:
        delete_topics(self.bootstrap, self.topics)
        shutil.rmtree(self.root, ignore_errors=True)


class HazelcastRound:
    """Fresh maps per round, filled once, drained by every side of (b)."""

    def __init__(self, grid: HazelcastAdapter, bootstrap: str, changes: int, keys: int,
                 partitions: int) -> None:
        self.grid, self.bootstrap = grid, bootstrap
        self.changes, self.keys, self.partitions = changes, keys, partitions
        self.caches: list[str] = []
        self.all_caches: list[str] = []
        self.topics: list[str] = []
        self.starts: dict[str, Any] = {}

    def fresh(self) -> None:
        self.caches = names("bsrc")
        self.all_caches += self.caches
        # the maps exist (one put each) before the positions are taken; the workload
        # follows, so every side drains exactly ``changes`` changes
        for cache in self.caches:
            hazelcast_workload(self.grid, [cache], 1, 1)
        self.starts = {c: self.grid.end_position(c) for c in self.caches}
        started = time.perf_counter()
        hazelcast_workload(self.grid, self.caches, self.changes, self.keys)
        self.write_s = time.perf_counter() - started

    def raw(self, transactional: bool) -> dict[str, float]:
        topics = {c: f"r{'t' if transactional else 'i'}-{c}" for c in self.caches}
        create_topics(self.bootstrap, topics.values(), self.partitions)
        self.topics += topics.values()
        run = raw_journal_drain(self.grid, self.starts, topics, self.bootstrap, self.changes,
                                transactional=transactional)
        _check(count_records(self.bootstrap, list(topics.values())), self.changes, True,
               "raw")
        return run

    def close(self) -> None:
        delete_topics(self.bootstrap, self.topics)
        for cache in self.all_caches:
            self.grid.client.get_map(cache).blocking().destroy()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=5_000, help="distinct keys per cache")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2, help="per topic")
    parser.add_argument("--grids", nargs="+", choices=["space", "hazelcast"],
                        default=["space", "hazelcast"])
    parser.add_argument("--baselines-only", action="store_true",
                        help="only the hand-written sides (no Spark)")
    args = parser.parse_args()
    if args.changes % CACHES:
        parser.error(f"--changes must be a multiple of {CACHES}")
    kafka, hz = stack.services(["kafka", "hazelcast"])
    assert isinstance(hz, HazelcastService)
    kafka.up()
    hz.up()
    bootstrap = kafka.address
    result: dict[str, Any] = {"benchmark": "connect_source", "changes": args.changes,
                              "caches": CACHES, "keys_per_cache": args.keys,
                              "repeat": args.repeat, "partitions": args.partitions}
    loads = [os.getloadavg()[0]]
    if "space" in args.grids:
        space = SpaceRound(bootstrap, args.changes, args.keys, args.partitions)
        try:
            runs = _rounds(args.repeat, space.fresh, {"mirror_exactly_once": space.mirror})
        finally:
            space.close()
        result["space"] = {side: summary(r, args.changes) for side, r in runs.items()}
        loads.append(os.getloadavg()[0])
    if "hazelcast" in args.grids:
        config = HazelcastGridConfig(cluster_name=hz.settings.cluster_name,
                                     members=(hz.address,))
        with HazelcastAdapter(config) as grid:
            round_ = HazelcastRound(grid, bootstrap, args.changes, args.keys, args.partitions)
            try:
                runs = _rounds(args.repeat, round_.fresh, {
                    "raw_transactional": lambda: round_.raw(True),
                    "raw_idempotent": lambda: round_.raw(False)})
            finally:
                round_.close()
        hz_result = {side: summary(r, args.changes) for side, r in runs.items()}
        hz_result["ratios"] = {"raw_idempotent/raw_transactional": ratio(
            hz_result["raw_idempotent"], hz_result["raw_transactional"])}
        result["hazelcast"] = hz_result
        loads.append(os.getloadavg()[0])
    result["load_1min"] = [round(v, 2) for v in loads]
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
