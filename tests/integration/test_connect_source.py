"""The source connector (grid caches → Kafka) on real Spark, Kafka, Space and Hazelcast.

Entries carry a per-key counter ``n``; a ``read_committed`` consumer then checks, per key,
which counters reached the topic (none missing, none twice), or compares the topic's
latest value per key with the grid's whole entry.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from gridstream import stack
from gridstream.connect.config import ErrorHandling, SourceConnectorConfig
from gridstream.connect.source import SourceConnector, consumer_name
from gridstream.errors import RecordError
from tests.integration.support.child_output import await_line, start_piped
from tests.integration.support.source_helpers import (
    HazelcastGrid,
    SpaceGrid,
    consume,
    content,
    counters,
    delete_topics,
    latest,
    mismatches,
)

BOOTSTRAP = "127.0.0.1:9092"
ROOT = Path(__file__).resolve().parents[2]
Grid = SpaceGrid | HazelcastGrid


@pytest.fixture(params=["space", "hazelcast"])
def grid(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Grid]:
    if request.param == "space":
        space = SpaceGrid(tmp_path / "space")
        try:
            yield space
        finally:
            space.close()
        return
    request.getfixturevalue("hazelcast_service")
    service = stack.services(["hazelcast"])[0]
    hz = HazelcastGrid(service.settings.cluster_name, (service.address,))  # type: ignore[attr-defined]
    try:
        yield hz
    finally:
        hz.close()


@pytest.fixture()
def prefix(kafka_service: Any) -> Iterator[str]:
    name = f"gs-src-{uuid.uuid4().hex[:8]}-"
    yield name
    delete_topics(BOOTSTRAP, name)


def config(grid: Grid, checkpoint: Path, prefix: str, caches: list[str],
           **options: Any) -> SourceConnectorConfig:
    raw: dict[str, Any] = {
        "name": f"src-{uuid.uuid4().hex[:6]}", "grid": grid.settings(),
        "checkpoint": str(checkpoint), "topicPrefix": prefix, "pollInterval": 500,
        "cacheWhitelist": [c.replace("-", "\\-") for c in caches],
        "failoverPolicy": "BACKLOG", **options}
    return SourceConnectorConfig.model_validate(raw)


def fill(grid: Grid, caches: list[str], keys: int, n: int, **extra: Any) -> None:
    for cache in caches:
        for k in range(keys):
            grid.put(cache, f"k{k}", {"key": f"k{k}", "n": n, **extra})


@contextlib.contextmanager
def running(connector: SourceConnector, spark: Any) -> Iterator[Any]:
    query = connector.start(spark)
    try:
        yield query
    finally:
        if query.isActive:
            query.stop()
        connector.close()


def wait_reports(connector: SourceConnector, query: Any, count: int = 1,
                 timeout_s: float = 120) -> None:
    """Until ``count`` batches were reported (fails if the query fails)."""
    deadline = time.monotonic() + timeout_s
    while len(connector.reports) < count:
        assert query.isActive, f"query failed: {query.exception()}"
        assert time.monotonic() < deadline, "no batch reported in time"
        time.sleep(0.1)


def sequences_ok(found: dict[Any, list[int]], keys: list[str], first: int, last: int
                 ) -> list[str]:
    expected = list(range(first, last + 1))
    return [f"{k}: {found.get(k)}" for k in keys if found.get(k) != expected]


# ------------------------------------------------------------------ registration


def test_the_data_source_is_registered_once_per_session(spark: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Registering it again logged Spark's warning that it replaced itself at every
    connector's start."""
    from pyspark.sql.datasource import DataSourceRegistration

    from gridstream.connect.source.datasource import FORMAT, register

    register(spark)
    assert spark._jsparkSession.sessionState().dataSourceManager().dataSourceExists(FORMAT)
    calls: list[object] = []
    monkeypatch.setattr(DataSourceRegistration, "register",
                        lambda self, source: calls.append(source))
    register(spark)
    assert calls == []


# ------------------------------------------------------------------ BACKLOG


# A restart resumes from each grid's own position: the Space's here, Hazelcast's in the slow
# suite with its kill runs (here a Hazelcast source restarts from its checkpoint's position
# in the STOP_TASK test; from a lost one in the full-restart test, also in the slow suite).
@pytest.mark.parametrize("grid", ["space", pytest.param("hazelcast", marks=pytest.mark.slow)],
                         indirect=True)
