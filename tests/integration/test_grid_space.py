"""The Space adapter beyond the contract: values folded from partial operations, read
from another process, positions surviving restarts of the Space's process, retention,
and the write rule (idempotent by version, kept in the Space)."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from gridstream.errors import ConfigError, GridError, PositionLostError
from gridstream.grid import Change, Entry, GridAdapter, Key, Position, Write
from gridstream.grid._space_writes import wire
from gridstream.grid.space import SpaceAdapter, SpaceGridConfig
from gridstream.model import DocumentType, SpaceDocument
from gridstream.space import Change as SpaceChange
from gridstream.space import Space
from tests.integration.support.grid_space_proc import TEMPLATE, open_space

ROOT = Path(__file__).resolve().parents[2]
Row = tuple[Key, int, Any]


def run_owner(data_dir: Path, first: int, count: int, end: str) -> list[Row]:
    """Run workload steps in a process that owns the Space; what it printed."""
    out = subprocess.run(
        [sys.executable, "-m",
         "tests.integration.support.grid_space_proc", str(data_dir), str(first),
         str(count), end], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    return [tuple(orjson.loads(line)) for line in out.stdout.splitlines()]  # type: ignore[misc]


def reader(data_dir: Path) -> SpaceAdapter:
    return SpaceAdapter(SpaceGridConfig(str(data_dir), "grid-test"))


def rows(changes: list[Change]) -> list[Row]:
    return [(c.key, c.version or 0, c.value) for c in changes]


def read(adapter: GridAdapter, position: Position, limit: int | None = None,
         max_changes: int = 7) -> tuple[list[Change], Position]:
    """Read until the end (or ``limit`` changes)."""
    out: list[Change] = []
    while limit is None or len(out) < limit:
        batch = adapter.read_changes("Doc", position, max_changes)
        if not batch.changes and batch.position == position:
            break
        out.extend(batch.changes)
        position = batch.position
    return out, position


def test_values_after_partial_operations_match_the_space_from_another_process(
        tmp_path: Path) -> None:
    expected = run_owner(tmp_path, 0, 60, "close")
    with reader(tmp_path) as adapter:
        assert adapter.list_caches() == ["Doc", "Other"]
        changes, _ = read(adapter, adapter.start_position("Doc"))
        assert rows(changes) == expected
        assert all(c.cache == "Doc" and c.stream == "log" and c.seq == c.version
                   for c in changes)
        final = {k: v for k, _, v in expected}
        snapshot = [e for batch in adapter.snapshot("Doc", 3) for e in batch]
        assert {e.key: e.value for e in snapshot} == {k: v for k, v in final.items() if v}
        last = {k: ver for k, ver, _ in expected}
        assert all(e.version == last[e.key] for e in snapshot)


def test_positions_survive_restarts_of_the_space_process(tmp_path: Path) -> None:
    expected = run_owner(tmp_path, 0, 30, "close")
    with reader(tmp_path) as live:
        seen, position = read(live, live.start_position("Doc"), limit=15)
        expected += run_owner(tmp_path, 30, 30, "kill")  # no saved state on the way out
        more, position = read(live, position, limit=20)  # the same reader, across it
        stored = position.to_json()
    expected += run_owner(tmp_path, 60, 30, "close")
    expected += run_owner(tmp_path, 90, 10, "kill")
    with reader(tmp_path) as resumed:
        rest, position = read(resumed, Position.from_json(stored))
    assert len(seen) >= 15 and len(more) >= 20
    assert rows(seen + more + rest) == expected
    # from a position after the state saved at the last clean close: that state is the base
    later = run_owner(tmp_path, 100, 40, "kill")
    with reader(tmp_path) as resumed:
        tail, _ = read(resumed, Position.from_json(position.to_json()))
    assert rows(tail) == later


def test_retention_makes_an_older_position_lost(tmp_path: Path) -> None:
    space = open_space(str(tmp_path))
    try:
        space.write(SpaceDocument("Doc", {"id": "a", "score": 1}))
        with reader(tmp_path) as adapter:
            old = adapter.end_position("Doc")
            fill(space, 60)
            retain(space)
            with pytest.raises(PositionLostError) as caught:
                adapter.read_changes("Doc", old, 10)
            assert caught.value.cache == "Doc"
            assert caught.value.detail == "retention"
            start = adapter.start_position("Doc")
            assert start.next_seqs["log"] > old.next_seqs["log"]
            space.write(SpaceDocument("Doc", {"id": "b", "score": 2}))
            after = adapter.read_changes("Doc", start, 10).changes  # the start is readable
            assert [(c.key, c.value) for c in after] == [("b", {"id": "b", "score": 2})]
    finally:
        space.close()


def fill(space: Space, count: int) -> None:
    for i in range(count):
        space.write(SpaceDocument("Other", {"id": f"f{i}", "pad": "x" * 300}))


def retain(space: Space) -> None:
    """Save the state and let retention drop every segment it covers."""
    space.snapshot()
    log = space.log_reader()
    try:
        log.register("retainer")
        log.acknowledge("retainer", log.end_seq())
        log.unregister("retainer")
    finally:
        log.close()


def test_after_retention_values_come_from_the_saved_state(tmp_path: Path) -> None:
    space = open_space(str(tmp_path))
    try:
        space.write(SpaceDocument("Doc", {"id": "old", "score": 1, "meta": {"a": 1}}))
        fill(space, 60)
        retain(space)  # "old" was written whole below the log's new start
        space.write(SpaceDocument("Doc", {"id": "new", "score": 2}))
        with reader(tmp_path) as adapter:
            position = adapter.end_position("Doc")
            assert adapter.start_position("Doc").next_seqs["log"] < position.next_seqs["log"]
            space.change(TEMPLATE, "new", {"meta.b": 2})
            space.snapshot()  # a saved state newer than the position
            space.change(TEMPLATE, "old", [SpaceChange.increment("score", 5)])
            changes, _ = read(adapter, position)
        assert rows(changes) == [
            ("new", changes[0].version, wire(space.read(TEMPLATE, "new").properties)),
            ("old", changes[1].version, {"id": "old", "score": 6, "meta": {"a": 1}}),
        ]
    finally:
        space.close()


def test_after_retention_an_entry_that_cannot_be_rebuilt_loses_the_position(
        tmp_path: Path) -> None:
    space = open_space(str(tmp_path))
    try:
        space.write(SpaceDocument("Doc", {"id": "old", "score": 1}))
        fill(space, 60)
        retain(space)
        with reader(tmp_path) as adapter:
            position = adapter.end_position("Doc")
            space.change(TEMPLATE, "old", [SpaceChange.increment("score", 5)])
            space.snapshot()  # the saved state has "old" after the change: no base
            with pytest.raises(PositionLostError) as caught:
                adapter.read_changes("Doc", position, 10)
            assert caught.value.detail == "retention" and "'old'" in str(caught.value)
    finally:
        space.close()


def test_a_position_beyond_the_log_or_malformed_is_refused(tmp_path: Path) -> None:
    run_owner(tmp_path, 0, 5, "close")
    with reader(tmp_path) as adapter:
        end = adapter.end_position("Doc")
        beyond = Position(end.lineage, {"log": end.next_seqs["log"] + 5})
        with pytest.raises(PositionLostError, match="beyond the log's end") as caught:
            adapter.read_changes("Doc", beyond, 10)
        assert caught.value.detail == "ahead"
        with pytest.raises(ConfigError):
            adapter.read_changes("Doc", Position(end.lineage, {"0": 1}), 10)


def test_a_snapshot_and_the_stream_from_an_earlier_end_position_settle_by_version(
        tmp_path: Path) -> None:
    space = open_space(str(tmp_path))
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            key = f"k{i % 7}"
            if i % 3 == 0 or space.read(TEMPLATE, key) is None:
                space.write(SpaceDocument("Doc", {"id": key, "score": i}))
            elif i % 3 == 1:
                space.change(TEMPLATE, key, [SpaceChange.increment("score", 1)])
            else:
                space.remove(TEMPLATE, key)
            i += 1

    thread = threading.Thread(target=writer)
    try:
        with reader(tmp_path) as adapter:
            position = adapter.end_position("Doc")
            for i in range(5):  # in the snapshot and in the stream from the position
                space.write(SpaceDocument("Doc", {"id": f"k{i}", "score": -i}))
            thread.start()
            entries = [e for batch in adapter.snapshot("Doc", 5) for e in batch]
            stop.set()
            thread.join()
            changes, _ = read(adapter, position)
            final = settle(entries, changes)
        truth = {d.get("id"): wire(d.properties) for d in space.read_multiple(TEMPLATE)}
        assert final == truth
        assert any(c.version is not None and c.version <= max(
            (e.version or 0) for e in entries) for c in changes), "no overlap was exercised"
    finally:
        stop.set()
        space.close()


def settle(entries: list[Entry], changes: list[Change]) -> dict[Key, Any]:
    state: dict[Key, tuple[int, Any]] = {e.key: (e.version or 0, e.value) for e in entries}
    for c in changes:
        if c.version is not None and c.version > state.get(c.key, (0, None))[0]:
            state[c.key] = (c.version, c.value)
    return {k: v for k, (_, v) in state.items() if v is not None}


# ---------------------------------------------------------------- writing


def writable(data_dir: Path) -> SpaceAdapter:
    return SpaceAdapter(SpaceGridConfig(str(data_dir), "grid-test", writable=True))


def test_a_rerun_logs_nothing_and_versions_survive_a_restart(tmp_path: Path) -> None:
    batch = [Write("a", {"id": "a", "n": 1}, version=5), Write("b", None, version=6),
             Write("c", {"id": "c", "n": 3}, version=7)]
    with writable(tmp_path) as adapter:
        adapter.apply("Items", [Write("b", {"n": 0}, version=1)])
        adapter.apply("Items", batch)
        end = adapter.end_position("Items")
        adapter.apply("Items", batch)
        adapter.apply("Items", [Write("c", {"id": "c", "n": 3})])  # unversioned, same value
        assert adapter.end_position("Items") == end  # nothing logged
        assert adapter.read_changes("Items", end, 10).changes == []
    with writable(tmp_path) as adapter:  # the Space restarted: its marks did not go
        adapter.apply("Items", [Write("a", {"id": "a", "n": 0}, version=4),
                                Write("b", {"id": "b", "n": 0}, version=6)])
        assert adapter.end_position("Items") == end
        assert {e.key: e.value for b in adapter.snapshot("Items", 10) for e in b} == {
            "a": {"id": "a", "n": 1}, "c": {"id": "c", "n": 3}}
        assert adapter.list_caches() == ["Items"]  # the bookkeeping type is no cache
        adapter.apply("Items", [Write("b", {"n": 9}, version=8)])
        assert [(c.key, c.value) for c in adapter.read_changes("Items", end, 10).changes] \
            == [("b", {"n": 9, "id": "b"})]


def test_a_batch_is_applied_whole_or_not_at_all(tmp_path: Path) -> None:
    with writable(tmp_path) as adapter:
        adapter.apply("Items", [Write("a", {"n": 1})])
        end = adapter.end_position("Items")
        with pytest.raises(GridError, match="another id"):
            adapter.apply("Items", [Write("b", {"n": 2}), Write("c", {"id": "x"})])
        with pytest.raises(GridError, match="refused the batch"):
            adapter.apply("Items", [Write("b", {"n": 2}), Write("d", {"bad": {1.5: 2}})])  # type: ignore[dict-item]
        assert adapter.end_position("Items") == end
        assert [e.key for b in adapter.snapshot("Items", 10) for e in b] == ["a"]


def test_only_the_owner_writes(tmp_path: Path) -> None:
    with writable(tmp_path) as owner:
        owner.apply("Items", [Write("a", {"n": 1})])
        with reader(tmp_path) as read_only, pytest.raises(GridError, match="read-only"):
            read_only.apply("Items", [Write("a", {"n": 2})])
        with pytest.raises(GridError, match="for writing"):
            writable(tmp_path).open()
    space = Space.embedded("grid-test", data_dir=tmp_path)
    try:
        with SpaceAdapter(SpaceGridConfig(str(tmp_path), "grid-test"), space=space) as given:
            given.apply("Items", [Write("a", {"n": 3})])
        assert space.read(SpaceDocument("Items"), "a") == SpaceDocument("Items",
                                                                          {"n": 3, "id": "a"})
    finally:
        space.close()


def test_values_of_declared_kinds_go_in_restored_and_come_out_in_wire_form(
        tmp_path: Path) -> None:
    space = Space.embedded("grid-test", data_dir=tmp_path, fsync="never")
    try:
        space.introduce_type(DocumentType("Priced", fixed={"id": "int", "at": "date",
                                                           "price": "decimal", "tags": "set"}))
        value = {"id": 1, "at": "2024-01-02", "price": "10.50", "tags": ["a"], "free": "x"}
        with SpaceAdapter(SpaceGridConfig(str(tmp_path), "grid-test"), space=space) as adapter:
            start = adapter.end_position("Priced")
            adapter.apply("Priced", [Write(1, value)])
            stored = space.read(SpaceDocument("Priced"), 1)
            assert stored == SpaceDocument("Priced", {"id": 1, "at": dt.date(2024, 1, 2),
                                                      "price": Decimal("10.50"),
                                                      "tags": {"a"}, "free": "x"})
            assert [e.value for b in adapter.snapshot("Priced", 10) for e in b] == [value]
            assert [c.value for c in adapter.read_changes("Priced", start, 10).changes] \
                == [value]
            with pytest.raises(GridError, match="does not hold a value of its kind"):
                adapter.apply("Priced", [Write(2, {"at": "not a date"})])
    finally:
        space.close()
