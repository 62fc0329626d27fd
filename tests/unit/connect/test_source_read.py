"""A cache's part of a batch → rows: statuses, settling, skips, snapshot files."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from gridstream.connect.config import SourceConnectorConfig
from gridstream.connect.converters import JsonConverter
from gridstream.connect.record import Record
from gridstream.connect.source import snapshots
from gridstream.connect.source.offsets import Work
from gridstream.connect.source.read import RecordMaker, read_work
from gridstream.errors import CodecError, GridError, PositionLostError
from gridstream.grid.contract import (
    CacheEvent,
    Change,
    ChangeBatch,
    Entry,
    GridAdapter,
    Key,
    Position,
    Value,
    Write,
)


def cfg(**options: Any) -> SourceConnectorConfig:
    raw = {"name": "t", "grid": {"kind": "space", "data_dir": "/x", "space_name": "s"},
           "checkpoint": "/tmp/ck", "topicPrefix": "p.", **options}
    return SourceConnectorConfig.model_validate(raw)


class FakeGrid(GridAdapter):
    """One cache whose changes sit on two streams; reads give at most ``step`` each."""

    def __init__(self, changes: list[Change], entries: list[Entry] | None = None,
                 step: int = 2) -> None:
        self.changes, self.entries, self.step = changes, entries or [], step

    def __call__(self, fresh: bool) -> GridAdapter:
        """The source's adapter factory: this grid itself."""
        self.fresh = fresh
        return self

    def open(self) -> None: ...

    def close(self) -> None: ...

    def list_caches(self) -> list[str]:
        return ["c"]

    def watch_caches(self, listener: Callable[[CacheEvent], None]) -> Callable[[], None]:
        return lambda: None

    def snapshot(self, cache: str, batch_size: int) -> Iterator[list[Entry]]:
        for i in range(0, len(self.entries), batch_size):
            yield self.entries[i:i + batch_size]

    def end_position(self, cache: str) -> Position:
        raise NotImplementedError

    def start_position(self, cache: str) -> Position:
        raise NotImplementedError

    def read_changes(self, cache: str, position: Position, max_changes: int) -> ChangeBatch:
        nexts = dict(position.next_seqs)
        out = []
        for stream in sorted(nexts):
            mine = [c for c in self.changes if c.stream == stream and c.seq >= nexts[stream]]
            for change in mine[:self.step]:
                out.append(change)
                nexts[stream] = change.seq + 1
        return ChangeBatch(out, Position("L", nexts))

    def apply(self, cache: str, writes: Sequence[Write]) -> None:
        raise NotImplementedError


def ch(stream: str, seq: int, key: Key, value: Value | None) -> Change:
    return Change("c", key, value, seq, stream, seq)


def maker(config: SourceConnectorConfig, chain: Callable[[Record], Record] | None = None,
          entry_filter: Any = None) -> RecordMaker:
    return RecordMaker(config, JsonConverter(config.converter), chain or (lambda r: r),
                       entry_filter, 1234)


def rows(batches: Iterator[Any]) -> list[dict[str, Any]]:
    return [row for batch in batches for row in batch.to_pylist()]


def test_reads_each_stream_up_to_the_planned_end_only(tmp_path: Path) -> None:
    changes = [ch("0", s, f"a{s}", {"n": s}) for s in range(6)]
    changes += [ch("1", s, f"b{s}", {"n": s}) for s in range(3)]
    work = Work("c", start=Position("L", {"0": 1, "1": 0}), end=Position("L", {"0": 5, "1": 2}))
    out = rows(read_work(work, FakeGrid(changes), maker(cfg()), tmp_path))
    assert sorted(r["where"] for r in out) == sorted(
        ["c/a1", "c/a2", "c/a3", "c/a4", "c/b0", "c/b1"])
    first = next(r for r in out if r["where"] == "c/a1")
    assert first["topic"] == "p.c" and first["status"] == "ok"
    assert orjson.loads(first["key"]) == "a1" and orjson.loads(first["value"]) == {"n": 1}
    assert first["headers"] == [{"key": "gs.version", "value": b"1"}]


def test_a_stream_that_stops_short_of_the_planned_end_is_an_error(tmp_path: Path) -> None:
    work = Work("c", start=Position("L", {"0": 0}), end=Position("L", {"0": 9}))
    with pytest.raises(GridError, match="planned as its end"):
        rows(read_work(work, FakeGrid([ch("0", 0, "a", {})]), maker(cfg()), tmp_path))


def test_skip_counts_gaps_and_writes_nothing(tmp_path: Path) -> None:
    changes = [ch("0", s, f"a{s}", {"n": s}) for s in range(4)]
    work = Work("c", start=Position("L", {"0": 0}), end=Position("L", {"0": 4}), skip=True)
    out = rows(read_work(work, FakeGrid(changes), maker(cfg()), tmp_path))
    assert [r["status"] for r in out] == ["gap"] * 4 and {r["topic"] for r in out} == {None}


