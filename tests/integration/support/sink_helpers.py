"""Helpers of the sink connector tests: a grid per test (the Space or Hazelcast), records
produced to Kafka, what the topics hold (each key's latest value, read back from Kafka),
and a whole-value comparison of a cache with it."""

from __future__ import annotations

import contextlib
import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Consumer, Producer, TopicPartition

from gridstream import stack
from gridstream.grid import GridAdapter, Key, Value
from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig
from gridstream.grid.hazelcast._writes import versions_map
from gridstream.grid.settings import GridSettings, HazelcastGridSettings, SpaceGridSettings
from gridstream.grid.space import SpaceAdapter, SpaceGridConfig
from gridstream.space import Space
from gridstream.stack.hazelcast import HazelcastService

SPACE_NAME = "sinktest"
Sent = tuple[bytes | None, bytes | None]
"""A record as produced: (key bytes, value bytes; None = tombstone)."""


@dataclass
class Grid:
    """One test's grid: the settings a connector takes, the open Space (the Space grid,
    owned by the test process) and a reader of whole caches."""

    kind: str
    settings: GridSettings
    space: Space | None
    adapter: Callable[[], GridAdapter]
    caches: list[str] = field(default_factory=list)

    def read(self, cache: str) -> dict[Key, Value]:
        with self.adapter() as adapter:
            if cache not in adapter.list_caches():
                return {}
            return {e.key: e.value for batch in adapter.snapshot(cache, 5000) for e in batch}

    def expected(self, latest: dict[Key, Value], id_property: str = "id") -> dict[Key, Value]:
        """What a cache holding ``latest`` shows: the Space gives every entry its key as
        its id property."""
        if self.kind == "space":
            return {k: {**v, id_property: k} for k, v in latest.items()}
        return dict(latest)

    def release_space(self) -> None:
        """Close the test's Space so another process (a connector's driver) owns it."""
        if self.space is not None:
            self.space.close()
            self.space = None

    def reopen_space(self) -> None:
        """Own the Space again (after the process that owned it has ended)."""
        if isinstance(self.settings, SpaceGridSettings) and self.space is None:
            self.space = Space.embedded(SPACE_NAME, data_dir=self.settings.data_dir,
                                        fsync="never")


@contextlib.contextmanager
def make_grid(kind: str, tmp: Path) -> Iterator[Grid]:
    if kind == "space":
        data_dir = tmp / "space"
        space = Space.embedded(SPACE_NAME, data_dir=data_dir, fsync="never")
        settings = SpaceGridSettings(data_dir=str(data_dir), space_name=SPACE_NAME)
        config = SpaceGridConfig(str(data_dir), SPACE_NAME)
        grid = Grid(kind, settings, space, lambda: SpaceAdapter(config))
        grid.adapter = lambda: SpaceAdapter(config, space=grid.space)
        try:
            yield grid
        finally:
            grid.release_space()
        return
    service = stack.services(["hazelcast"])[0]
    assert isinstance(service, HazelcastService)
    service.up()
    hz = HazelcastGridSettings(cluster_name=service.settings.cluster_name,
                               members=(service.address,))
    config = HazelcastGridConfig(cluster_name=hz.cluster_name, members=hz.members)
    grid = Grid(kind, hz, None, lambda: HazelcastAdapter(config))
    try:
        yield grid
    finally:
        with HazelcastAdapter(config) as adapter:
            for name in adapter.list_caches():
                if any(name.startswith(prefix) for prefix in grid.caches):
                    adapter.client.get_map(name).blocking().destroy()
                    adapter.client.get_map(versions_map(name)).blocking().destroy()


def cache_prefix(grid: Grid) -> str:
    """A cache prefix unique to the test (Hazelcast's maps are dropped afterwards)."""
    prefix = f"gs-sink-{uuid.uuid4().hex[:8]}-"
    grid.caches.append(prefix)
    return prefix


# ------------------------------------------------------------------ Kafka