def test_backlog_clean_restart_resumes_exactly(grid: Grid, spark: Any, tmp_path: Path,
                                               prefix: str) -> None:
    caches = [grid.new_cache() for _ in range(2)]
    keys = [f"k{k}" for k in range(20)]
    fill(grid, caches, len(keys), 0)
    cfg = config(grid, tmp_path / "ckpt", prefix, caches)
    first = SourceConnector(cfg, bootstrap_servers=BOOTSTRAP)
    with running(first, spark) as query:
        wait_reports(first, query)
        for n in range(1, 6):
            fill(grid, caches, len(keys), n)
            time.sleep(0.3)
        consume(BOOTSTRAP, [prefix + c for c in caches],
                lambda r: all(max(counters(r, prefix + c).get("k0", [0])) == 5 for c in caches))
    for n in range(6, 11):  # while stopped
        fill(grid, caches, len(keys), n)
    second = SourceConnector(cfg, bootstrap_servers=BOOTSTRAP)
    with running(second, spark) as query:
        wait_reports(second, query)
        for n in range(11, 16):
            fill(grid, caches, len(keys), n)
            time.sleep(0.3)
        records = consume(BOOTSTRAP, [prefix + c for c in caches], lambda r: all(
            min((max(v) for v in counters(r, prefix + c).values()), default=0) == 15
            for c in caches))
    for cache in caches:
        found = counters(records, prefix + cache)
        assert sequences_ok(found, keys, 0, 15) == [], cache
        assert set(found) == set(keys)


def _writer(grid: Grid, caches: list[str], keys: int, rounds: int, stop: threading.Event,
            pause_s: float = 0.05, done: list[int] | None = None,
            gate: threading.Event | None = None) -> threading.Thread:
    """Rounds of changes until ``stop`` (at most ``rounds``); ``done[0]``: the last one.
    With ``gate``, a round is written only while it is set."""
    def run() -> None:
        for n in range(1, rounds + 1):
            while gate is not None and not gate.wait(0.1) and not stop.is_set():
                pass
            if stop.is_set():
                return
            fill(grid, caches, keys, n)
            if done is not None:
                done[0] = n
            time.sleep(pause_s)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow  # a fault run: 45-100 s (make test-slow)
def test_backlog_survives_sigkill_of_the_driver(grid: Grid, tmp_path: Path,
                                                prefix: str) -> None:
    caches = [grid.new_cache() for _ in range(2)]
    keys, rounds = 25, 100_000  # written until the last kill is done
    done = [0]
    last = 0
    fill(grid, caches, keys, 0)
    # a killed driver's open transactions end sooner: its restart's markers read sooner
    cfg = config(grid, tmp_path / "ckpt", prefix, caches, **{"transaction.timeout.ms": 10_000})
    path = tmp_path / "source.json"
    path.write_text(cfg.model_dump_json())
    argv = [sys.executable, "-m", "tests.integration.support.source_child", str(path), BOOTSTRAP]
    stop = threading.Event()
    # changes are written while a driver runs (and in flight at each kill), not while it
    # is down: a restart slowed down by a loaded machine must not let Hazelcast's
    # journal (capacity / 271 partitions ≈ 369 events each) overflow past the position
    driver_up = threading.Event()
    writer: threading.Thread | None = None
    kills = 0
    try:
        for life in range(3):
            child, lines = start_piped(argv, ROOT)
            seen: list[str] = []
            try:
                await_line(child, lines, seen, lambda line: line.startswith("batch "))
                driver_up.set()
                if writer is None:
                    writer = _writer(grid, caches, keys, rounds, stop, pause_s=0.1, done=done,
                                     gate=driver_up)
                if life < 2:  # mid-stream: a batch with records, then kill during the next
                    await_line(child, lines, seen,
                               lambda line: line.startswith("batch ") and " 0 records" not in line)
                    time.sleep(0.7)
                    os.killpg(child.pid, signal.SIGKILL)
                    driver_up.clear()
                    child.wait(30)
                    kills += 1
                    continue
                stop.set()
                writer.join(300)
                assert not writer.is_alive()
                last = done[0]

                def caught_up(r: list[Any], last: int = last) -> bool:
                    return all(min((max(v) for v in counters(r, prefix + c).values()),
                                   default=0) == last for c in caches)

                records = consume(BOOTSTRAP, [prefix + c for c in caches], caught_up,
                                  timeout_s=240)
            finally:
                if child.poll() is None:
                    os.killpg(child.pid, signal.SIGKILL)
                    child.wait(30)
    finally:
        stop.set()
    assert kills == 2
    names = [f"k{k}" for k in range(keys)]
    for cache in caches:
        assert sequences_ok(counters(records, prefix + cache), names, 0, last) == [], cache


