"""The source's offset planning: pure logic over a fake grid."""

from __future__ import annotations

import pytest

from gridstream.connect.config import FailoverPolicy
from gridstream.connect.source.offsets import (
    CacheState,
    Planner,
    SnapshotMade,
    SourceOffset,
    Work,
    batch_work,
    initial_offset,
)
from gridstream.errors import ConfigError, PositionLostError
from gridstream.grid.contract import Position


def pos(seq: int, lineage: str = "L") -> Position:
    return Position(lineage, {"log": seq})


class FakeGrid:
    """Caches with an end and a start sequence; snapshots are named in order."""

    shared_stream = False

    def __init__(self, caches: dict[str, int], versioned: bool = True) -> None:
        self.ends = dict(caches)
        self.starts = dict.fromkeys(caches, 1)
        self.lineage = "L"
        self.versioned = versioned
        self.snapshots: list[str] = []
        self.lost: set[str] = set()

    def list_caches(self) -> list[str]:
        return sorted(self.ends)

    def end_position(self, cache: str) -> Position:
        return pos(self.ends[cache], self.lineage)

    def start_position(self, cache: str) -> Position:
        return pos(self.starts[cache], self.lineage)

    def span(self, cache: str, since: Position | None = None) -> tuple[Position, Position]:
        return self.start_position(cache), self.end_position(cache)

    def check(self, cache: str, position: Position) -> None:
        if cache in self.lost:
            raise PositionLostError("recreated", cache=cache, detail="recreated")

    def cut(self, cache: str, begin: Position, end: Position) -> Position:
        return end

    def snapshot(self, cache: str) -> SnapshotMade:
        name = f"{cache}-{len(self.snapshots)}.arrow"
        self.snapshots.append(name)
        end = self.ends[cache]
        return SnapshotMade(name, 25, pos(end, self.lineage),
                            pos(end + 3, self.lineage) if self.versioned else None)


def planner(policy: FailoverPolicy = FailoverPolicy.BACKLOG, **kw: object) -> Planner:
    options: dict[str, object] = {"on_position_lost": "fail", "load_initial": True,
                                  "batch_size": 10, **kw}
    return Planner(policy=policy, **options)  # type: ignore[arg-type]


def roundtrip(offset: SourceOffset) -> SourceOffset:
    return SourceOffset.from_dict(offset.to_dict())


def test_initial_offset_is_constant_and_reads_back() -> None:
    assert initial_offset() == initial_offset()
    start = SourceOffset.from_dict(initial_offset())
    assert start.initial and not start.caches


def test_first_start_snapshots_then_walks_rows_then_streams() -> None:
    grid = FakeGrid({"a": 5})
    p = planner()
    o1 = roundtrip(p.plan(SourceOffset.from_dict(initial_offset()), grid, 1))
    s1 = o1.caches["a"]
    assert (s1.snap, s1.row, s1.rows, s1.pos) == ("a-0.arrow", 10, 25, pos(5))
    assert [e.kind for e in o1.events] == ["snapshot"]
    assert batch_work("a", None, s1) == Work("a", snap="a-0.arrow", row_from=0, row_to=10)
    o2 = roundtrip(p.plan(o1, grid, 2))
    assert o2.caches["a"].row == 20 and not o2.events
    assert batch_work("a", s1, o2.caches["a"]) == Work("a", "a-0.arrow", 10, 20)
    o3 = p.plan(o2, grid, 3)
    assert o3.caches["a"].row == 25
    grid.ends["a"] = 12
    o4 = p.plan(o3, grid, 4)  # rows done: the stream from the position before the scan
    s4 = o4.caches["a"]
    assert not s4.snapshotting and s4.pos == pos(12) and s4.until == pos(8)
    work = batch_work("a", o3.caches["a"], s4)
    assert work == Work("a", snap="a-0.arrow", start=pos(5), end=pos(12), until=pos(8))
    o5 = p.plan(o4, grid, 5)  # the window passed: no settling any more
    assert o5.caches["a"] == CacheState(pos(12))
    assert batch_work("a", s4, o5.caches["a"]) is None
    assert p.plan(o5, grid, 6) is o5  # nothing moved: the same offset, Spark runs no batch
    grid.ends["a"] = 13
    o6 = p.plan(o5, grid, 6)
    assert o6.caches["a"] == CacheState(pos(13))
    assert batch_work("a", o5.caches["a"], o6.caches["a"]) == Work("a", start=pos(12),
                                                                   end=pos(13))


