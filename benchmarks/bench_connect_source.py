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

Usage: python benchmarks/bench_connect_source.py [--changes 40000] [--keys 5000]
    [--repeat 3] [--warmup 1] [--grids space hazelcast] [--baselines-only] [--smoke]
(``--smoke``: 40 changes, each key of a cache written once, one round, no warm-up, every
side: seconds after Spark's start, and the figures mean nothing.)
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._connect_bench import (
    CACHES,
    cache_of,
    count_records,
    create_topics,
    delete_topics,
    drain_query,
    entry,
    hazelcast_workload,
    names,
    parse_common,
    prerun,
    ratio,
    raw_journal_drain,
    rounds,
    services_up,
    spark_unless,
    summary,
)
from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig
from gridstream.grid.space import SpaceAdapter, SpaceGridConfig
from gridstream.mirror import KafkaEndpointConfig, KafkaSyncEndpoint, Mirror
from gridstream.mirror.config import TopicSettings
from gridstream.model import SpaceDocument
from gridstream.operations import PropertySpec, TypeDescriptor
from gridstream.space import Space, open_log_reader

FIXED = (PropertySpec("id", "str"), PropertySpec("name", "str"), PropertySpec("qty", "int"),
         PropertySpec("price", "float"), PropertySpec("active", "bool"),
         PropertySpec("note", "str"))


def space_types(data_dir: str, caches: list[str], mirror_topics: dict[str, str]) -> None:
    """A fresh Space with the caches' types (their topics: the mirror's)."""
    space = Space.embedded("bench", data_dir=data_dir)
    try:
        for cache in caches:
            space.introduce_type(TypeDescriptor(name=cache, id_property="id",
                                                topic=mirror_topics[cache], fixed=FIXED))
    finally:
        space.close()


def space_workload(data_dir: str, caches: list[str], changes: int, keys: int) -> None:
    space = Space.embedded("bench", data_dir=data_dir)
    try:
        for i in range(changes):
            space.write(SpaceDocument(cache_of(i, caches), entry(i, keys)))
    finally:
        space.close()


def mirror_drain(data_dir: str, bootstrap: str, expected: int) -> dict[str, float]:
    """The mirror as ``gridstream mirror`` runs it (its defaults), from a fresh name
    (the log's start): start-up = ``open()``, drain = ``run_once()`` until caught up."""
    reader = open_log_reader(data_dir)
    endpoint = KafkaSyncEndpoint(KafkaEndpointConfig(
        bootstrap_servers=bootstrap, exactly_once=True, topics=TopicSettings(create=False)))
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


class SourceSide:
    """The source connector on one grid with one ``deliveryGuarantee``: per round a fresh
    checkpoint and topics, started once before the workload (so that it resumes, under
    BACKLOG, from the positions the workload starts at), then run until it drained it."""

    def __init__(self, spark: Any, bootstrap: str, grid: dict[str, Any], guarantee: str,
                 partitions: int, root: str) -> None:
        self.spark, self.bootstrap, self.grid = spark, bootstrap, grid
        self.guarantee, self.partitions, self.root = guarantee, partitions, root
        self.topics: list[str] = []
        self.round_topics: list[str] = []
        self.checkpoint, self.prefix, self.caches = "", "", [""]

    def _connector(self) -> Any:
        from gridstream.connect.config import SourceConnectorConfig
        from gridstream.connect.source import SourceConnector

        config = SourceConnectorConfig.model_validate({
            "name": f"bench-{uuid.uuid4().hex[:8]}", "grid": self.grid,
            "checkpoint": self.checkpoint, "failoverPolicy": "BACKLOG",
            "shallLoadInitialData": False, "deliveryGuarantee": self.guarantee,
            "topicPrefix": self.prefix, "topic.creation.default.partitions": self.partitions,
            "cacheWhitelist": [re.escape(c) for c in self.caches]})
        return SourceConnector(config, bootstrap_servers=self.bootstrap)

    def prepare(self, caches: list[str]) -> None:
        self.caches = caches
        self.checkpoint = tempfile.mkdtemp(prefix="checkpoint-", dir=self.root)
        self.prefix = f"s{self.guarantee[0]}-"
        self.round_topics = [self.prefix + c for c in caches]
        create_topics(self.bootstrap, self.round_topics, self.partitions)
        self.topics += self.round_topics
        connector = self._connector()
        try:
            prerun(lambda: connector.start(self.spark), lambda: connector.failure)
        finally:
            connector.close()

    def run(self, expected: int) -> dict[str, float]:
        connector = self._connector()
        try:
            run = drain_query(lambda: connector.start(self.spark),
                              lambda: list(connector.reports), lambda: connector.failure,
                              expected)
        finally:
            connector.close()
        _check(count_records(self.bootstrap, self.round_topics), expected,
               self.guarantee == "exactly_once", f"connector {self.guarantee}")
        return run


class SpaceRound:
    """One fresh Space per round: its types, the connectors' checkpoints, then the
    workload, drained by every side of (a)."""

    def __init__(self, bootstrap: str, changes: int, keys: int, partitions: int,
                 root: str, connectors: list[SourceSide]) -> None:
        self.bootstrap, self.changes, self.keys = bootstrap, changes, keys
        self.partitions, self.root, self.connectors = partitions, root, connectors
        self.topics: list[str] = []
        self.data_dir = tempfile.mkdtemp(dir=root)
        self.caches: list[str] = []
        self.starts: dict[str, Any] = {}

    def grid(self) -> dict[str, Any]:
        return {"kind": "space", "data_dir": self.data_dir, "space_name": "bench"}

    def fresh(self) -> None:
        self.data_dir = tempfile.mkdtemp(dir=self.root)
        for side in self.connectors:
            side.grid = self.grid()
        self.caches = names("bsrc")
        mirror_topics = {c: f"m-{c}" for c in self.caches}
        create_topics(self.bootstrap, mirror_topics.values(), self.partitions)
        self.topics += mirror_topics.values()
        space_types(self.data_dir, self.caches, mirror_topics)
        with SpaceAdapter(SpaceGridConfig(self.data_dir, "bench")) as adapter:
            self.starts = {c: adapter.end_position(c) for c in self.caches}
        for side in self.connectors:
            side.prepare(self.caches)
        space_workload(self.data_dir, self.caches, self.changes, self.keys)

    def ends(self) -> dict[str, Any]:
        with SpaceAdapter(SpaceGridConfig(self.data_dir, "bench")) as adapter:
            return {c: adapter.end_position(c) for c in self.caches}

    def mirror(self) -> dict[str, float]:
        run = mirror_drain(self.data_dir, self.bootstrap, self.changes)
        _check(count_records(self.bootstrap, [f"m-{c}" for c in self.caches]),
               self.changes, True, "mirror")
        return run

    def close(self) -> None:
        delete_topics(self.bootstrap, self.topics + [t for s in self.connectors
                                                      for t in s.topics])


class HazelcastRound:
    """Fresh maps per round (one put each, then the connectors' checkpoints and the raw
    sides' positions), then the workload, drained by every side of (b)."""

    def __init__(self, grid: HazelcastAdapter, bootstrap: str, changes: int, keys: int,
                 partitions: int, connectors: list[SourceSide]) -> None:
        self.grid, self.bootstrap = grid, bootstrap
        self.changes, self.keys, self.partitions = changes, keys, partitions
        self.connectors = connectors
        self.caches: list[str] = []
        self.all_caches: list[str] = []
        self.topics: list[str] = []
        self.starts: dict[str, Any] = {}

    def fresh(self) -> None:
        self.caches = names("bsrc")
        self.all_caches += self.caches
        for cache in self.caches:  # the maps exist before the positions are taken
            hazelcast_workload(self.grid, [cache], 1, 1)
        self.starts = {c: self.grid.end_position(c) for c in self.caches}
        for side in self.connectors:
            side.prepare(self.caches)
        hazelcast_workload(self.grid, self.caches, self.changes, self.keys)

    def ends(self) -> dict[str, Any]:
        return {c: self.grid.end_position(c) for c in self.caches}

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
        delete_topics(self.bootstrap, self.topics + [t for s in self.connectors
                                                      for t in s.topics])
        for cache in self.all_caches:
            self.grid.client.get_map(cache).blocking().destroy()


def breakdown(round_: SpaceRound | HazelcastRound, side: SourceSide,
              changes: int) -> dict[str, Any]:
    """A fresh round, its exactly-once connector run with its steps timed, and the
    source's read path alone on the same changes (``benchmarks/_connect_breakdown.py``)."""
    from benchmarks._connect_breakdown import source_python_alone, source_run

    round_.fresh()
    alone = source_python_alone(side._connector().config, round_.starts, round_.ends(),
                                side.root)
    return {"connector_exactly_once_run_s": source_run(side, changes),
            "python_alone_s": alone}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--grids", nargs="+", choices=["space", "hazelcast"],
                        default=["space", "hazelcast"])
    # --smoke: as many keys as changes per cache (a put_all keeps one change per key:
    # the raw sides count journal events, one per change)
    args = parse_common(parser, "cache", 40_000, argv, keys=10)
    bootstrap, hz = services_up()
    result: dict[str, Any] = {"benchmark": "connect_source", "changes": args.changes,
                              "caches": CACHES, "keys_per_cache": args.keys,
                              "repeat": args.repeat, "partitions": args.partitions}
    loads = [os.getloadavg()[0]]
    spark = spark_unless(args.baselines_only, "bench-connect-source", result)
    root = tempfile.mkdtemp(prefix="bench-connect-source-")

    def connectors(grid: dict[str, Any]) -> dict[str, SourceSide]:
        if spark is None:
            return {}
        return {f"connector_{g}": SourceSide(spark, bootstrap, grid, g, args.partitions, root)
                for g in ("exactly_once", "at_least_once")}

    try:
        if "space" in args.grids:
            space_sides = connectors({})
            space = SpaceRound(bootstrap, args.changes, args.keys, args.partitions, root,
                               list(space_sides.values()))
            try:
                runs = rounds(args.repeat, args.warmup, space.fresh, {
                    "mirror_exactly_once": space.mirror,
                    **{n: functools.partial(s.run, args.changes) for n, s in space_sides.items()}})
                if args.breakdown and space_sides:
                    result["space_breakdown"] = breakdown(
                        space, space_sides["connector_exactly_once"], args.changes)
            finally:
                space.close()
            result["space"] = _figures(runs, args.changes, "mirror_exactly_once")
            loads.append(os.getloadavg()[0])
        if "hazelcast" in args.grids:
            config = HazelcastGridConfig(cluster_name=hz.settings.cluster_name,
                                         members=(hz.address,))
            hz_sides = connectors({"kind": "hazelcast", "cluster_name": config.cluster_name,
                                   "members": list(config.members)})
            with HazelcastAdapter(config) as grid:
                round_ = HazelcastRound(grid, bootstrap, args.changes, args.keys,
                                        args.partitions, list(hz_sides.values()))
                try:
                    runs = rounds(args.repeat, args.warmup, round_.fresh, {
                        "raw_transactional": lambda: round_.raw(True),
                        "raw_idempotent": lambda: round_.raw(False),
                        **{n: functools.partial(s.run, args.changes)
                           for n, s in hz_sides.items()}})
                    if args.breakdown and hz_sides:
                        result["hazelcast_breakdown"] = breakdown(
                            round_, hz_sides["connector_exactly_once"], args.changes)
                finally:
                    round_.close()
            result["hazelcast"] = _figures(runs, args.changes, "raw_transactional",
                                           "raw_idempotent")
            loads.append(os.getloadavg()[0])
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    result["load_1min"] = [round(v, 2) for v in loads]
    print(json.dumps(result, indent=2))
    return 0


def _figures(runs: dict[str, list[dict[str, float]]], changes: int,
             *bases: str) -> dict[str, Any]:
    """Each side's summary and the ratios: the exactly-once connector against the first
    baseline (the goal), the at-least-once one against the last, and (c) at-least-once
    against exactly-once."""
    out: dict[str, Any] = {side: summary(r, changes) for side, r in runs.items()}
    pairs = [("raw_idempotent", "raw_transactional"),
             ("connector_exactly_once", bases[0]), ("connector_at_least_once", bases[-1]),
             ("connector_exactly_once", "connector_at_least_once")]
    out["ratios"] = {f"{a}/{b}": ratio(out[a], out[b]) for a, b in pairs
                     if a in out and b in out and a != b}
    return out


if __name__ == "__main__":
    sys.exit(main())
