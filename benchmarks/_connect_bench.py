"""Shared parts of the connector benchmarks: workloads, the hand-written baselines, and
the timing of a connector's streaming query.

Timing, the same for both sides of every ratio: **start-up** (what a side does once
before it can move records: the mirror's ``open()``, a producer's
``init_transactions``, a consumer's first fetch, a streaming query's start up to its
first batch with records) is measured and reported apart from the **drain** (from the
first record moved to the last one delivered: every record of the backlog committed
in Kafka, or put into the grid). Rates and ratios are of the drain. The Spark session
is started once per benchmark process and shown once (``spark_session_s``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from hazelcast.core import HazelcastJsonValue

from benchmarks import _smoke
from gridstream import stack
from gridstream.grid import Position, Write
from gridstream.grid.hazelcast import HazelcastAdapter
from gridstream.mirror import PRODUCER_DEFAULTS
from gridstream.stack.hazelcast import HazelcastService

CACHES = 4
"""Caches (Space types, Hazelcast maps, topics) per workload."""


def entry(i: int, keys: int) -> dict[str, Any]:
    """Change ``i``'s value (~130 bytes of JSON); ``keys`` distinct keys per cache, so
    a key is written ``changes / (CACHES * keys)`` times."""
    return {"id": f"k-{(i // CACHES) % keys}", "name": f"name-{i}", "qty": i % 97,
            "price": (i % 10_000) / 100, "active": i % 3 == 0, "note": "n" * 40}


def cache_of(i: int, caches: Sequence[str]) -> str:
    return caches[i % len(caches)]


def names(prefix: str) -> list[str]:
    """``CACHES`` fresh cache names."""
    tag = uuid.uuid4().hex[:8]
    return [f"{prefix}{tag}c{c}" for c in range(CACHES)]


# ------------------------------------------------------------------------- Kafka


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topics(bootstrap: str, topics: Iterable[str], partitions: int) -> None:
    client = admin(bootstrap)  # kept alive until the futures are done
    futures = client.create_topics(
        [NewTopic(t, num_partitions=partitions, replication_factor=1) for t in topics])
    for future in futures.values():
        future.result(30)


def delete_topics(bootstrap: str, topics: Iterable[str]) -> None:
    wanted = list(topics)
    if not wanted:
        return
    client = admin(bootstrap)
    for future in client.delete_topics(wanted).values():
        with contextlib.suppress(KafkaException):  # not created by a run that failed early
            future.result(30)


def count_records(bootstrap: str, topics: Sequence[str]) -> dict[str, int]:
    """Records per topic that a read_committed consumer sees, to each partition's end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        parts = []
        for topic in topics:
            meta = consumer.list_topics(topic, timeout=30).topics[topic]
            parts += [TopicPartition(topic, p, 0) for p in meta.partitions]
        consumer.assign(parts)
        counts = dict.fromkeys(topics, 0)
        open_parts = {(p.topic, p.partition) for p in parts}
        idle_since = time.monotonic()
        while open_parts:
            # short waits: consume() returns early only once it has 10 000 records
            msgs = consumer.consume(10_000, timeout=0.2)
            if not msgs:
                if time.monotonic() - idle_since > 5:
                    raise AssertionError(f"no end of partitions {sorted(open_parts)} after 5 s")
                continue
            idle_since = time.monotonic()
            for m in msgs:
                if m.error() is None:
                    counts[m.topic()] += 1
                elif m.error().code() == -191:  # _PARTITION_EOF
                    open_parts.discard((m.topic(), m.partition()))
                else:
                    raise KafkaException(m.error())
        return counts
    finally:
        consumer.close()


def produce_json(bootstrap: str, topics: Sequence[str], changes: int, keys: int) -> None:
    """The sink workload: change ``i`` to topic ``i % CACHES``, key the JSON string of
    its id, value its JSON object (the JSON converter's formats)."""
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_DEFAULTS,
                         "linger.ms": 20})
    for i in range(changes):
        value = entry(i, keys)
        while True:
            try:
                producer.produce(cache_of(i, topics), orjson.dumps(value),
                                 orjson.dumps(value["id"]))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(60):
        raise AssertionError("records undelivered after 60 s")