def test_removals_are_tombstones_only_with_shall_process_removals(tmp_path: Path) -> None:
    changes = [ch("0", 0, "a", {"n": 0}), ch("0", 1, "a", None)]
    work = Work("c", start=Position("L", {"0": 0}), end=Position("L", {"0": 2}))
    off = rows(read_work(work, FakeGrid(changes), maker(cfg()), tmp_path))
    assert [r["status"] for r in off] == ["ok", "filtered"]
    on = rows(read_work(work, FakeGrid(changes), maker(cfg(shallProcessRemovals=True)),
                        tmp_path))
    assert [r["status"] for r in on] == ["ok", "ok"] and on[1]["value"] is None


def test_snapshot_rows_and_the_settling_window(tmp_path: Path) -> None:
    entries = [Entry("a", {"n": 2}, 7), Entry("b", {"n": 1}, 3), Entry(5, {"n": 9}, 8)]
    name, count, versioned = snapshots.write_snapshot(FakeGrid([], entries), "c", tmp_path)
    assert (count, versioned) == (3, True)
    snap = rows(read_work(Work("c", snap=name, row_from=1, row_to=3), FakeGrid([]),
                          maker(cfg()), tmp_path))
    assert [orjson.loads(r["key"]) for r in snap] == ["b", 5]  # the integer key stays one
    # the stream from before the scan: changes the snapshot holds are not emitted again
    changes = [ch("log", 3, "b", {"n": 1}), ch("log", 6, "a", {"n": 1}),
               ch("log", 7, "a", {"n": 2}), ch("log", 9, "a", {"n": 3}),
               ch("log", 10, "b", {"n": 4})]
    work = Work("c", snap=name, start=Position("L", {"log": 2}),
                end=Position("L", {"log": 11}), until=Position("L", {"log": 10}))
    out = rows(read_work(work, FakeGrid(changes), maker(cfg()), tmp_path))
    assert [(orjson.loads(r["key"]), orjson.loads(r["value"])["n"]) for r in out] == [
        ("a", 3), ("b", 4)]


def test_unreadable_snapshot_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(GridError, match="new checkpoint"):
        list(snapshots.read_rows(tmp_path, "gone.arrow", 0, 1))


def test_remove_unused_keeps_the_named_files(tmp_path: Path) -> None:
    for name in ("a.arrow", "b.arrow", ".c.arrow.tmp"):
        (tmp_path / name).write_bytes(b"")
    assert sorted(snapshots.remove_unused(tmp_path, {"a.arrow"})) == [".c.arrow.tmp", "b.arrow"]
    assert [p.name for p in tmp_path.iterdir()] == ["a.arrow"]


def _bad_filter(cache: str, key: Key, value: Value) -> bool:
    if value.get("bad"):
        raise ValueError("cannot judge")
    return not value.get("hide")


def _bad_transform(record: Record) -> Record:
    if record.value and record.value.get("untransformable"):
        raise CodecError("field x is not a string")
    return record


@pytest.mark.parametrize("policy", ["STOP_TASK", "LOG_ONLY", "DEAD_LETTER"])
def test_error_policies_turn_bad_records_into_rows(tmp_path: Path, policy: str) -> None:
    dead = {"deadLetterTopic": "dlq"} if policy == "DEAD_LETTER" else {}
    config = cfg(errorHandlingPolicy=policy, **dead)
    changes = [ch("0", 0, "ok", {"n": 1}), ch("0", 1, "hid", {"hide": True}),
               ch("0", 2, "bad", {"bad": True}), ch("0", 3, "tr", {"untransformable": 1}),
               ch("0", 4, "big", {"n": 2**70})]
    work = Work("c", start=Position("L", {"0": 0}), end=Position("L", {"0": 5}))
    out = rows(read_work(work, FakeGrid(changes, step=9),
                         maker(config, _bad_transform, _bad_filter), tmp_path))
    status = {"STOP_TASK": "error", "LOG_ONLY": "skipped", "DEAD_LETTER": "dead"}[policy]
    assert [r["status"] for r in out] == ["ok", "filtered", status, status, status]
    bad = out[2:]
    assert [r["reason"].split(":")[0] for r in bad] == ["filter", "transform", "convert"]
    assert [r["where"] for r in bad] == ["c/bad", "c/tr", "c/big"]
    if policy == "DEAD_LETTER":
        assert {r["topic"] for r in bad} == {"dlq"}
        headers = {h["key"]: h["value"] for h in bad[2]["headers"]}
        assert headers["gs.error.stage"] == b"convert"
        assert headers["gs.error.cache"] == b"c" and headers["gs.error.key"] == b'"big"'
        assert headers["gs.error.connector"] == b"t"
        assert b"64-bit" in headers["gs.error.reason"]
        assert bad[2]["value"] == b'{"n":1180591620717411303424}'
    else:
        assert {r["topic"] for r in bad} == {None}