# ------------------------------------------------------------------ FULL_SNAPSHOT


def test_full_snapshot_restart_equals_the_grid(grid: Grid, spark: Any, tmp_path: Path,
                                               prefix: str) -> None:
    cache = grid.new_cache()
    keys = 1500
    fill(grid, [cache], keys, 0, pad="x" * 50)
    cfg = config(grid, tmp_path / "ckpt", prefix, [cache], failoverPolicy="FULL_SNAPSHOT",
                 batchSize=400)
    first = SourceConnector(cfg, bootstrap_servers=BOOTSTRAP)
    with running(first, spark) as query:
        wait_reports(first, query)
    for k in range(0, keys, 3):  # while stopped
        grid.put(cache, f"k{k}", {"key": f"k{k}", "n": 1, "while": "down"})
    writes = [0]
    stop = threading.Event()

    def change() -> None:  # ~500 writes a second: unpaced, an embedded Space took 300 000
        i = 0
        while not stop.wait(0.002):
            k = (i * 7919) % keys
            grid.put(cache, f"k{k}", {"key": f"k{k}", "n": 2 + i, "during": "snapshot"})
            writes[0] += 1
            i += 1

    thread = threading.Thread(target=change, daemon=True)
    thread.start()
    second = SourceConnector(cfg, bootstrap_servers=BOOTSTRAP)
    try:
        with running(second, spark) as query:
            wait_reports(second, query)
            during = writes[0]
            time.sleep(2)
            stop.set()
            thread.join(30)
            adapter = grid.adapter()
            try:
                expected = content(adapter, cache)
            finally:
                adapter.close()
            topic = prefix + cache
            records = consume(BOOTSTRAP, [topic],
                              lambda r: not mismatches(latest(r, topic), expected))
    finally:
        stop.set()
    assert during > 0, "no key changed while the snapshot was taken"
    assert any(e.kind == "snapshot" and e.cache == cache for e in second.events)
    found = latest(records, topic)
    assert mismatches(found, expected) == []
    assert any(v.get("during") == "snapshot" for v in expected.values())
    # the comparison sees a single changed value
    altered = dict(expected)
    altered["k1"] = {**altered["k1"], "n": -1}
    assert mismatches(found, altered) == [f"'k1': topic {found['k1']!r} != grid {altered['k1']!r}"]


# ------------------------------------------------------------------ NONE


# A restart resumes from each grid's own position: the Space's here, Hazelcast's in the slow
# suite with its kill runs (here a Hazelcast source restarts from its checkpoint's position
# in the STOP_TASK test; from a lost one in the full-restart test, also in the slow suite).
@pytest.mark.parametrize("grid", ["space", pytest.param("hazelcast", marks=pytest.mark.slow)],
                         indirect=True)
