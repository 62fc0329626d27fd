"""The grid adapter contract, checked on every grid (one param per grid).

Each test uses only the contract (``gridstream.grid``) and the grid's driver
(``grid_drivers.GRIDS``) for what the contract cannot do. Values are compared whole.
Values carry their key under ``"id"`` (an entity's shape, as grids keep it).
Across keys a change stream need not be ordered (Hazelcast orders per partition), so
order is checked per key.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gridstream.errors import ConfigError, PositionLostError
from gridstream.grid import CacheEvent, Change, GridAdapter, Key, Position, Value, Write
from tests.integration.support.grid_drivers import GRIDS, AdapterFactory, GridDriver

WAIT_S = 30.0


@pytest.fixture(params=sorted(GRIDS))
def grid(request: pytest.FixtureRequest, tmp_path: Path
         ) -> Iterator[tuple[GridDriver, AdapterFactory]]:
    with GRIDS[request.param](tmp_path) as setup:
        yield setup


@pytest.fixture()
def driver(grid: tuple[GridDriver, AdapterFactory]) -> GridDriver:
    return grid[0]


@pytest.fixture()
def adapter_factory(grid: tuple[GridDriver, AdapterFactory]) -> AdapterFactory:
    return grid[1]


@pytest.fixture()
def adapter(adapter_factory: AdapterFactory) -> Iterator[GridAdapter]:
    with adapter_factory() as opened:
        yield opened


def value(key: Key, n: int, **extra: Any) -> Value:
    """A value with nested maps, lists, nulls, floats and booleans."""
    return {"id": key, "name": f"name-{key}-{n}", "n": n, "ratio": n / 4, "on": n % 2 == 0,
            "tags": [f"t{n}", "x"], "address": {"city": f"c{n}", "zip": None}, **extra}


def read_all(adapter: GridAdapter, cache: str, position: Position, expected: int,
             max_changes: int = 1000) -> tuple[list[Change], Position]:
    """Read until ``expected`` changes came (fails after ``WAIT_S``), then check that
    nothing more comes."""
    changes: list[Change] = []
    deadline = time.monotonic() + WAIT_S
    while len(changes) < expected:
        assert time.monotonic() < deadline, f"{len(changes)} of {expected} changes came"
        batch = adapter.read_changes(cache, position, max_changes)
        assert len(batch.changes) <= max_changes  # the drivers change one entry at a time
        changes.extend(batch.changes)
        position = batch.position
        if not batch.changes:
            time.sleep(0.05)
    extra = adapter.read_changes(cache, position, max_changes)
    assert extra.changes == []
    return changes, extra.position


def per_key(changes: list[Change]) -> dict[Key, list[Value | None]]:
    """Each key's values in stream order; versions (when kept) grow per key."""
    out: dict[Key, list[Value | None]] = {}
    last: dict[Key, int] = {}
    for change in changes:
        out.setdefault(change.key, []).append(change.value)
        if change.version is not None:
            assert change.version > last.get(change.key, -1), change
            last[change.key] = change.version
    return out


def snapshot_of(adapter: GridAdapter, cache: str, batch_size: int = 1000) -> dict[Key, Value]:
    out: dict[Key, Value] = {}
    for batch in adapter.snapshot(cache, batch_size):
        assert 0 < len(batch) <= batch_size
        for entry in batch:
            assert entry.key not in out, f"{entry.key!r} twice in the snapshot"
            out[entry.key] = entry.value
    return out


def wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# ---------------------------------------------------------------- discovery


def test_list_caches_names_every_cache(driver: GridDriver, adapter: GridAdapter) -> None:
    first, second = driver.new_cache(), driver.new_cache()
    assert first not in adapter.list_caches()
    driver.put(first, "a", value("a", 1))
    adapter.apply(second, [Write("b", value("b", 1))])
    wait_for(lambda: {first, second} <= set(adapter.list_caches()), "both caches listed")
    names = adapter.list_caches()
    assert names == sorted(names)


def test_watch_caches_reports_a_new_cache(driver: GridDriver, adapter: GridAdapter) -> None:
    events: list[CacheEvent] = []
    lock = threading.Lock()

    def listener(event: CacheEvent) -> None:
        with lock:
            events.append(event)

    cache = driver.new_cache()
    stop = adapter.watch_caches(listener)
    try:
        driver.put(cache, 1, value(1, 1))
        wait_for(lambda: CacheEvent("created", cache) in events, f"{cache} reported")
    finally:
        stop()
    later = driver.new_cache()
    driver.put(later, 1, value(1, 1))
    time.sleep(1.0)
    with lock:
        assert CacheEvent("created", later) not in events, "reported after stop()"
        assert events.count(CacheEvent("created", cache)) == 1


# ---------------------------------------------------------------- snapshot


