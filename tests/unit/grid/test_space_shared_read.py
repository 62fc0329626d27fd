"""The Space's log read once for several caches (``read_shared``) gives each cache
exactly what reading it alone gives, in log order; the source groups only works that
share a span."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from gridstream.connect.source.offsets import Work
from gridstream.connect.source.read import shared_works
from gridstream.errors import ConfigError
from gridstream.grid.contract import Change, Position
from gridstream.grid.space import SpaceAdapter, SpaceGridConfig
from gridstream.model import SpaceDocument
from gridstream.space import Change as Delta
from gridstream.space import Space


def _fill(space: Space) -> None:
    for n in range(300):
        cache = ("A", "B", "C")[n % 3]
        space.write(SpaceDocument(cache, {"id": f"k{n % 17}", "n": n}))
        if n % 7 == 0:
            space.change(cache, f"k{n % 17}", [Delta.increment("n", 1)])
        if n % 11 == 0:
            space.remove(cache, f"k{n % 17}")


def _all(adapter: SpaceAdapter, caches: list[str], start: Position, size: int
         ) -> list[Change]:
    out: list[Change] = []
    position = start
    while True:
        batch = (adapter.read_changes(caches[0], position, size) if len(caches) == 1
                 else adapter.read_shared(caches, position, size))
        out.extend(batch.changes)
        if batch.position == position:
            return out
        position = batch.position


@contextlib.contextmanager
def _filled(data_dir: Path) -> Iterator[tuple[Space, SpaceAdapter, Position]]:
    """A Space whose log holds ``_fill``'s changes after a first write, an open adapter
    over it, and the position before the changes."""
    with Space.embedded("s", data_dir=data_dir, fsync="never") as space:
        space.write(SpaceDocument("A", {"id": "first", "n": -1}))
        with SpaceAdapter(SpaceGridConfig(str(data_dir), "s"), space=space) as adapter:
            start = adapter.start_position("A")
            _fill(space)
            yield space, adapter, start


@pytest.mark.parametrize("size", [1, 7, 5000])
def test_one_read_of_the_log_gives_every_cache_what_its_own_read_gives(
        tmp_path: Path, size: int) -> None:
    with _filled(tmp_path) as (space, adapter, start):
        together = _all(adapter, ["A", "B", "C"], start, size)
        alone = {}
        for cache in "ABC":
            with SpaceAdapter(SpaceGridConfig(str(tmp_path), "s"), space=space) as own:
                alone[cache] = _all(own, [cache], start, size)
    assert [c.seq for c in together] == sorted(c.seq for c in together)
    for cache in "ABC":
        mine = [c for c in together if c.cache == cache]
        assert mine == alone[cache] and mine
        assert any(c.value is None for c in mine)  # removes came through


def test_grids_whose_caches_have_streams_of_their_own_offer_no_shared_read() -> None:
    from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig

    adapter = HazelcastAdapter(HazelcastGridConfig(members=("127.0.0.1:1",)))
    with pytest.raises(ConfigError, match="streams of their own"):
        adapter.read_shared(["a", "b"], Position("L", {}), 10)


def test_only_streaming_works_over_the_same_span_are_grouped() -> None:
    a, b, c = Position("L", {"log": 5}), Position("L", {"log": 9}), Position("L", {"log": 7})
    works = [Work("x", start=a, end=b), Work("y", start=a, end=b), Work("z", start=c, end=b),
             Work("s", snap="f.arrow", row_from=0, row_to=10),
             Work("g", start=a, end=b, skip=True), Work("w", start=a, end=b)]
    groups = shared_works(works)
    assert [[w.cache for w in g] for g in groups] == [["x", "y", "w"], ["z"], ["s"], ["g"]]


def test_a_read_with_a_stop_leaves_the_kept_state_there_for_the_next_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bounded batch ends at ``stop``: nothing at or past it is read or folded, so the
    next batch continues the kept state instead of rebuilding it (which replayed the log
    from the saved state at every batch, and could not rebuild an entry last written
    whole before the log's retained start)."""
    from gridstream.grid import space as space_module

    with _filled(tmp_path) as (_, adapter, start):
        end = adapter.end_position("A")
        stop = Position(start.lineage, {"log": start.next_seqs["log"] + 40})
        first = adapter.read_shared(["A", "B"], start, 5000, stop)
        assert first.position == stop and all(c.seq < 40 + start.next_seqs["log"]
                                              for c in first.changes)
        rebuilt: list[str] = []
        real = space_module.rebuild
        monkeypatch.setattr(space_module, "rebuild",
                            lambda *a, **k: rebuilt.append(a[1]) or real(*a, **k))
        rest = adapter.read_shared(["A", "B"], stop, 5000, end)
        assert rebuilt == [] and rest.changes
