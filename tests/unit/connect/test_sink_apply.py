"""Folding a batch's writes per key: the last one with updates, the first put without."""

from __future__ import annotations

from gridstream.connect.sink.apply import fold_writes
from gridstream.grid import Write


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