def test_none_skips_and_counts_what_changed_while_stopped(grid: Grid, spark: Any,
                                                          tmp_path: Path, prefix: str) -> None:
    caches = [grid.new_cache() for _ in range(2)]
    keys = 15
    fill(grid, caches, keys, 0)
    cfg = config(grid, tmp_path / "ckpt", prefix, caches, failoverPolicy="NONE")
    first = SourceConnector(cfg, bootstrap_servers=BOOTSTRAP)
    with running(first, spark) as query:
        wait_reports(first, query)
        for n in (1, 2):
            fill(grid, caches, keys, n)
        consume(BOOTSTRAP, [prefix + c for c in caches], lambda r: all(
            min((max(v) for v in counters(r, prefix + c).values()), default=0) == 2
            for c in caches))
    for n in (3, 4, 5):  # while stopped: 3 × 15 × 2 changes
        fill(grid, caches, keys, n)
    second = SourceConnector(cfg, bootstrap_servers=BOOTSTRAP)
    with running(second, spark) as query:
        wait_reports(second, query)
        for n in (6, 7):
            fill(grid, caches, keys, n)
        records = consume(BOOTSTRAP, [prefix + c for c in caches], lambda r: all(
            min((max(v) for v in counters(r, prefix + c).values()), default=0) == 7
            for c in caches))
    names = [f"k{k}" for k in range(keys)]
    for cache in caches:
        found = counters(records, prefix + cache)
        assert [f"{k}: {found.get(k)}" for k in names if found.get(k) != [0, 1, 2, 6, 7]] == []
    assert second.skipped_while_down == {c: 3 * keys for c in caches}
    skipped = [e for e in second.events if e.kind == "skipped"]
    assert sorted(e.cache for e in skipped) == sorted(caches)
    assert all(e.count == 3 * keys and "not emitted" in e.detail for e in skipped)


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(("grid", "policy"), [
    ("space", "STOP_TASK"), ("hazelcast", "STOP_TASK"),  # the position kept: each grid's own
    ("space", "LOG_ONLY"), ("space", "DEAD_LETTER"),
    # past the grid's read the same code on either grid: a Hazelcast run in the slow suite
    pytest.param("hazelcast", "LOG_ONLY", marks=pytest.mark.slow),
    pytest.param("hazelcast", "DEAD_LETTER", marks=pytest.mark.slow),
], indirect=["grid"])
def test_source_error_policies(grid: Grid, spark: Any, tmp_path: Path, prefix: str,
                               policy: str) -> None:
    cache = grid.new_cache()
    good, bad = 1000, 1000

    def write(base: int) -> None:
        """Valid entries and bad ones: half the filter cannot judge, half hold an object
        where the ``mask`` transform expects a string or a number."""
        for i in range(base, base + 500):
            grid.put(cache, f"g{i}", {"key": f"g{i}", "n": i, "secret": "s"})
            bad = {"bad": True} if i % 2 else {"secret": {"nested": i}}
            grid.put(cache, f"b{i}", {"key": f"b{i}", "n": i, **bad})

    write(0)  # read by the initial snapshot, then 500 + 500 more from the stream
    dead = f"{prefix}dead"
    options: dict[str, Any] = {"cacheFilter": "tests.integration.support.source_helpers:picky",
                               "errorHandlingPolicy": policy,
                               "transforms": [{"type": "mask", "fields": ["secret"]}]}
    if policy == "DEAD_LETTER":
        options["deadLetterTopic"] = dead
    cfg = config(grid, tmp_path / "ckpt", prefix, [cache], **options)
    allowed = ["tests.integration.support.source_helpers"]
    connector = SourceConnector(cfg, bootstrap_servers=BOOTSTRAP, allowed_modules=allowed)
    topic = prefix + cache
    if policy == "STOP_TASK":
        with running(connector, spark) as query, pytest.raises(Exception):  # noqa: B017
            query.awaitTermination(120)  # raises Spark's wrapper of the batch's error
        assert isinstance(connector.failure, RecordError)
        assert connector.failure.where.startswith(f"{cache}/b")
        assert connector.failure.stage in ("filter", "transform")
        assert cache in str(connector.failure) and "STOP_TASK" in str(connector.failure)
        assert consume(BOOTSTRAP, [topic], lambda r: False, timeout_s=3) == []
        # the position did not move: the same checkpoint, skipping bad entries, writes
        # every valid one of the failed batch
        cfg = cfg.model_copy(update={"error_handling_policy": ErrorHandling.LOG_ONLY})
        connector = SourceConnector(cfg, bootstrap_servers=BOOTSTRAP, allowed_modules=allowed)
    with running(connector, spark) as query:
        wait_reports(connector, query)
        write(500)
        records = consume(BOOTSTRAP, [topic, dead], lambda r: sum(
            1 for t, *_ in r if t == topic) >= good and (
                policy != "DEAD_LETTER" or sum(1 for t, *_ in r if t == dead) >= bad))
        deadline = time.monotonic() + 60
        while sum(r.records for r in connector.reports) < good + bad:
            assert time.monotonic() < deadline and query.isActive
            time.sleep(0.2)
    written = sorted(k for t, k, *_ in records if t == topic)
    assert written == sorted(f"g{i}" for i in range(good))
    assert all(v["secret"] == "" for t, _, v, _ in records if t == topic)  # masked
    reports = list(connector.reports)
    assert sum(r.written for r in reports) == good
    if policy == "DEAD_LETTER":
        letters = [(k, v, h) for t, k, v, h in records if t == dead]
        assert sorted(k for k, _, _ in letters) == sorted(f"b{i}" for i in range(bad))
        assert sum(r.dead_lettered for r in reports) == bad
        for key, value, headers in letters:
            assert value["key"] == key
            assert headers["gs.error.cache"] == cache.encode()
            assert headers["gs.error.key"] == orjson.dumps(key)
            assert headers["gs.error.connector"] == cfg.name.encode()
            if value.get("bad"):
                assert headers["gs.error.stage"] == b"filter"
                assert b"marked bad" in headers["gs.error.reason"]
            else:
                assert value["secret"] == {"nested": int(key[1:])}
                assert headers["gs.error.stage"] == b"transform"
                assert b"mask" in headers["gs.error.reason"]
        assert sum(1 for _, v, _ in letters if v.get("bad")) == bad // 2
    else:
        assert sum(r.skipped for r in reports) == bad


