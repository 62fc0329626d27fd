"""Grids, Kafka reads and checks for the source connector's tests.

``SpaceGrid`` owns an embedded Space in the test process (the connector reads its log
from files, in Spark's processes); ``HazelcastGrid`` writes a cluster with a client of
its own. Both write entries ``{"key": k, "n": counter, ...}``, so a topic's records can be
checked per key: no counter missing, none twice, only increasing.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from gridstream.grid.contract import GridAdapter, Key, Value

Record = tuple[str, Any, Any, dict[str, bytes]]
"""topic, key (decoded JSON), value (decoded JSON, None for a tombstone), headers."""


def picky(cache: str, key: Key, value: Value) -> bool:
    """A ``cacheFilter`` that cannot judge entries marked bad, and leaves out skipped ones."""
    if value.get("bad"):
        raise ValueError(f"entry {key!r} of {cache} is marked bad")
    return not value.get("hidden")


class SpaceGrid:
    def __init__(self, data_dir: Path) -> None:
        from gridstream.space import Space

        self.data_dir = data_dir
        self.name = "source-tests"
        self.space = Space.embedded(self.name, data_dir=data_dir, fsync="never")

    def settings(self) -> dict[str, Any]:
        return {"kind": "space", "data_dir": str(self.data_dir), "space_name": self.name}

    def new_cache(self, prefix: str = "Src") -> str:
        return f"{prefix}{uuid.uuid4().hex[:10]}"

    def put(self, cache: str, key: Key, value: Value) -> None:
        from gridstream.model import SpaceDocument

        self.space.write(SpaceDocument(cache, {**value, "id": key}))

    def remove(self, cache: str, key: Key) -> None:
        self.space.remove(cache, key)

    def adapter(self) -> GridAdapter:
        from gridstream.grid.space import SpaceAdapter, SpaceGridConfig

        adapter = SpaceAdapter(SpaceGridConfig(str(self.data_dir), self.name),
                               space=self.space)
        adapter.open()
        return adapter

    def close(self) -> None:
        self.space.close()


class HazelcastGrid:
    def __init__(self, cluster_name: str, members: tuple[str, ...]) -> None:
        from hazelcast.client import HazelcastClient
        from hazelcast.config import IntType

        self.cluster_name, self.members = cluster_name, members
        self.client = HazelcastClient(cluster_name=cluster_name, cluster_members=list(members),
                                      default_int_type=IntType.LONG,
                                      cluster_connect_timeout=120)
        self.caches: list[str] = []

    def settings(self) -> dict[str, Any]:
        return {"kind": "hazelcast", "cluster_name": self.cluster_name,
                "members": list(self.members)}

    def new_cache(self, prefix: str = "src-") -> str:
        self.caches.append(f"{prefix}{uuid.uuid4().hex[:10]}")
        return self.caches[-1]

    def put(self, cache: str, key: Key, value: Value) -> None:
        from hazelcast.core import HazelcastJsonValue

        self.client.get_map(cache).blocking().put(
            key, HazelcastJsonValue(orjson.dumps(value).decode()))

    def remove(self, cache: str, key: Key) -> None:
        self.client.get_map(cache).blocking().delete(key)

    def destroy(self, cache: str) -> None:
        self.client.get_map(cache).blocking().destroy()

    def adapter(self) -> GridAdapter:
        from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig

        adapter = HazelcastAdapter(HazelcastGridConfig(cluster_name=self.cluster_name,
                                                       members=self.members))
        adapter.open()
        return adapter

    def close(self) -> None:
        try:
            for cache in self.caches:
                self.client.get_map(cache).blocking().destroy()
        finally:
            self.client.shutdown()


def content(adapter: GridAdapter, cache: str) -> dict[Key, Value]:
    """Every entry of ``cache`` now."""
    return {e.key: e.value for batch in adapter.snapshot(cache, 1000) for e in batch}


def consume(bootstrap: str, topics: Iterable[str], done: Callable[[list[Record]], bool],
            timeout_s: float = 120.0) -> list[Record]:
    """Every committed record of ``topics`` (``read_committed``, from the start), read until
    ``done(records)`` holds (then a second more, to see anything extra)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed",
                         "topic.metadata.refresh.interval.ms": 1000})
    consumer.subscribe(list(topics))
    records: list[Record] = []
    deadline = time.monotonic() + timeout_s
    settle: float | None = None
    try:
        while time.monotonic() < deadline:
            for m in consumer.consume(1000, timeout=0.5):
                if m.error():
                    continue
                key = orjson.loads(m.key()) if m.key() is not None else None
                value = orjson.loads(m.value()) if m.value() is not None else None
                records.append((m.topic(), key, value, dict(m.headers() or [])))
            if settle is None and done(records):
                settle = time.monotonic() + 1.0
            if settle is not None and time.monotonic() >= settle:
                return records
    finally:
        consumer.close()
    return records


def end_offsets(bootstrap: str, topic: str, partitions: int = 1) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in range(partitions))
    finally:
        consumer.close()


def latest(records: list[Record], topic: str) -> dict[Any, Any]:
    """The topic's latest value per key (a tombstone removes the key)."""
    out: dict[Any, Any] = {}
    for t, key, value, _ in records:
        if t != topic:
            continue
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def counters(records: list[Record], topic: str) -> dict[Any, list[int]]:
    out: dict[Any, list[int]] = {}
    for t, key, value, _ in records:
        if t == topic and value is not None:
            out.setdefault(key, []).append(int(value["n"]))
    return out


def mismatches(topic_latest: dict[Any, Any], grid: dict[Any, Any]) -> list[str]:
    """Every key whose latest value in the topic differs from the grid's (whole values)."""
    problems = [f"{k!r}: missing in the topic" for k in grid if k not in topic_latest]
    problems += [f"{k!r}: in the topic, not in the grid" for k in topic_latest if k not in grid]
    problems += [f"{k!r}: topic {topic_latest[k]!r} != grid {grid[k]!r}"
                 for k in grid if k in topic_latest and topic_latest[k] != grid[k]]
    return problems


def delete_topics(bootstrap: str, prefix: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
    if names:
        for future in admin.delete_topics(names).values():
            future.result(timeout=30)