def test_snapshot_holds_every_entry_with_its_value(driver: GridDriver,
                                                   adapter: GridAdapter) -> None:
    cache = driver.new_cache()
    expected: dict[Key, Value] = {}
    for i in range(40):
        key: Key = i if i % 2 else f"k{i}"
        expected[key] = value(key, i)
        driver.put(cache, key, expected[key])
    for i in range(0, 40, 5):  # overwritten
        key = i if i % 2 else f"k{i}"
        expected[key] = value(key, 100 + i, more={"deep": [1, {"x": None}]})
        driver.put(cache, key, expected[key])
    for i in range(1, 40, 7):  # removed
        key = i if i % 2 else f"k{i}"
        driver.remove(cache, key)
        del expected[key]
    assert snapshot_of(adapter, cache, batch_size=7) == expected


# ---------------------------------------------------------------- change stream


def test_stream_gives_changes_in_order_with_values(driver: GridDriver,
                                                   adapter: GridAdapter) -> None:
    cache = driver.new_cache()
    driver.put(cache, "before", value("before", 0))  # the cache exists, this is not read
    start = adapter.end_position(cache)
    expected: dict[Key, list[Value | None]] = {}
    for n in range(3):
        for key in ("a", "b", 7):
            v = value(key, n)
            driver.put(cache, key, v)
            expected.setdefault(key, []).append(v)
    driver.remove(cache, "b")
    expected["b"].append(None)
    changes, _ = read_all(adapter, cache, start, expected=10, max_changes=4)
    assert all(c.cache == cache for c in changes)
    assert per_key(changes) == expected
    assert [c.removed for c in changes if c.key == "b"] == [False, False, False, True]


def test_resume_from_a_stored_position_misses_and_repeats_nothing(
        driver: GridDriver, adapter_factory: AdapterFactory) -> None:
    cache = driver.new_cache()
    driver.put(cache, "seed", value("seed", 0))
    expected: dict[Key, list[Value | None]] = {}

    def change(key: Key, n: int | None) -> None:
        if n is None:
            driver.remove(cache, key)
            expected[key].append(None)
        else:
            driver.put(cache, key, value(key, n))
            expected.setdefault(key, []).append(value(key, n))

    with adapter_factory() as first:
        position = first.end_position(cache)
        for n in range(5):
            change(f"k{n % 3}", n)
        change("k0", None)
        seen, position = read_all(first, cache, position, expected=6, max_changes=2)
        stored = position.to_json()
    for n in range(5, 9):  # made while no adapter is open
        change(f"k{n % 3}", n)
    change("k1", None)
    with adapter_factory() as second:
        resumed, _ = read_all(second, cache, Position.from_json(stored), expected=5,
                              max_changes=3)
    assert per_key(seen + resumed) == expected


def test_lost_position_raises(driver: GridDriver, adapter: GridAdapter) -> None:
    cache = driver.new_cache()
    driver.put(cache, "a", value("a", 1))
    lost = driver.lose_position(adapter, cache)
    with pytest.raises(PositionLostError) as caught:
        adapter.read_changes(cache, Position.from_json(lost.to_json()), 10)
    assert caught.value.cache == cache
    assert caught.value.detail in {"retention", "overflow"}


def test_position_of_another_grid_is_lost(driver: GridDriver, adapter: GridAdapter) -> None:
    cache = driver.new_cache()
    driver.put(cache, "a", value("a", 1))
    foreign = dataclasses.replace(adapter.end_position(cache), lineage="another-grid")
    with pytest.raises(PositionLostError) as caught:
        adapter.read_changes(cache, foreign, 10)
    assert caught.value.cache == cache
    assert caught.value.detail == "lineage"


def test_position_of_other_streams_is_a_config_error(driver: GridDriver,
                                                     adapter: GridAdapter) -> None:
    cache = driver.new_cache()
    driver.put(cache, "a", value("a", 1))
    end = adapter.end_position(cache)
    for streams in ({"other": 0}, {**end.next_seqs, "other": 0}):
        with pytest.raises(ConfigError):
            adapter.read_changes(cache, Position(end.lineage, streams), 10)


# ---------------------------------------------------------------- apply