def test_first_start_without_initial_load_starts_at_the_end() -> None:
    grid = FakeGrid({"a": 7})
    out = planner(load_initial=False).plan(SourceOffset.from_dict(initial_offset()), grid, 1)
    assert out.caches["a"] == CacheState(pos(7)) and grid.snapshots == []
    assert batch_work("a", None, out.caches["a"]) is None


def test_backlog_restart_resumes_from_the_checkpointed_position() -> None:
    grid = FakeGrid({"a": 30})
    start = SourceOffset({"a": CacheState(pos(10))}, 5)
    out = planner().plan(start, grid, 9)
    assert out.caches["a"] == CacheState(pos(30)) and not out.events
    assert batch_work("a", start.caches["a"], out.caches["a"]) == Work(
        "a", start=pos(10), end=pos(30))


def test_none_restart_skips_and_counts_from_the_old_position() -> None:
    grid = FakeGrid({"a": 30, "b": 4})
    start = SourceOffset({"a": CacheState(pos(10)), "b": CacheState(pos(4))}, 5)
    p = planner(FailoverPolicy.NONE)
    out = p.plan(start, grid, 9)
    assert out.caches["a"] == CacheState(pos(30), skip=True)
    assert out.caches["b"] == CacheState(pos(4))  # nothing happened while down
    assert [(e.kind, e.cache) for e in out.events] == [("skipped", "a")]
    assert batch_work("a", start.caches["a"], out.caches["a"]) == Work(
        "a", start=pos(10), end=pos(30), skip=True)
    grid.ends["a"] = 33
    later = p.plan(roundtrip(out), grid, 10)  # only the first plan of a run skips
    assert later.caches["a"] == CacheState(pos(33))


def test_none_restart_after_a_finished_snapshot_counts_what_it_skips() -> None:
    # the last snapshot batch was committed, then the connector stopped: the stream was
    # due to resume at the position taken before the scan; the restart skips from there
    grid = FakeGrid({"a": 30})
    done = CacheState(pos(10), "a-0.arrow", 25, 25, pos(13))
    start = SourceOffset({"a": done}, 5)
    out = planner(FailoverPolicy.NONE).plan(start, grid, 9)
    assert out.caches["a"] == CacheState(pos(30), skip=True)
    assert [e.kind for e in out.events] == ["skipped"]
    assert batch_work("a", done, out.caches["a"]) == Work(
        "a", start=pos(10), end=pos(30), skip=True)


def test_none_restart_counts_a_cache_created_while_stopped() -> None:
    grid = FakeGrid({"a": 30, "new": 30})
    grid.starts["new"] = 20
    start = SourceOffset({"a": CacheState(pos(30))}, 5)
    out = planner(FailoverPolicy.NONE).plan(start, grid, 9)
    state = out.caches["new"]
    assert state == CacheState(pos(30), skip=True, since=pos(20))
    assert batch_work("new", None, state) == Work("new", start=pos(20), end=pos(30), skip=True)


def test_full_snapshot_restart_snapshots_every_cache() -> None:
    grid = FakeGrid({"a": 30, "b": 40})
    start = SourceOffset({"a": CacheState(pos(10)), "b": CacheState(pos(40))}, 5)
    out = planner(FailoverPolicy.FULL_SNAPSHOT).plan(start, grid, 9)
    assert {c: s.snap for c, s in out.caches.items()} == {"a": "a-0.arrow", "b": "b-1.arrow"}
    assert batch_work("a", start.caches["a"], out.caches["a"]) == Work(
        "a", snap="a-0.arrow", row_from=0, row_to=10)


def test_discovered_cache_streams_from_its_start_and_dropped_one_is_reported() -> None:
    grid = FakeGrid({"a": 30})
    p = planner(list_interval_ms=1000)
    o1 = p.plan(SourceOffset({"a": CacheState(pos(30))}, 1), grid, 0)
    grid.ends["b"], grid.starts["b"] = 31, 30
    assert p.plan(o1, grid, 500).caches.keys() == {"a"}  # not listed again yet
    o2 = p.plan(o1, grid, 1000)
    assert o2.caches["b"] == CacheState(pos(30))
    assert [(e.kind, e.cache) for e in o2.events] == [("discovered", "b")]
    assert batch_work("b", None, o2.caches["b"]) is None
    del grid.ends["a"]
    o3 = p.plan(o2, grid, 2000)
    assert set(o3.caches) == {"b"}
    assert [(e.kind, e.cache) for e in o3.events] == [("dropped", "a")]
    assert batch_work("b", o2.caches["b"], o3.caches["b"]) == Work(
        "b", start=pos(30), end=pos(31))