def test_a_bug_in_a_transform_is_not_counted_as_a_bad_record(tmp_path: Path) -> None:
    def broken(record: Record) -> Record:
        raise KeyError("bug")

    work = Work("c", start=Position("L", {"0": 0}), end=Position("L", {"0": 1}))
    with pytest.raises(KeyError):
        rows(read_work(work, FakeGrid([ch("0", 0, "a", {})]),
                       maker(cfg(errorHandlingPolicy="LOG_ONLY"), broken), tmp_path))


class Flaky(FakeGrid):
    def __init__(self, changes: list[Change], failures: list[Exception]) -> None:
        super().__init__(changes)
        self.failures = failures
        self.asked: list[bool] = []

    def __call__(self, fresh: bool) -> GridAdapter:
        self.asked.append(fresh)
        return self

    def read_changes(self, cache: str, position: Position, max_changes: int) -> ChangeBatch:
        if self.failures:
            raise self.failures.pop(0)
        return super().read_changes(cache, position, max_changes)


def test_a_failed_read_is_tried_again_on_a_new_connection(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from gridstream.connect.source import read

    monkeypatch.setattr(read, "_RETRY_S", 0.0)
    grid = Flaky([ch("0", s, f"a{s}", {"n": s}) for s in range(3)],
                 [GridError("member gone")])
    work = Work("c", start=Position("L", {"0": 0}), end=Position("L", {"0": 3}))
    out = rows(read_work(work, grid, maker(cfg()), tmp_path))
    assert [r["where"] for r in out] == ["c/a0", "c/a1", "c/a2"]  # none twice
    assert grid.asked[:2] == [False, True]
    lost = Flaky([], [PositionLostError("gone", cache="c", detail="overflow")])
    with pytest.raises(PositionLostError):
        rows(read_work(work, lost, maker(cfg()), tmp_path))
    assert lost.asked == [False]
    failing = Flaky([], [GridError("down")] * 3)
    with pytest.raises(GridError, match="down"):
        rows(read_work(work, failing, maker(cfg()), tmp_path))
    assert failing.asked == [False, True, True]


def test_a_value_given_as_json_text_goes_to_kafka_as_it_is_never_decoded(
        tmp_path: Path) -> None:
    """The Space hands its fold's wire JSON (``Change.of_json``): with no filter and no
    transform the JSON converter's bytes are that text, so it is not decoded and
    encoded again; the bytes are those the decoding path writes."""
    from gridstream.connect.transforms import IDENTITY, build_chain

    texts = ['{"n":1,"x":[1,2.5,null],"s":"é"}', '{"n":2,"d":{"k":true}}']

    def changes() -> list[Change]:
        out = [Change.of_json("c", f"k{i}", t, i, "0", i) for i, t in enumerate(texts)]
        return [*out, Change("c", "k0", None, 2, "0", 2)]

    work = Work("c", start=Position("L", {"0": 0}), end=Position("L", {"0": 3}))
    config = cfg(shallProcessRemovals=True)
    given = changes()
    fast = RecordMaker(config, JsonConverter(config.converter), IDENTITY, None, 1234)
    assert fast.passes_json
    out = rows(read_work(work, FakeGrid(given), fast, tmp_path))
    assert [r["value"] for r in out] == [t.encode() for t in texts] + [None]
    assert not any(c._decoded for c in given[:2])  # never decoded
    slow = rows(read_work(work, FakeGrid(changes()), maker(config), tmp_path))
    assert out == slow  # every column: topic, key, value, headers, status, where
    masked = RecordMaker(config, JsonConverter(config.converter),
                         build_chain(cfg(transforms=[{"type": "mask", "fields": ["n"]}]
                                         ).transforms), None, 1234)
    assert not masked.passes_json
    hidden = rows(read_work(work, FakeGrid(changes()), masked, tmp_path))
    assert orjson.loads(hidden[0]["value"])["n"] != 1


def test_a_change_of_json_is_a_change_like_any_other() -> None:
    import copy
    import pickle

    lazy = Change.of_json("c", "k", '{"a":1}', 3, "log", 3)
    plain = Change("c", "k", {"a": 1}, 3, "log", 3)
    for twin in (pickle.loads(pickle.dumps(lazy)), copy.deepcopy(lazy)):
        assert twin == plain and not twin.removed  # no sentinel lost on the way
    assert lazy == plain and repr(lazy) == repr(plain) and not lazy.removed
    assert Change("c", "k", None, 4, "log", 4).removed
    with pytest.raises(GridError, match="not a JSON object"):
        _ = Change.of_json("c", "k", "[1]", 5, "log", 5).value