def test_apply_puts_and_removes_creating_the_cache(driver: GridDriver,
                                                   adapter: GridAdapter) -> None:
    cache = driver.new_cache()
    assert cache not in adapter.list_caches()
    puts = {key: value(key, i) for i, key in enumerate(["a", "b", 3, 4])}
    adapter.apply(cache, [Write(k, v) for k, v in puts.items()])
    assert cache in adapter.list_caches()
    assert snapshot_of(adapter, cache) == puts
    start = adapter.end_position(cache)
    adapter.apply(cache, [Write("a", None), Write(3, value(3, 30)), Write("zz", None)])
    assert snapshot_of(adapter, cache) == {"b": puts["b"], 3: value(3, 30), 4: puts[4]}
    changes, _ = read_all(adapter, cache, start, expected=2)
    assert per_key(changes) == {"a": [None], 3: [value(3, 30)]}


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "unversioned"])
def test_the_same_batch_applied_twice_changes_nothing(
        driver: GridDriver, adapter_factory: AdapterFactory, versioned: bool) -> None:
    cache = driver.new_cache()
    batch = [Write(k, value(k, i), version=10 + i if versioned else None)
             for i, k in enumerate(["a", "b", 3])]
    batch += [Write("b", None, version=20 if versioned else None),
              Write("c", value("c", 9), version=21 if versioned else None)]
    with adapter_factory() as adapter:
        adapter.apply(cache, batch)
        after_first = snapshot_of(adapter, cache)
    assert after_first == {"a": value("a", 0), 3: value(3, 2), "c": value("c", 9)}
    with adapter_factory() as adapter:  # a re-run, by a new adapter object
        adapter.apply(cache, batch)
        assert snapshot_of(adapter, cache) == after_first


def test_an_older_batch_arriving_late_is_skipped(driver: GridDriver,
                                                 adapter: GridAdapter) -> None:
    cache = driver.new_cache()
    newer = [Write("a", value("a", 2), version=2), Write("b", None, version=2),
             Write("c", value("c", 2), version=2)]
    older = [Write("a", value("a", 1), version=1), Write("b", value("b", 1), version=1),
             Write("c", None, version=1), Write("d", value("d", 1), version=1)]
    adapter.apply(cache, [Write("b", value("b", 0), version=0)])
    adapter.apply(cache, newer)
    adapter.apply(cache, older)
    assert snapshot_of(adapter, cache) == {"a": value("a", 2), "c": value("c", 2),
                                           "d": value("d", 1)}


def test_an_equal_version_is_skipped(driver: GridDriver, adapter: GridAdapter) -> None:
    cache = driver.new_cache()
    adapter.apply(cache, [Write("a", value("a", 1), version=5),
                          Write("a", value("a", 2), version=5),
                          Write("b", value("b", 1), version=5)])
    assert snapshot_of(adapter, cache) == {"a": value("a", 1), "b": value("b", 1)}
    adapter.apply(cache, [Write("a", value("a", 3), version=5), Write("b", None, version=5)])
    assert snapshot_of(adapter, cache) == {"a": value("a", 1), "b": value("b", 1)}


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "unversioned"])
def test_without_overwrite_an_entry_held_is_never_changed_nor_removed(
        driver: GridDriver, adapter_factory: AdapterFactory, versioned: bool) -> None:
    cache = driver.new_cache()
    driver.put(cache, "held", value("held", 1))
    driver.put(cache, 7, value(7, 1))

    def v(n: int) -> int | None:
        return n if versioned else None

    batch = [Write("held", value("held", 2), version=v(10)), Write(7, None, version=v(11)),
             Write("new", None, version=v(12)), Write("new", value("new", 1), version=v(13)),
             Write("new", value("new", 2), version=v(14)), Write(8, value(8, 1), version=v(15))]
    expected = {"held": value("held", 1), 7: value(7, 1), "new": value("new", 1),
                8: value(8, 1)}
    with adapter_factory() as adapter:
        adapter.apply(cache, batch, overwrite=False)
        assert snapshot_of(adapter, cache) == expected
    with adapter_factory() as adapter:  # a re-run changes nothing
        adapter.apply(cache, batch, overwrite=False)
        adapter.apply(cache, [Write("new", value("new", 3), version=v(20)),
                              Write(8, None, version=v(21))], overwrite=False)
        assert snapshot_of(adapter, cache) == expected
        adapter.apply(cache, [Write(8, None, version=v(22))])  # overwrite (the default)
        del expected[8]
        assert snapshot_of(adapter, cache) == expected


def test_get_all_reads_the_current_values_of_the_keys_held(
        driver: GridDriver, adapter: GridAdapter, adapter_factory: AdapterFactory) -> None:
    cache = driver.new_cache()
    assert adapter.get_all(cache, ["a", 1]) == {}  # no such cache yet
    for key, n in (("a", 1), ("b", 2), (7, 3)):
        driver.put(cache, key, value(key, n))
    assert adapter.get_all(cache, ["a", 7, "missing", "7"]) == {"a": value("a", 1),
                                                                 7: value(7, 3)}
    assert adapter.get_all(cache, []) == {}
    driver.put(cache, "a", value("a", 10))
    driver.remove(cache, "b")
    driver.put(cache, "c", value("c", 4))
    # the same adapter sees every change made since its last call
    assert adapter.get_all(cache, ["a", "b", "c"]) == {"a": value("a", 10),
                                                       "c": value("c", 4)}
    with adapter_factory() as other:  # and a new one (another task) too
        assert other.get_all(cache, ["a", "b", "c", 7]) == {
            "a": value("a", 10), "c": value("c", 4), 7: value(7, 3)}