def test_whitelist_then_blacklist_full_matches() -> None:
    grid = FakeGrid({"orders": 1, "orders_tmp": 1, "users": 1, "xorders": 1})
    p = planner(load_initial=False, whitelist=["orders.*"], blacklist=[".*_tmp"])
    out = p.plan(SourceOffset.from_dict(initial_offset()), grid, 1)
    assert set(out.caches) == {"orders"}


@pytest.mark.parametrize(("change", "detail"), [
    ("lineage", "lineage"), ("overflow", "overflow"), ("ahead", "ahead"),
    ("recreated", "recreated")])
def test_lost_positions_fail_naming_the_cache(change: str, detail: str) -> None:
    grid = FakeGrid({"a": 30})
    start = SourceOffset({"a": CacheState(pos(10))}, 5)
    if change == "lineage":
        grid.lineage = "M"
    elif change == "overflow":
        grid.starts["a"] = 11
    elif change == "ahead":
        grid.ends["a"] = 9
    else:
        grid.lost.add("a")
    with pytest.raises(PositionLostError) as raised:
        planner().plan(start, grid, 9)
    assert raised.value.cache == "a" and raised.value.detail == detail
    assert "'a'" in str(raised.value) and "onPositionLost" in str(raised.value)


def test_lost_position_is_snapshotted_under_on_position_lost_snapshot() -> None:
    grid = FakeGrid({"a": 30})
    grid.lineage = "M"
    start = SourceOffset({"a": CacheState(pos(10))}, 5)
    out = planner(on_position_lost="snapshot").plan(start, grid, 9)
    assert out.caches["a"].snap == "a-0.arrow" and out.caches["a"].pos == pos(30, "M")
    assert [(e.kind, e.cache) for e in out.events] == [("lost", "a")]


def test_a_lost_position_of_a_cache_dropped_meanwhile_is_a_drop() -> None:
    grid = FakeGrid({"a": 30})
    grid.starts["a"] = 11
    p = planner()
    p.first = False
    p._known = ["a"]  # noqa: SLF001 - listed before it was dropped
    p._listed_at = 9

    class Dropping(FakeGrid):
        def list_caches(self) -> list[str]:
            return []

    dropping = Dropping({"a": 30})
    dropping.starts["a"] = 11
    out = p.plan(SourceOffset({"a": CacheState(pos(10))}, 5), dropping, 10)
    assert out.caches == {} and [e.kind for e in out.events] == ["dropped"]


def test_hazelcast_snapshot_has_no_settling_window() -> None:
    grid = FakeGrid({"a": 5}, versioned=False)
    p = planner(batch_size=100)
    o1 = p.plan(SourceOffset.from_dict(initial_offset()), grid, 1)
    grid.ends["a"] = 9
    o2 = p.plan(o1, grid, 2)
    assert o2.caches["a"] == CacheState(pos(9))
    assert batch_work("a", o1.caches["a"], o2.caches["a"]) == Work("a", start=pos(5),
                                                                   end=pos(9))


def test_offsets_round_trip_and_refuse_other_json() -> None:
    offset = SourceOffset({"a": CacheState(pos(3), "f", 1, 4, pos(5)),
                           "b": CacheState(pos(2), skip=True, since=pos(1))}, 77)
    assert roundtrip(offset) == offset
    with pytest.raises(ConfigError):
        SourceOffset.from_dict({"v": 99})
    with pytest.raises(ConfigError):
        SourceOffset.from_dict({"v": 1, "caches": {"a": {"pos": {"lineage": "L"}}}})
    with pytest.raises(ConfigError):
        SourceOffset.from_dict({"v": 1, "caches": {"a": {"pos": {"lineage": "L", "next": {}},
                                                         "row": 1}}})


def test_a_failed_first_plan_stays_the_first() -> None:
    from gridstream.errors import GridError

    class Failing(FakeGrid):
        fail = True

        def end_position(self, cache: str) -> Position:
            if self.fail:
                self.fail = False
                raise GridError("unreachable")
            return super().end_position(cache)

    grid = Failing({"a": 30})
    start = SourceOffset({"a": CacheState(pos(10))}, 5)
    p = planner(FailoverPolicy.NONE)
    with pytest.raises(GridError):
        p.plan(start, grid, 9)
    out = p.plan(start, grid, 10)  # still the run's first plan: NONE skips
    assert out.caches["a"] == CacheState(pos(30), skip=True)
