"""A grid source's lag: from the last batch's end offset and the grid's end now."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gridstream.connect.source import lag as lag_module
from gridstream.connect.source.lag import GridLag, end_offset
from gridstream.connect.source.offsets import CacheState, SourceOffset
from gridstream.errors import GridError
from gridstream.grid.contract import Position
from gridstream.grid.settings import HazelcastGridSettings, SpaceGridSettings


class Grid:
    """``behind`` from fixed end positions; counts the calls and the opens."""

    def __init__(self, ends: dict[str, Position]) -> None:
        self.ends, self.calls, self.opened, self.fail = ends, 0, 0, False

    def open(self) -> None:
        self.opened += 1

    def close(self) -> None:
        return None

    def behind(self, cache: str, position: Position) -> int | None:
        self.calls += 1
        if self.fail:
            raise GridError("no member answers")
        end = self.ends[cache]
        if end.lineage != position.lineage:
            return None
        return sum(seq - position.next_seqs.get(s, seq) for s, seq in end.next_seqs.items())


def _measured(lag: GridLag, progress: dict[str, Any]) -> dict[str, int]:
    """Start a measurement, wait for it, read its figures."""
    lag.measure(progress)
    lag.settle()
    return lag.measure({"sources": []})


def _progress(caches: dict[str, CacheState]) -> dict[str, Any]:
    offset = orjson.dumps(SourceOffset(caches, 1).to_dict()).decode()
    return {"sources": [{"description": "gridstream-grid", "endOffset": offset}]}


@pytest.fixture
def grid(monkeypatch: pytest.MonkeyPatch) -> Grid:
    made = Grid({"a": Position("c1", {"0": 10, "1": 7}), "b": Position("c1", {"0": 4}),
                 "gone": Position("c2", {"0": 9})})
    monkeypatch.setattr(lag_module, "grid_adapter", lambda settings: made)
    monkeypatch.setattr(lag_module, "PER_CACHE_S", 0.0)
    return made


def test_hazelcast_lag_is_per_map_with_the_snapshot_rows_not_yet_emitted(grid: Grid) -> None:
    lag = GridLag(HazelcastGridSettings(kind="hazelcast"), every_s=0)
    progress = _progress({
        "a": CacheState(Position("c1", {"0": 8, "1": 7})),
        "b": CacheState(Position("c1", {"0": 1}), "snap.arrow", 40, 100),
        "gone": CacheState(Position("c0", {"0": 1}))})  # another lineage: no figure
    assert lag.measure(progress) == {}  # measured on a thread: nothing yet
    lag.settle()
    assert lag.measure({"sources": []}) == {"a": 2, "b": 3 + 60}  # no offset: the last


def test_space_lag_is_the_logs_operations_after_the_oldest_cache(grid: Grid) -> None:
    grid.ends = {"a": Position("log1", {"log": 50}), "b": Position("log1", {"log": 50})}
    lag = GridLag(SpaceGridSettings(kind="space", data_dir="/d", space_name="s"), every_s=0)
    progress = _progress({"a": CacheState(Position("log1", {"log": 45})),
                          "b": CacheState(Position("log1", {"log": 30}), "s.arrow", 4, 10),
                          "c": CacheState(Position("log1", {"log": 45}), "t.arrow", 1, 3)})
    grid.ends["c"] = grid.ends["a"]
    # not 5 + 20 + 5: one log, read once; plus every cache's snapshot rows not yet sent
    assert _measured(lag, progress) == {"log": 20 + 6 + 2}


def test_a_slow_grid_never_holds_up_the_caller(grid: Grid) -> None:
    import threading

    answer = threading.Event()
    slow = grid.behind
    grid.behind = lambda cache, position: (answer.wait(), slow(cache, position))[1]  # type: ignore[method-assign]
    lag = GridLag(HazelcastGridSettings(kind="hazelcast"), every_s=0)
    progress = _progress({"a": CacheState(Position("c1", {"0": 0, "1": 0}))})
    assert lag.measure(progress) == {} and lag.measure(progress) == {}  # at once, twice
    answer.set()
    lag.settle()
    assert lag.measure({"sources": []}) == {"a": 17} and grid.calls == 1  # one at a time


def test_measured_at_most_every_interval_and_an_unreachable_grid_is_no_error(
        grid: Grid) -> None:
    lag = GridLag(HazelcastGridSettings(kind="hazelcast"), every_s=3600)
    progress = _progress({"a": CacheState(Position("c1", {"0": 0, "1": 0}))})
    assert _measured(lag, progress) == {"a": 17}
    assert _measured(lag, progress) == {"a": 17} and grid.calls == 1  # not asked again yet
    lag.every_s = 0
    grid.fail = True
    assert _measured(lag, progress) == {"a": 17}  # the last figures; the adapter let go
    grid.fail = False
    assert _measured(lag, _progress({"a": CacheState(Position("c1", {"0": 10, "1": 7}))})) \
        == {"a": 0}
    assert grid.opened == 2  # opened again after the failure
    lag.close()
    assert _measured(lag, progress) == {"a": 0} and grid.calls == 3  # closed: none since


def test_many_caches_are_measured_less_often(grid: Grid, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    monkeypatch.setattr(lag_module, "PER_CACHE_S", 3600.0)
    lag = GridLag(HazelcastGridSettings(kind="hazelcast"), every_s=0)
    progress = _progress({"a": CacheState(Position("c1", {"0": 0, "1": 0}))})
    assert _measured(lag, progress) == {"a": 17}
    assert _measured(lag, progress) == {"a": 17} and grid.calls == 1  # an hour per cache


def test_end_offset_reads_only_a_source_connectors_offset() -> None:
    assert end_offset(None) is None
    assert end_offset({"sources": [{"endOffset": '{"topic": {"0": 5}}'}]}) is None
    assert end_offset({"sources": [{"endOffset": "not json"}]}) is None
    found = end_offset(_progress({"a": CacheState(Position("c1", {"0": 3}))}))
    assert found is not None and found.caches["a"].pos.next_seqs == {"0": 3}