# ------------------------------------------------------------------------- baselines


def _produce(producer: Producer, topic: str, value: bytes | None, key: bytes,
             headers: list[tuple[str, bytes]]) -> None:
    while True:
        try:
            producer.produce(topic, value, key, headers=headers)
            return
        except BufferError:
            producer.poll(0.05)


def raw_journal_drain(grid: HazelcastAdapter, starts: dict[str, Position],
                      topics: dict[str, str], bootstrap: str, expected: int, *,
                      transactional: bool, max_changes: int = 10_000) -> dict[str, float]:
    """The hand-written Hazelcast → Kafka baseline: the adapter's ``read_changes`` on each
    cache in turn (``max_changes`` at a time) and a confluent-kafka producer with the
    writer's settings (``PRODUCER_DEFAULTS``: idempotent, acks=all, lz4): key and value
    as JSON, the ``gs.version`` header. ``transactional``: one transaction per read
    batch (what exactly-once minimally needs; the positions are not stored anywhere, so
    this is a floor, not a resumable job); else one flush at the end."""
    started = time.perf_counter()
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, **PRODUCER_DEFAULTS}
    if transactional:
        config["transactional.id"] = f"bench-raw-{uuid.uuid4().hex[:8]}"
    producer = Producer(config)
    if transactional:
        producer.init_transactions(30)
    positions = dict(starts)
    ready = time.perf_counter()
    moved = 0
    while moved < expected:
        read = 0
        for cache, position in positions.items():
            batch = grid.read_changes(cache, position, max_changes)
            positions[cache] = batch.position
            if not batch.changes:
                continue
            if transactional:
                producer.begin_transaction()
            topic = topics[cache]
            for change in batch.changes:
                value = None if change.value is None else orjson.dumps(change.value)
                _produce(producer, topic, value, orjson.dumps(change.key),
                         [("gs.version", b"%d" % (change.version or 0))])
                producer.poll(0)
            if transactional:
                producer.commit_transaction(30)
            read += len(batch.changes)
        if not read:
            raise AssertionError(f"the journals ended after {moved} of {expected} changes")
        moved += read
    if not transactional and producer.flush(60):
        raise AssertionError("records undelivered after 60 s")
    done = time.perf_counter()
    return {"startup_s": ready - started, "drain_s": done - ready, "records": moved}


def raw_sink_loop(grid: HazelcastAdapter, topics: Sequence[str], maps: dict[str, str],
                  bootstrap: str, expected: int, batch: int = 1000) -> dict[str, float]:
    """The hand-written Kafka → Hazelcast baseline: a confluent-kafka consumer
    (read_committed, every partition assigned from the start) ``consume(batch)``, each
    key and value JSON-decoded, then per topic one ``put_all`` of the batch's last value
    per key (``HazelcastJsonValue``, as the adapter stores values) on the client's map.
    Start-up: until the first records arrive."""
    started = time.perf_counter()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    client_maps = {t: grid.client.get_map(maps[t]).blocking() for t in topics}
    parts = []
    for topic in topics:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        parts += [TopicPartition(topic, p, 0) for p in meta.partitions]
    consumer.assign(parts)
    first: float | None = None
    moved = 0
    try:
        while moved < expected:
            msgs = consumer.consume(batch, timeout=1.0)
            if not msgs:
                if first is not None:
                    raise AssertionError(f"no record after {moved} of {expected}")
                continue
            if first is None:
                first = time.perf_counter()
            puts: dict[str, dict[Any, HazelcastJsonValue]] = {}
            for m in msgs:
                if m.error() is not None:
                    raise KafkaException(m.error())
                key, value = orjson.loads(m.key()), orjson.loads(m.value())
                puts.setdefault(m.topic(), {})[key] = HazelcastJsonValue(
                    orjson.dumps(value).decode())
            for topic, entries in puts.items():
                client_maps[topic].put_all(entries)
            moved += len(msgs)
    finally:
        consumer.close()
    done = time.perf_counter()
    assert first is not None
    return {"startup_s": first - started, "drain_s": done - first, "records": moved}