def produce(bootstrap: str, topic: str, records: Sequence[Sent]) -> list[tuple[int, int]]:
    """Produce in order (idempotent producer, so a key's records stay in order); the
    (partition, offset) of each."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    where: list[tuple[int, int]] = [(-1, -1)] * len(records)
    errors: list[str] = []

    def done(i: int) -> Callable[[Any, Any], None]:
        def report(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                where[i] = (msg.partition(), msg.offset())
        return report

    for i, (key, value) in enumerate(records):
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=done(i))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    return where


def read_topic(bootstrap: str, topic: str, *, headers: bool = False,
               timeout_s: float = 60) -> list[Any]:
    """Every record of ``topic`` (read_committed), up to its end now."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        ends = {}
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            if high > low:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
        out: list[Any] = []
        deadline = time.monotonic() + timeout_s
        done: set[int] = set()
        while len(done) < len(ends):
            assert time.monotonic() < deadline, f"{topic}: read {len(out)} records"
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append(msg)
            # the consumer's position, not the last message's offset: a transactional
            # topic's commit markers occupy offsets and are never delivered
            for tp in consumer.position([TopicPartition(topic, p) for p in ends]):
                if tp.offset >= ends[tp.partition]:
                    done.add(tp.partition)
        return out
    finally:
        consumer.close()


def latest(bootstrap: str, topic: str) -> dict[Key, Value]:
    """Each key's latest value in ``topic`` as Kafka holds it (a tombstone removes)."""
    out: dict[Key, Value] = {}
    for msg in sorted(read_topic(bootstrap, topic), key=lambda m: (m.partition(), m.offset())):
        key = orjson.loads(msg.key())
        if msg.value() is None:
            out.pop(key, None)
        else:
            out[key] = orjson.loads(msg.value())
    return out


# ------------------------------------------------------------------ data


def key_bytes(key: Key) -> bytes:
    return orjson.dumps(key)


def entity(key: Key, n: int) -> Value:
    """A value with nested maps, lists, nulls, floats and booleans."""
    return {"id": key, "name": f"name-{key}-{n}", "n": n, "ratio": n / 8, "on": n % 2 == 0,
            "tags": [f"t{n}", "x"], "address": {"city": f"c{n % 7}", "zip": None}}


def workload(seed: int, keys: int, count: int, *, tombstones: bool = True) -> list[Sent]:
    """``count`` records over ``keys`` keys (strings and integers): puts of new values
    and, one in ten, tombstones."""
    rng = random.Random(seed)
    out: list[Sent] = []
    for n in range(count):
        i = rng.randrange(keys)
        key: Key = i if i % 3 == 0 else f"k{i}"
        if tombstones and rng.random() < 0.1:
            out.append((key_bytes(key), None))
        else:
            out.append((key_bytes(key), orjson.dumps(entity(key, n))))
    return out


def differences(expected: dict[Key, Value], actual: dict[Key, Value]) -> list[str]:
    """Every key whose whole value differs, is missing or is extra (empty: equal)."""
    problems = [f"missing {k!r}" for k in expected if k not in actual]
    problems += [f"extra {k!r}" for k in actual if k not in expected]
    problems += [f"{k!r}: {actual[k]!r} != {expected[k]!r}" for k in expected
                 if k in actual and orjson.dumps(actual[k], option=orjson.OPT_SORT_KEYS)
                 != orjson.dumps(expected[k], option=orjson.OPT_SORT_KEYS)]
    return problems


def wait_equal(grid: Grid, checks: dict[str, dict[Key, Value]], timeout_s: float,
               alive: Callable[[], None] = lambda: None) -> None:
    """Wait until every cache equals its expected content (``alive`` raises when the
    connector died)."""
    deadline = time.monotonic() + timeout_s
    while True:
        problems = {c: differences(want, grid.read(c)) for c, want in checks.items()}
        if not any(problems.values()):
            return
        alive()
        if time.monotonic() > deadline:
            raise AssertionError({c: p[:5] + [f"({len(p)} in all)"] for c, p in problems.items()})
        time.sleep(1.0)