# ------------------------------------------------------------------ discovery


def test_discovery_within_the_poll_interval(grid: Grid, spark: Any, tmp_path: Path,
                                            prefix: str) -> None:
    tag = f"disc{uuid.uuid4().hex[:6]}"
    first = grid.new_cache(f"{tag}a")
    grid.put(first, "k0", {"key": "k0", "n": 0})
    raw = {"name": f"src-{tag}", "grid": grid.settings(), "checkpoint": str(tmp_path / "c"),
           "topicPrefix": prefix, "pollInterval": 500, "cacheListPollInterval": 1000,
           "cacheWhitelist": [f"{tag}.*"], "cacheBlacklist": [f"{tag}skip.*"],
           "deliveryGuarantee": "at_least_once"}  # Spark's own Kafka sink
    connector = SourceConnector(SourceConnectorConfig.model_validate(raw),
                                bootstrap_servers=BOOTSTRAP)
    with running(connector, spark) as query:
        wait_reports(connector, query)
        created = grid.new_cache(f"{tag}b")
        blocked = grid.new_cache(f"{tag}skip")
        other = grid.new_cache("other")
        for cache in (created, blocked, other):
            grid.put(cache, "k0", {"key": "k0", "n": 0})
        began = time.monotonic()
        records = consume(BOOTSTRAP, [prefix + created], lambda r: bool(r), timeout_s=60)
        took = time.monotonic() - began
        assert [(t, k) for t, k, *_ in records] == [(prefix + created, "k0")]
        assert took < 1.0 + 10.0, took  # the poll interval, a batch, the consumer's start
        grid.put(first, "k1", {"key": "k1", "n": 1})
        consume(BOOTSTRAP, [prefix + first], lambda r: len(r) == 2, timeout_s=60)
        if isinstance(grid, HazelcastGrid):
            grid.destroy(first)
            deadline = time.monotonic() + 60
            while not any(e.kind == "dropped" and e.cache == first for e in connector.events):
                assert time.monotonic() < deadline and query.isActive, list(connector.events)
                time.sleep(0.2)
    assert any(e.kind == "discovered" and e.cache == created for e in connector.events)
    seen = {e.cache for e in connector.events}
    assert blocked not in seen and other not in seen
    stray = consume(BOOTSTRAP, [prefix + blocked, prefix + other], lambda r: False, timeout_s=3)
    assert stray == []


# ------------------------------------------------------------------ heartbeat


