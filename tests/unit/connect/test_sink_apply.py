"""Folding a batch's writes per key: the last one with updates, the first put without;
and applying a batch streamed key by key in bounded chunks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import orjson
import pytest

from gridstream.grid import Write
from gridstream.spark.grid_apply import (
    Entry,
    apply_in_chunks,
    fold_entries,
    fold_sorted,
    fold_writes,
)


def test_with_updates_each_keys_last_write_wins_and_a_tombstone_removes() -> None:
    rows = [("c", '"a"', '{"n":1}'), ("c", "1", '{"n":1}'), ("c", '"1"', '{"n":9}'),
            ("c", '"a"', '{"n":2}'), ("c", "1", None), ("d", '"a"', '{"n":3}'),
            ("c", '"b"', None), ("c", '"b"', '{"n":4}')]
    assert fold_writes(rows, updates=True) == {
        "c": [Write("a", {"n": 2}), Write(1, None), Write("1", {"n": 9}),
              Write("b", {"n": 4})],
        "d": [Write("a", {"n": 3})],
    }


def test_without_updates_each_keys_first_put_only() -> None:
    rows = [("c", '"a"', None), ("c", '"a"', '{"n":1}'), ("c", '"a"', '{"n":2}'),
            ("c", '"a"', None), ("c", "7", None), ("c", '"b"', '{"n":3}')]
    assert fold_writes(rows, updates=False) == {
        "c": [Write("a", {"n": 1}), Write("b", {"n": 3})],
    }


def test_folding_twice_gives_the_same_writes() -> None:
    rows = [("c", f'"k{i % 7}"', f'{{"n":{i}}}' if i % 5 else None) for i in range(50)]
    for updates in (True, False):
        assert fold_writes(rows, updates=updates) == fold_writes(list(rows), updates=updates)


@pytest.mark.parametrize("updates", [True, False])
def test_decoded_entries_fold_as_their_json_text_does(updates: bool) -> None:
    """The one-pass write folds Python entries; the same records as JSON text fold to
    the same writes (1 and "1" stay two keys)."""
    rows = [("c", '"a"', '{"n":1}'), ("c", "1", '{"n":1}'), ("c", '"1"', '{"n":9}'),
            ("c", '"a"', '{"n":2}'), ("c", "1", None), ("d", '"a"', '{"n":3}'),
            ("c", '"b"', None), ("c", '"b"', '{"n":4}')]
    entries = [Entry(c, orjson.loads(k), None if v is None else orjson.loads(v))
               for c, k, v in rows]
    assert fold_entries(entries, updates=updates) == fold_writes(rows, updates=updates)


def _by_key(rows: list[tuple[str, str, str | None]]) -> list[tuple[str, str, str | None]]:
    """``rows`` with each key's rows together, Kafka order kept within a key (what the
    streamed apply reads from Spark)."""
    order = {row[:2]: i for i, row in reversed(list(enumerate(rows)))}
    return sorted(rows, key=lambda row: order[row[:2]])


class _Grid:
    """Records each ``apply``; counts the rows the driver has pulled when it is called."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Write], int]] = []
        self.pulled = 0

    def apply(self, cache: str, writes: Sequence[Write], *, overwrite: bool = True) -> None:
        self.calls.append((cache, list(writes), self.pulled))

    def feed(self, rows: list[tuple[str, str, str | None]]) -> Iterator[
            tuple[str, str, str | None]]:
        for row in rows:
            self.pulled += 1
            yield row


@pytest.mark.parametrize("updates", [True, False])
def test_folding_rows_grouped_by_key_gives_fold_writes_writes(updates: bool) -> None:
    rows = [("c", f'"k{i % 7}"', f'{{"n":{i}}}' if i % 5 else None) for i in range(50)]
    rows += [("d", '"k1"', '{"n":0}'), ("c", "1", None)]
    grouped = _by_key(rows)
    assert len(list(fold_sorted(grouped, updates=updates))) == sum(
        len(writes) for writes in fold_writes(rows, updates=updates).values())
    want = fold_writes(rows, updates=updates, version=4)
    got = fold_writes(fold_sorted(grouped, updates=updates), updates=updates, version=4)
    assert {c: sorted(map(repr, w)) for c, w in got.items()} == {
        c: sorted(map(repr, w)) for c, w in want.items()}


@pytest.mark.parametrize("updates", [True, False])
def test_a_streamed_batch_is_applied_in_chunks_of_at_most_n_keys(updates: bool) -> None:
    """The driver holds at most ``chunk`` folded writes: each ``apply`` gets at most
    that many, and is called before the rest of the batch has been read. A key is never
    split between chunks (a versioned re-run of the second would skip it)."""
    rows = [("c", f'"k{i % 100}"', f'{{"n":{i}}}' if i % 9 else None) for i in range(1000)]
    grid = _Grid()
    done = apply_in_chunks(grid, grid.feed(_by_key(rows)),  # type: ignore[arg-type]
                           updates=updates, version=7, chunk=8)
    want = fold_writes(rows, updates=updates, version=7)["c"]
    assert done == len(want) == sum(len(writes) for _, writes, _ in grid.calls)
    assert all(len(writes) <= 8 for _, writes, _ in grid.calls)
    assert len(grid.calls) == -(-len(want) // 8)
    assert grid.calls[0][2] < 100  # the first chunk went before the batch was read
    applied = [w for _, writes, _ in grid.calls for w in writes]
    assert sorted(map(repr, applied)) == sorted(map(repr, want))  # each key once, its value


def test_a_task_applies_again_on_a_new_connection_when_the_grid_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept client whose connection died while its worker was idle ("Heartbeat timed
    out") failed the whole batch; the task now connects again and applies once more
    (applying again leaves the grid as once would)."""
    from gridstream.errors import GridError
    from gridstream.grid.hazelcast import HazelcastGridConfig
    from gridstream.spark import grid_apply as apply_module

    calls: list[bool] = []

    class _Adapter:
        def apply(self, cache: str, writes: Any, *, overwrite: bool) -> None:
            if len(calls) == 1:
                raise GridError("cache 'c': write failed: Heartbeat timed out")

    def adapter(config: Any, fresh: bool = False) -> Any:
        calls.append(fresh)
        return _Adapter()

    monkeypatch.setattr(apply_module, "worker_adapter", adapter)
    monkeypatch.setattr(apply_module, "_RETRY_S", 0.0)
    writes = {"c": [Write("k", {"v": 1})]}
    done = apply_module.apply_in_task(HazelcastGridConfig(), writes, updates=True)
    assert done == 1 and calls == [False, True]