def hazelcast_workload(grid: HazelcastAdapter, caches: Sequence[str], changes: int,
                       keys: int, batch: int = 1000) -> None:
    """``changes`` puts over ``caches`` through the adapter (``put_all`` of ``batch``)."""
    pending: dict[str, list[Write]] = {c: [] for c in caches}
    for i in range(changes):
        value = entry(i, keys)
        cache = cache_of(i, caches)
        pending[cache].append(Write(value["id"], value))
        if len(pending[cache]) == batch:
            grid.apply(cache, pending[cache])
            pending[cache] = []
    for cache, writes in pending.items():
        if writes:
            grid.apply(cache, writes)


# ------------------------------------------------------------------------- connectors


def _epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def drain_query(start: Callable[[], Any], reports: Callable[[], Sequence[Any]],
                failure: Callable[[], BaseException | None], expected: int,
                timeout_s: float = 900.0) -> dict[str, float]:
    """Start a connector's streaming query and wait until its reports account for
    ``expected`` records (read, whatever became of them); then stop it.

    Times from the query's progress: start-up = from ``start()`` to the start of the
    first trigger that read records; drain = from there to the end of the last trigger
    that read records (its ``triggerExecution`` includes the ``foreachBatch``, i.e. the
    write and its commit). The triggers that read records are those whose reports count
    records (a source's input rows need not be one per record). ``total_s``: from
    ``start()`` to the reports' completion, as this loop saw it (polled every 50 ms)."""
    began_wall, began = time.time(), time.perf_counter()
    query = start()
    try:
        deadline = began + timeout_s
        while sum(r.records for r in reports()) < expected:
            error = failure() or query.exception()
            if error is not None:
                raise AssertionError(f"the connector failed: {error}")
            if time.perf_counter() > deadline:
                raise AssertionError(f"{sum(r.records for r in reports())} of {expected} "
                                     f"records after {timeout_s} s")
            time.sleep(0.05)
        total = time.perf_counter() - began
        moved = {r.batch_id for r in reports() if r.records}
        progress = _wait_progress(query, moved)
    finally:
        query.stop()
    with_rows = [p for p in progress if p["batchId"] in moved]
    first, last = with_rows[0], with_rows[-1]
    first_s = _epoch(first["timestamp"])
    last_end = _epoch(last["timestamp"]) + last["durationMs"]["triggerExecution"] / 1000
    out = {"startup_s": first_s - began_wall, "drain_s": last_end - first_s,
           "total_s": total, "records": sum(r.records for r in reports()),
           "batches": len(with_rows)}
    if len(with_rows) > 2:  # the batches after the run's first (its check, its bound)
        second_s = _epoch(with_rows[1]["timestamp"])
        out["steady_s"] = last_end - second_s
        out["steady_records"] = sum(r.records for r in reports()
                                    if r.batch_id != first["batchId"])
    return out


def prerun(start: Callable[[], Any], failure: Callable[[], BaseException | None],
           timeout_s: float = 300.0) -> None:
    """Start a query, wait until its first batch completed (its offsets and commit are in
    the checkpoint), stop it: a later start resumes from there."""
    query = start()
    try:
        deadline = time.perf_counter() + timeout_s
        while not query.recentProgress:
            error = failure() or query.exception()
            if error is not None:
                raise AssertionError(f"the connector failed: {error}")
            if time.perf_counter() > deadline:
                raise AssertionError(f"no batch completed after {timeout_s} s")
            time.sleep(0.1)
    finally:
        query.stop()


def _wait_progress(query: Any, batches: set[int]) -> list[dict[str, Any]]:
    """The query's progress reports once they include every batch of ``batches`` (Spark
    posts a batch's progress just after its ``foreachBatch`` returns)."""
    for _ in range(100):
        progress = [orjson.loads(p.json) for p in query.recentProgress]
        if batches <= {p["batchId"] for p in progress}:
            return progress
        time.sleep(0.05)
    raise AssertionError(f"the query's progress lacks batches its reports name: {batches}")


# ------------------------------------------------------------------------- figures

Side = Callable[[], dict[str, float]]


