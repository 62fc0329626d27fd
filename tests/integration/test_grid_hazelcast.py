"""What the Hazelcast adapter does beyond the shared contract, on the stack's member."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hazelcast import predicate
from hazelcast.core import HazelcastJsonValue

from gridstream.errors import ConfigError, GridError, PositionLostError
from gridstream.grid import CacheEvent, Position, Write
from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig, _writes
from gridstream.grid.hazelcast._writes import version_key, versions_map
from gridstream.stack.service import LocalService

pytestmark = pytest.mark.integration


@pytest.fixture()
def grid(hazelcast_service: LocalService) -> Iterator[HazelcastAdapter]:
    settings = hazelcast_service.settings  # type: ignore[attr-defined]
    adapter = HazelcastAdapter(HazelcastGridConfig(cluster_name=settings.cluster_name,
                                                   members=(hazelcast_service.address,)))
    with adapter:
        yield adapter


@pytest.fixture()
def cache(grid: HazelcastAdapter) -> Iterator[str]:
    name = f"gs-hz-{uuid.uuid4().hex[:10]}"
    yield name
    for map_name in (name, versions_map(name)):
        grid.client.get_map(map_name).blocking().destroy()


def test_values_are_json_that_predicates_query(grid: HazelcastAdapter, cache: str) -> None:
    grid.apply(cache, [Write(i, {"n": i, "tag": {"even": i % 2 == 0}}) for i in range(10)])
    raw = grid.client.get_map(cache).blocking()
    assert isinstance(raw.get(3), HazelcastJsonValue)
    found = raw.values(predicate.and_(predicate.greater("n", 5), predicate.equal("tag.even", True)))
    assert sorted(v.loads()["n"] for v in found) == [6, 8]


def test_internal_maps_are_not_caches(grid: HazelcastAdapter, cache: str) -> None:
    grid.apply(cache, [Write("a", {"n": 1}, version=1)])
    names = grid.list_caches()
    assert cache in names
    assert not [n for n in names if n.startswith("__")]
    held = grid.client.get_map(versions_map(cache)).blocking()
    assert held.get(version_key("default", "a")) == 1 and held.get("a") is None


def test_watch_reports_a_destroyed_map(grid: HazelcastAdapter, cache: str) -> None:
    events: list[CacheEvent] = []
    grid.apply(cache, [Write("a", {"n": 1})])
    stop = grid.watch_caches(events.append)
    try:
        grid.client.get_map(cache).blocking().destroy()
        deadline = time.monotonic() + 30
        while CacheEvent("removed", cache) not in events:
            assert time.monotonic() < deadline, events
            time.sleep(0.05)
    finally:
        stop()
    assert not [e for e in events if e.cache.startswith("__")]


def test_a_recreated_map_with_a_shorter_journal_is_a_lost_position(
        grid: HazelcastAdapter, cache: str) -> None:
    start = grid.end_position(cache)
    grid.apply(cache, [Write("a", {"n": n}) for n in range(3)])
    grid.apply(cache, [Write("a", {"n": 3})])
    read = grid.read_changes(cache, start, 100)
    assert [c.value for c in read.changes] == [{"n": 2}, {"n": 3}]  # put_all keeps the last
    grid.client.get_map(cache).blocking().destroy()  # the journal goes with the map
    grid.apply(cache, [Write("a", {"n": 9})])
    with pytest.raises(PositionLostError) as lost:
        grid.read_changes(cache, read.position, 100)
    assert lost.value.detail == "ahead"


def test_a_recreated_map_with_a_longer_journal_is_a_lost_position(
        grid: HazelcastAdapter, cache: str) -> None:
    start = grid.end_position(cache)
    for n in range(3):
        grid.apply(cache, [Write("a", {"n": n})])
    read = grid.read_changes(cache, start, 100)
    partition = grid.client.partition_service.get_partition_id("a")
    assert read.position.next_seqs[str(partition)] == 3
    same = [k for k in (f"x{i}" for i in range(20000))
            if grid.client.partition_service.get_partition_id(k) == partition][:4]
    grid.client.get_map(cache).blocking().destroy()
    for key in same:
        grid.apply(cache, [Write(key, {"new": key})])
    with pytest.raises(PositionLostError) as lost:
        grid.read_changes(cache, Position.from_json(read.position.to_json()), 100)
    assert lost.value.detail == "recreated"


def test_values_that_are_not_json_objects_are_errors(grid: HazelcastAdapter, cache: str) -> None:
    start = grid.end_position(cache)
    raw = grid.client.get_map(cache).blocking()
    raw.put("text", "plain string")
    with pytest.raises(GridError, match="key 'text': a value of type str is not JSON"):
        grid.read_changes(cache, start, 10)
    with pytest.raises(GridError, match="key 'text': a value of type str is not JSON"):
        list(grid.snapshot(cache, 10))  # the entry named: its key says which one to fix
    with pytest.raises(GridError, match="key 'text': a value of type str is not JSON"):
        grid.get_all(cache, ["text"])
    raw.delete("text")
    raw.put("list", HazelcastJsonValue("[1, 2]"))
    with pytest.raises(GridError, match="key 'list': a value is JSON list, not an object"):
        list(grid.snapshot(cache, 10))


def test_a_position_of_other_streams_is_refused(grid: HazelcastAdapter, cache: str) -> None:
    end = grid.end_position(cache)
    for streams in ({"log": 0}, dict(list(end.next_seqs.items())[:5])):
        with pytest.raises(ConfigError):
            grid.read_changes(cache, Position(end.lineage, streams), 10)
    with pytest.raises(PositionLostError):
        grid.read_changes(cache, dataclasses.replace(end, lineage=str(uuid.uuid4())), 10)


def test_a_rerun_after_a_partial_first_run_ends_as_one_run(
        grid: HazelcastAdapter, cache: str) -> None:
    batch = [Write("a", {"n": 1}), Write("b", {"n": 1}), Write("a", None),
             Write(5, {"n": 5}), Write("b", {"n": 2}), Write("a", {"n": 3}), Write("c", None)]
    grid.apply(cache, [Write("c", {"n": 0}), Write("b", {"n": 0})])
    for cut in range(len(batch) + 1):  # a first run that stopped after `cut` writes
        grid.apply(cache, batch[:cut])
        grid.apply(cache, batch)
        state = {e.key: e.value for b in grid.snapshot(cache, 100) for e in b}
        assert state == {"a": {"n": 3}, "b": {"n": 2}, 5: {"n": 5}}, cut


def test_concurrent_versioned_writers_keep_the_newest(
        grid: HazelcastAdapter, cache: str) -> None:
    keys = [f"k{i}" for i in range(30)]
    errors: list[BaseException] = []

    def writer(versions: range) -> None:
        try:
            with HazelcastAdapter(grid.config) as own:
                for v in versions:
                    value = None if v % 7 == 0 else {"v": v}
                    own.apply(cache, [Write(k, value, version=v) for k in keys])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(range(start, 60, 3),))
               for start in (1, 2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    state = {e.key: e.value for b in grid.snapshot(cache, 100) for e in b}
    assert state == {k: {"v": 59} for k in keys}
    grid.apply(cache, [Write(k, {"v": 1}, version=1) for k in keys])  # late and old
    grid.apply(cache, [Write(k, None, version=58) for k in keys])  # older than 59
    assert {e.key: e.value for b in grid.snapshot(cache, 100) for e in b} == state


def test_writers_of_distinct_sources_do_not_compare_versions(
        grid: HazelcastAdapter, cache: str) -> None:
    grid.apply(cache, [Write("k", {"from": "default"}, version=10)])
    other = dataclasses.replace(grid.config, source="other")
    with HazelcastAdapter(other) as second:
        second.apply(cache, [Write("k", {"from": "other"}, version=1)])
    assert [e.value for b in grid.snapshot(cache, 10) for e in b] == [{"from": "other"}]
    grid.apply(cache, [Write("k", {"from": "default, older"}, version=9)])
    assert [e.value for b in grid.snapshot(cache, 10) for e in b] == [{"from": "other"}]


def test_a_writer_stalled_past_its_timeout_does_not_overwrite_a_newer_write(
        grid: HazelcastAdapter, cache: str, monkeypatch: pytest.MonkeyPatch) -> None:
    stalled = threading.Event()
    transaction = _writes._transaction

    def stalling(client: Any, name: str, writes: list[Write],
                 encode: Callable[[Write], Any], *args: Any, **kwargs: Any) -> int:
        def slow(write: Write) -> Any:
            # the data write, inside the transaction, after its version was checked
            if threading.current_thread().name == "stalls" and not stalled.is_set():
                stalled.set()
                time.sleep(3.0)
            return encode(write)
        return int(transaction(client, name, writes, slow, *args, **kwargs))

    monkeypatch.setattr(_writes, "_transaction", stalling)
    errors: list[GridError] = []

    def stalling_writer() -> None:
        short = dataclasses.replace(grid.config, invocation_timeout_s=1.0)  # 2 s to finish
        with HazelcastAdapter(short) as writer:
            try:
                writer.apply(cache, [Write("k", {"v": 1}, version=1)])
            except GridError as exc:
                errors.append(exc)

    thread = threading.Thread(target=stalling_writer, name="stalls")
    thread.start()
    assert stalled.wait(30)
    grid.apply(cache, [Write("k", {"v": 2}, version=2)])
    thread.join(60)
    assert [e.value for b in grid.snapshot(cache, 10) for e in b] == [{"v": 2}]
    assert len(errors) == 1  # the stalled writer failed and says so
    grid.apply(cache, [Write("k", {"v": 1}, version=1)])  # its re-run
    assert [e.value for b in grid.snapshot(cache, 10) for e in b] == [{"v": 2}]


def test_a_versioned_batch_larger_than_one_transaction(
        grid: HazelcastAdapter, cache: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_writes, "TX_KEYS", 2)
    grid.apply(cache, [Write(3, {"n": 0}, version=5)])
    grid.apply(cache, [Write(k, {"n": 1}, version=4) for k in ("a", "b", "c", 1, 2, 3)])
    state = {e.key: e.value for b in grid.snapshot(cache, 100) for e in b}
    assert state == {"a": {"n": 1}, "b": {"n": 1}, "c": {"n": 1}, 1: {"n": 1}, 2: {"n": 1},
                     3: {"n": 0}}


def test_behind_counts_the_journal_events_after_a_position(
        grid: HazelcastAdapter, cache: str) -> None:
    grid.apply(cache, [Write(i, {"n": i}) for i in range(5)])
    start = grid.end_position(cache)
    assert grid.behind(cache, start) == 0
    grid.apply(cache, [Write(i, {"n": -i}) for i in range(30)])  # 30 puts, 271 partitions
    grid.apply(cache, [Write(3, None)])
    assert grid.behind(cache, start) == 31
    read = grid.read_changes(cache, start, 10)
    assert grid.behind(cache, read.position) == 31 - len(read.changes)
    assert grid.behind(cache, grid.end_position(cache)) == 0
    other = Position("another-cluster", dict(start.next_seqs))
    assert grid.behind(cache, other) is None
