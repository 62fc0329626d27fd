"""Per-grid drivers for the grid adapter contract suite (``test_grid_contract.py``).

The suite talks to every grid through the contract (``gridstream.grid``) only. What the
contract cannot do — change the grid behind the adapter's back, force a position to be
lost — a ``GridDriver`` does, one per grid. ``GRIDS`` maps each grid's name to a
function that sets up its driver and its adapter factory (a context manager, so it
tears the grid down after the test).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import orjson
from hazelcast.client import HazelcastClient
from hazelcast.config import IntType
from hazelcast.core import HazelcastJsonValue

from gridstream import stack
from gridstream.grid import GridAdapter, Key, Position, Value
from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig
from gridstream.grid.hazelcast._writes import versions_map
from gridstream.grid.space import SpaceAdapter, SpaceGridConfig
from gridstream.model import SpaceDocument
from gridstream.space import Space
from gridstream.stack.hazelcast import PARTITIONS, HazelcastService

AdapterFactory = Callable[[], GridAdapter]
"""A new adapter object, not opened yet, each call."""


class GridDriver(Protocol):
    """Changes a grid directly, not through the adapter under test."""

    def new_cache(self) -> str:
        """A cache name unique to this test (the cache does not exist yet)."""

    def put(self, cache: str, key: Key, value: Value) -> None:
        """Write an entry, creating the cache if missing."""

    def remove(self, cache: str, key: Key) -> None:
        """Remove an entry."""

    def lose_position(self, adapter: GridAdapter, cache: str) -> Position:
        """A position of ``cache`` that the grid then made lost (retention, journal
        overflow, ...): reading from it must raise ``PositionLostError``."""


GridSetup = Callable[[Path], contextlib.AbstractContextManager[tuple[GridDriver, AdapterFactory]]]


# ---------------------------------------------------------------- the Space


class SpaceDriver:
    """Owns an embedded Space (small segments, so retention can remove some)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.name = "contract"
        self.space = Space.embedded(self.name, data_dir=data_dir, segment_bytes=4096,
                                    fsync="never")

    def config(self) -> SpaceGridConfig:
        return SpaceGridConfig(str(self.data_dir), self.name, poll_interval_s=0.1)

    def new_cache(self) -> str:
        return f"GridTest{uuid.uuid4().hex[:10]}"

    def put(self, cache: str, key: Key, value: Value) -> None:
        self.space.write(SpaceDocument(cache, {**value, "id": key}))

    def remove(self, cache: str, key: Key) -> None:
        self.space.remove(cache, key)

    def lose_position(self, adapter: GridAdapter, cache: str) -> Position:
        position = adapter.end_position(cache)
        for i in range(200):  # roll segments past the position
            self.put(cache, f"filler-{i}", {"pad": "x" * 200})
        self.space.snapshot()
        reader = self.space.log_reader()
        try:
            consumer = f"contract-{uuid.uuid4().hex[:8]}"
            reader.register(consumer)
            reader.acknowledge(consumer, reader.end_seq())
            reader.unregister(consumer)
            assert reader.first_seq() > position.next_seqs["log"]
        finally:
            reader.close()
        return position

    def close(self) -> None:
        self.space.close()


@contextlib.contextmanager
def space_grid(tmp: Path) -> Iterator[tuple[GridDriver, AdapterFactory]]:
    driver = SpaceDriver(tmp / "space")
    try:
        yield driver, lambda: SpaceAdapter(driver.config(), space=driver.space)
    finally:
        driver.close()


# ---------------------------------------------------------------- Hazelcast


class HazelcastDriver:
    """Writes the stack's Hazelcast member with a client of its own; destroys the maps
    it named (and their version maps) at the end."""

    def __init__(self, service: HazelcastService) -> None:
        self.service = service
        self.client = HazelcastClient(
            cluster_name=service.settings.cluster_name, cluster_members=[service.address],
            default_int_type=IntType.LONG,
        )
        self.caches: list[str] = []

    def config(self) -> HazelcastGridConfig:
        return HazelcastGridConfig(cluster_name=self.service.settings.cluster_name,
                                   members=(self.service.address,))

    def new_cache(self) -> str:
        self.caches.append(f"gs-grid-{uuid.uuid4().hex[:10]}")
        return self.caches[-1]

    def put(self, cache: str, key: Key, value: Value) -> None:
        text = orjson.dumps(value).decode()
        self.client.get_map(cache).blocking().put(key, HazelcastJsonValue(text))

    def remove(self, cache: str, key: Key) -> None:
        self.client.get_map(cache).blocking().delete(key)

    def lose_position(self, adapter: GridAdapter, cache: str) -> Position:
        """Overflow the journal of one partition: more events for one key than its part
        of the journal's capacity holds."""
        position = adapter.end_position(cache)
        per_partition = -(-self.service.settings.journal_capacity // PARTITIONS)
        entries = self.client.get_map(cache).blocking()
        for i in range(per_partition + 10):
            entries.set("overflowing", HazelcastJsonValue(f'{{"n": {i}}}'))
        return position

    def close(self) -> None:
        try:
            for cache in self.caches:
                self.client.get_map(cache).blocking().destroy()
                self.client.get_map(versions_map(cache)).blocking().destroy()
        finally:
            self.client.shutdown()


@contextlib.contextmanager
def hazelcast_grid(tmp: Path) -> Iterator[tuple[GridDriver, AdapterFactory]]:
    service = stack.services(["hazelcast"])[0]  # the stack's member; started if down
    assert isinstance(service, HazelcastService)
    service.up()
    driver = HazelcastDriver(service)
    try:
        yield driver, lambda: HazelcastAdapter(driver.config())
    finally:
        driver.close()


GRIDS: dict[str, GridSetup] = {
    "space": space_grid,
    "hazelcast": hazelcast_grid,
}