def test_idle_cache_position_and_log_acknowledgement_advance(spark: Any, tmp_path: Path,
                                                             prefix: str) -> None:
    from gridstream.space import Space

    space = SpaceGrid.__new__(SpaceGrid)
    space.data_dir, space.name = tmp_path / "space", "heartbeat"
    space.space = Space.embedded(space.name, data_dir=space.data_dir, fsync="never",
                                 segment_bytes=4096)
    try:
        idle, busy = space.new_cache("Idle"), space.new_cache("Busy")
        space.put(idle, "k0", {"key": "k0", "n": 0})
        space.put(busy, "k0", {"key": "k0", "n": 0})
        cfg = config(space, tmp_path / "ckpt", prefix, [idle, busy])
        connector = SourceConnector(cfg, bootstrap_servers=BOOTSTRAP)
        reader = space.space.log_reader()
        try:
            start = reader.first_seq()
            with running(connector, spark) as query:
                wait_reports(connector, query)
                for n in range(1, 200):
                    space.put(busy, f"k{n % 20}", {"key": f"k{n % 20}", "n": n, "pad": "x" * 100})
                space.space.snapshot()
                end = reader.end_seq()
                deadline = time.monotonic() + 60
                while True:  # a batch after the snapshot acknowledges past the old segments
                    space.put(busy, "tick", {"key": "tick", "n": 0})
                    time.sleep(1)
                    progress = query.lastProgress or {}
                    offset = progress.get("sources", [{}])[0].get("endOffset") or {}
                    if isinstance(offset, str):
                        offset = orjson.loads(offset)
                    caches = offset.get("caches", {})
                    idle_seq = caches.get(idle, {}).get("pos", {}).get("next", {}).get("log", 0)
                    acks = orjson.loads((space.data_dir / "consumers.json").read_bytes())
                    acked = acks["consumers"].get(consumer_name(cfg.name, cfg.checkpoint), 0)
                    if idle_seq >= end and acked >= end and reader.first_seq() > start:
                        break
                    assert time.monotonic() < deadline and query.isActive, (
                        idle_seq, acked, end, reader.first_seq(), start)
        finally:
            reader.close()
    finally:
        space.close()


# ------------------------------------------------------------------ lost positions


@pytest.mark.slow  # a fault run: the cluster restarted, 18 s (make test-slow)
def test_lost_position_after_a_full_hazelcast_restart(spark: Any, tmp_path: Path, prefix: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.integration.support.hazelcast_cluster import private_cluster

    clusters = private_cluster(tmp_path, monkeypatch, members=1, journal_capacity=100_000)
    cluster = next(clusters)
    try:
        hz = HazelcastGrid(cluster.settings.cluster_name, cluster.addresses)
        try:
            cache = hz.new_cache()
            fill(hz, [cache], 20, 0)
            cfg = config(hz, tmp_path / "ckpt", prefix, [cache])
            first = SourceConnector(cfg, bootstrap_servers=BOOTSTRAP)
            with running(first, spark) as query:
                wait_reports(first, query)
            cluster.stop()
            cluster.start()
            hz.client.shutdown()  # a new client creates its maps (proxies) in the new cluster
            hz = HazelcastGrid(cluster.settings.cluster_name, cluster.addresses)
            fill(hz, [cache], 30, 1, after="restart")
            failing = SourceConnector(cfg, bootstrap_servers=BOOTSTRAP)
            with running(failing, spark) as query, pytest.raises(Exception) as raised:  # noqa: B017
                query.awaitTermination(120)  # raises Spark's wrapper of the source's error
            text = str(raised.value)
            assert "PositionLostError" in text and repr(cache) in text
            assert "onPositionLost" in text
            healing = SourceConnector(cfg.model_copy(update={"on_position_lost": "snapshot"}),
                                      bootstrap_servers=BOOTSTRAP)
            with running(healing, spark) as query:
                wait_reports(healing, query)
                adapter = hz.adapter()
                try:
                    expected = content(adapter, cache)
                finally:
                    adapter.close()
                topic = prefix + cache
                records = consume(BOOTSTRAP, [topic],
                                  lambda r: not mismatches(latest(r, topic), expected))
            assert mismatches(latest(records, topic), expected) == []
            assert len(expected) == 30 and all(v["n"] == 1 for v in expected.values())
            assert any(e.kind == "lost" and e.cache == cache for e in healing.events)
        finally:
            hz.client.shutdown()
    finally:
        with contextlib.suppress(StopIteration):
            next(clusters)