def rounds(repeat: int, warmup: int, prepare: Callable[[], None] | None,
           sides: dict[str, Side]) -> dict[str, list[dict[str, float]]]:
    """``warmup`` rounds (not counted: Python workers start, the JVM compiles), then
    ``repeat`` counted ones. Each round prepares a fresh workload (``prepare``), then
    runs every side, in the given order or reversed (every other round). Each run is
    printed on stderr as it ends."""
    runs: dict[str, list[dict[str, float]]] = {s: [] for s in sides}
    order = list(sides)
    for r in range(-warmup, repeat):
        if prepare is not None:
            prepare()
        for side in order if r % 2 == 0 else order[::-1]:
            run = sides[side]()
            if r >= 0:
                runs[side].append(run)
            print(json.dumps({"round": r if r >= 0 else "warm-up", "side": side,
                              **{k: round(v, 2) for k, v in run.items()}}),
                  file=sys.stderr, flush=True)
    return runs


def summary(runs: list[dict[str, float]], records: int) -> dict[str, Any]:
    """Median and best (min seconds) of the runs' drains, the start-ups' median."""
    drains = [r["drain_s"] for r in runs]
    out = {"records_per_s": round(records / statistics.median(drains)),
           "best_records_per_s": round(records / min(drains)),
           "drain_s": [round(d, 2) for d in drains],
           "startup_s": round(statistics.median(r["startup_s"] for r in runs), 2)}
    if all("steady_s" in r for r in runs):  # a connector's: without its first batch
        out["steady_records_per_s"] = round(statistics.median(
            r["steady_records"] / r["steady_s"] for r in runs))
    return out


def ratio(side: dict[str, Any], base: dict[str, Any]) -> dict[str, float]:
    """``side`` over ``base``: of the median drains, of the best ones, and of the steady
    rates (a connector's drain without its run's first batch; a side without batches:
    its whole drain)."""
    def steady(figures: dict[str, Any]) -> float:
        return float(figures.get("steady_records_per_s", figures["records_per_s"]))

    return {"of_medians": round(side["records_per_s"] / base["records_per_s"], 3),
            "of_best": round(side["best_records_per_s"] / base["best_records_per_s"], 3),
            "of_steady": round(steady(side) / steady(base), 3)}


SMOKE = {"changes": 40, "keys": 5, "repeat": 1, "warmup": 0}
"""``--smoke`` of both connector benchmarks: 10 changes per cache, one round, no warm-up."""


def parse_common(parser: argparse.ArgumentParser, unit: str, changes: int,
                 argv: Sequence[str] | None, **smoke: Any) -> argparse.Namespace:
    """The options both connector benchmarks take (``unit``: "topic" or "cache"), and
    ``--smoke`` (``SMOKE``, then ``smoke``), parsed; ``--changes`` must spread evenly
    over the ``CACHES``."""
    parser.add_argument("--changes", type=int, default=changes)
    parser.add_argument("--keys", type=int, default=5_000, help=f"distinct keys per {unit}")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1,
                        help="rounds run first and not counted (Python workers, JIT)")
    parser.add_argument("--partitions", type=int, default=2, help="per topic")
    parser.add_argument("--baselines-only", action="store_true",
                        help="only the hand-written sides (no Spark)")
    parser.add_argument("--breakdown", action="store_true",
                        help="then one more run, timed by step")
    args = _smoke.parse_args(parser, argv, **{**SMOKE, **smoke})
    if args.changes % CACHES:
        parser.error(f"--changes must be a multiple of {CACHES}")
    return args


def services_up() -> tuple[str, HazelcastService]:
    """Kafka and Hazelcast up (started if needed): Kafka's address and the Hazelcast
    service."""
    kafka, hz = stack.services(["kafka", "hazelcast"])
    assert isinstance(hz, HazelcastService)
    kafka.up()
    hz.up()
    return kafka.address, hz


def spark_unless(baselines_only: bool, app_name: str, result: dict[str, Any]) -> Any:
    """The Spark session for the connector sides (its start time in ``result``), or
    None when only the hand-written baselines run."""
    if baselines_only:
        return None
    from gridstream.spark import get_spark

    started = time.perf_counter()
    spark = get_spark(app_name=app_name)
    result["spark_session_s"] = round(time.perf_counter() - started, 2)
    return spark
