"""Bounded batches of the source's planner: a backlog drains as many bounded batches,
every change read once (pure logic over fake grids)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gridstream.connect.config import FailoverPolicy
from gridstream.connect.source.bounds import share_out
from gridstream.connect.source.offsets import (
    CacheState,
    Planner,
    SnapshotMade,
    SourceOffset,
    batch_work,
    planned_changes,
)
from gridstream.grid.contract import Position

BACKLOG = 5_000_000


class StreamsGrid:
    """Hazelcast-like: every cache has streams of its own (a journal per partition)."""

    shared_stream = False

    def __init__(self, ends: dict[str, dict[str, int]]) -> None:
        self.ends = ends

    def list_caches(self) -> list[str]:
        return sorted(self.ends)

    def end_position(self, cache: str) -> Position:
        return Position("L", dict(self.ends[cache]))

    def start_position(self, cache: str) -> Position:
        return Position("L", dict.fromkeys(self.ends[cache], 0))

    def span(self, cache: str, since: Position | None = None) -> tuple[Position, Position]:
        return self.start_position(cache), self.end_position(cache)

    def check(self, cache: str, position: Position) -> None:
        return None

    def cut(self, cache: str, begin: Position, end: Position) -> Position:
        """Marks for the streams cut short, as Hazelcast's journal gives them."""
        marks = dict(end.marks)
        for stream, seq in end.next_seqs.items():
            if stream not in marks and seq > begin.next_seqs.get(stream, seq):
                marks[stream] = f"{cache}@{stream}:{seq - 1}"
        return Position(end.lineage, dict(end.next_seqs), marks)

    def snapshot(self, cache: str) -> SnapshotMade:
        raise AssertionError("no snapshot in these tests")


class LogGrid(StreamsGrid):
    """Space-like: every cache reads one shared log, whose transactions (bulks) span
    ``bulk`` sequence numbers each: a batch may end only at a bulk's start."""

    shared_stream = True

    def __init__(self, ends: dict[str, dict[str, int]], bulk: int = 1) -> None:
        super().__init__(ends)
        self.bulk = bulk

    def cut(self, cache: str, begin: Position, end: Position) -> Position:
        seq, low = end.next_seqs["log"], begin.next_seqs["log"]
        first = 1 + (seq - 1) // self.bulk * self.bulk  # bulks start at 1, 1 + bulk, ...
        return Position(end.lineage, {"log": first if first > low else first + self.bulk})


def planner() -> Planner:
    return Planner(policy=FailoverPolicy.BACKLOG, on_position_lost="fail",
                   load_initial=False, batch_size=10)


def resume(caches: dict[str, dict[str, int]]) -> SourceOffset:
    return SourceOffset({c: CacheState(Position("L", s)) for c, s in caches.items()}, 1)


def drain(grid: StreamsGrid, start: SourceOffset, limit: int,
          target: dict[str, Position] | None = None) -> list[SourceOffset]:
    plan, offsets = planner(), [start]
    for _ in range(10_000):
        nxt = plan.plan(offsets[-1], grid, 2, limit, target)
        if nxt.to_dict() == offsets[-1].to_dict():
            return offsets
        offsets.append(nxt)
    raise AssertionError("the backlog never drained")


def covered(offsets: list[SourceOffset], cache: str, stream: str) -> list[tuple[int, int]]:
    spans = []
    for a, b in zip(offsets, offsets[1:], strict=False):
        work = batch_work(cache, a.caches.get(cache), b.caches[cache])
        if work is not None:
            assert work.start is not None and work.end is not None
            spans.append((work.start.next_seqs[stream], work.end.next_seqs[stream]))
    return spans


def test_a_grid_five_million_changes_ahead_drains_in_bounded_batches() -> None:
    """Four maps of 271 partitions each, 5M changes ahead in all: every batch streams at
    most the limit (plus at most one change per stream, the fair share's floor), and the
    batches' spans tile every stream from the stored position to the end exactly."""
    caches = [f"m{i}" for i in range(4)]
    streams = [str(p) for p in range(271)]
    per = BACKLOG // (len(caches) * len(streams))
    ends = {c: {s: 7 + per + (int(s) % 3) for s in streams} for c in caches}
    start = resume({c: dict.fromkeys(streams, 7) for c in caches})
    offsets = drain(StreamsGrid(ends), start, 100_000)
    for a, b in zip(offsets, offsets[1:], strict=False):
        assert planned_changes(a, b, shared=False) <= 100_000
    assert len(offsets) - 1 >= BACKLOG // 100_000
    for c in caches:
        for s in streams:
            spans = covered(offsets, c, s)
            assert spans[0][0] == 7 and spans[-1][1] == ends[c][s]
            assert all(x[1] == y[0] for x, y in zip(spans, spans[1:], strict=False))


def test_a_shared_log_counts_its_span_once_for_every_cache() -> None:
    """The Space: four caches on one log 5M sequence numbers ahead: each batch reads at
    most the limit of the log (not a quarter of it per cache), every cache the same
    span, and the caches reach the end together."""
    caches = ["a", "b", "c", "d"]
    grid = LogGrid({c: {"log": 1 + BACKLOG} for c in caches})
    offsets = drain(grid, resume({c: {"log": 1} for c in caches}), 250_000)
    assert len(offsets) - 1 == BACKLOG // 250_000
    for a, b in zip(offsets, offsets[1:], strict=False):
        assert planned_changes(a, b, shared=True) == 250_000
        assert len({s.pos.next_seqs["log"] for s in b.caches.values()}) == 1
    for c in caches:
        assert covered(offsets, c, "log")[-1][1] == 1 + BACKLOG


def test_a_cache_far_behind_on_a_shared_log_holds_no_other_back() -> None:
    """A cache discovered late streams from the log's start: it takes its own share, the
    caches at the head keep theirs (the spans are counted apart: never above the limit)."""
    grid = LogGrid({"old": {"log": 1_000_000}, "head": {"log": 1_000_000},
                    "also": {"log": 1_000_000}})
    start = resume({"old": {"log": 1}, "head": {"log": 999_900}, "also": {"log": 999_900}})
    first = planner().plan(start, grid, 2, 1_000)
    assert first.caches["head"].pos.next_seqs["log"] == 1_000_000
    assert first.caches["also"].pos.next_seqs["log"] == 1_000_000
    assert first.caches["old"].pos.next_seqs["log"] == 901
    assert planned_changes(start, first, shared=True) <= 1_000 + 100


def test_a_batch_on_a_shared_log_ends_only_where_a_transaction_starts() -> None:
    """Bulks of 7 sequence numbers: every batch's end is a bulk's start (a transaction
    reaches Kafka whole, and the next batch can resume there), also when the limit is
    below one bulk."""
    caches = ["a", "b"]
    grid = LogGrid({c: {"log": 1 + 7 * 1_000} for c in caches}, bulk=7)
    for limit in (3, 50, 1_000):
        offsets = drain(grid, resume({c: {"log": 1} for c in caches}), limit)
        for c in caches:
            spans = covered(offsets, c, "log")
            assert all((a - 1) % 7 == 0 and (b - 1) % 7 == 0 for a, b in spans), limit
            assert spans[0][0] == 1 and spans[-1][1] == 1 + 7 * 1_000


def test_without_a_limit_every_cache_goes_to_its_end() -> None:
    grid = StreamsGrid({"m": {"0": 3_000_000}})
    planned = planner().plan(resume({"m": {"0": 0}}), grid, 2)
    assert planned.caches["m"].pos.next_seqs["0"] == 3_000_000


def test_available_now_stops_at_the_target_and_ignores_later_caches() -> None:
    """The run ends: no cache goes past its target, a cache the target lacks (listed only
    after the run began) neither joins nor moves."""
    grid = StreamsGrid({"m": {"0": 500}, "n": {"0": 500}})
    target = {"m": Position("L", {"0": 300})}
    offsets = drain(grid, resume({"m": {"0": 0}, "n": {"0": 0}}), 100, target)
    assert covered(offsets, "m", "0") == [(0, 100), (100, 200), (200, 300)]
    assert covered(offsets, "n", "0") == []
    grid.ends["late"] = {"0": 50}
    assert "late" not in planner().plan(offsets[-1], grid, 2, 100, target).caches


def test_a_finished_snapshot_streams_its_backlog_bounded() -> None:
    """The batch after a snapshot's last rows streams from the position taken before the
    scan: bounded like any other."""
    grid = StreamsGrid({"m": {"0": 1_000_000}})
    done = SourceOffset({"m": CacheState(Position("L", {"0": 10}), "s.arrow", 25, 25)}, 1)
    planned = planner().plan(done, grid, 2, 1_000)
    assert planned.caches["m"].pos.next_seqs["0"] == 1_010
    assert not planned.caches["m"].snapshotting


def test_every_stream_of_a_cut_position_keeps_a_mark() -> None:
    """A mark tells a re-created map from the one the position was taken in: a stream
    that reaches the end keeps the end's, one that did not move keeps its own, one cut
    short gets the grid's (``GridView.cut``)."""
    grid = StreamsGrid({"m": {"0": 1_000, "1": 5, "2": 9}})
    end = Position("L", {"0": 1_000, "1": 5, "2": 9}, {"0": "x", "1": "y", "2": "z"})
    grid.end_position = lambda cache: end  # type: ignore[method-assign]
    begin = SourceOffset({"m": CacheState(Position("L", {"0": 0, "1": 0, "2": 9},
                                                   {"2": "z"}))}, 1)
    planned = planner().plan(begin, grid, 2, 100)
    assert planned.caches["m"].pos.next_seqs == {"0": 95, "1": 5, "2": 9}
    assert planned.caches["m"].pos.marks == {"0": "m@0:94", "1": "y", "2": "z"}


@given(st.dictionaries(st.integers(0, 50), st.integers(0, 10_000), max_size=40),
       st.integers(1, 50_000))
def test_fair_shares_never_exceed_the_limit_or_what_is_pending(
        spans: dict[int, int], limit: int) -> None:
    shares = share_out(spans, limit)
    pending = sum(1 for n in spans.values() if n > 0)
    assert all(0 <= shares[k] <= n for k, n in spans.items())
    assert sum(shares.values()) <= max(limit, pending)
    if sum(spans.values()) <= limit:
        assert shares == spans
    else:
        assert all(shares[k] >= 1 for k, n in spans.items() if n > 0)  # all advance
        assert sum(shares.values()) >= min(limit, sum(spans.values())) // 2
