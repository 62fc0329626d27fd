"""Recovery: reopen gives the exact state; damage is reported with file and offset."""

from __future__ import annotations

import copy
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from gridstream.errors import ConfigError, LogCorruptedError, OperationLogError
from gridstream.operations import Bulk, OpType
from gridstream.space import Change, Space, open_log_reader
from gridstream.space._codec import decode_data
from gridstream.space._frames import HEADER_SIZE

from .models import Address, Order, Person

ROOT = Path(__file__).resolve().parents[3]
State = dict[tuple[str, Any], tuple[int, dict[str, Any]]]


def state_of(space: Space) -> State:
    """Every entry with its version and data (from the space's own store)."""
    with space._core.lock:
        tables = {name: dict(table) for name, table in space._core.store.tables.items()}
    return {(name, ident): (slot.version, decode_data(slot.data))
            for name, table in tables.items() for ident, slot in table.items()}


def replayed(bulks: Iterable[Bulk]) -> State:
    """The state a log implies, computed independently of the space."""
    state: State = {}
    for bulk in bulks:
        for op in bulk.operations:
            key = (op.type_name, op.id)
            if op.op.is_delete:
                state.pop(key, None)
                continue
            assert op.data is not None
            data = {} if op.op in (OpType.WRITE, OpType.UPDATE) else copy.deepcopy(state[key][1])
            for path, value in op.data.items():
                node = data
                *parents, leaf = path.split(".") if path not in data else [path]
                for part in parents:
                    if not isinstance(node.get(part), dict):
                        node[part] = {}
                    node = node[part]
                node[leaf] = value
            state[key] = (op.version, data)
    return state


def read_log(space_dir: Path) -> list[Bulk]:
    reader = open_log_reader(space_dir)
    try:
        return list(reader.read(reader.first_seq(), 10**9))
    finally:
        reader.close()


def _fill(space: Space, n: int = 60) -> None:
    for i in range(n):
        space.write(Person(i, f"p{i}", i, Address(f"c{i % 5}")))
        if i % 3 == 0:
            space.change(Person, i, [Change.increment("age", 10), Change.set("address.city", "Z")])
        if i % 4 == 0:
            space.partial_update(Person(i, name=f"partial{i}"))
        if i % 5 == 0:
            space.remove(Person, i)
        if i % 7 == 0:
            with space.transaction() as tx:
                tx.write(Order(f"o{i}", f"cust{i}", None, None, ["a", "b"]))
                tx.remove(Person, i - 1)


def test_reopen_rebuilds_the_exact_state(open_space: Callable[..., Space],
                                         space_dir: Path) -> None:
    space = open_space(snapshot_on_close=False)
    _fill(space)
    expected, next_seq = state_of(space), space.next_seq
    space.close()
    again = open_space()
    assert state_of(again) == expected == replayed(read_log(space_dir))
    assert again.next_seq == next_seq
    assert again.write(Person(1000)) == next_seq  # versions keep growing


def test_snapshot_then_replay(open_space: Callable[..., Space], space_dir: Path) -> None:
    space = open_space(snapshot_on_close=False, segment_bytes=4096, partitions=2)
    _fill(space, 40)
    space.snapshot()
    _fill(space, 30)  # overwrites and removes after the snapshot
    expected = state_of(space)
    space.close()
    assert (space_dir / "snapshot.bin").exists()
    again = open_space(segment_bytes=4096, partitions=2)
    assert state_of(again) == expected
    assert again.read_multiple(Person, index={"name": "p1"}) == [
        e for e in again.read_multiple(Person) if e.name == "p1"]
    again.close()
    third = open_space(segment_bytes=4096, partitions=2)  # from the close-time snapshot
    assert state_of(third) == expected


def test_a_changed_layout_is_refused(open_space: Callable[..., Space]) -> None:
    open_space(partitions=4).close()
    with pytest.raises(ConfigError):
        open_space(partitions=8)


def test_one_writer_per_directory(open_space: Callable[..., Space], space_dir: Path) -> None:
    open_space()
    with pytest.raises(OperationLogError, match="in use"):
        Space.embedded("test", data_dir=space_dir)


def _last_segment(space_dir: Path) -> Path:
    return max(space_dir.glob("p*/*.seg"), key=lambda p: p.stat().st_mtime_ns)


def test_torn_tail_is_reported_then_cut_on_request(
    open_space: Callable[..., Space], space_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    space = open_space(partitions=1, snapshot_on_close=False)
    for i in range(10):
        space.write(Person(i, "p"))
    space.close()
    segment = _last_segment(space_dir)
    size = segment.stat().st_size
    with open(segment, "r+b") as f:
        f.truncate(size - 5)  # the last record lost its end
    with pytest.raises(LogCorruptedError) as err:
        open_space(partitions=1)
    assert err.value.path == str(segment)
    assert 0 < err.value.offset < size - 5
    assert str(segment) in str(err.value)

    reader = open_log_reader(space_dir)  # no writer: the torn tail is reported
    assert len(reader.read(1, 100)) == 9
    with pytest.raises(LogCorruptedError):
        reader.read(10, 100)
    reader.close()

    with caplog.at_level(logging.WARNING):
        space = open_space(partitions=1, on_corrupt_tail="truncate")
    assert any(str(segment) in r.getMessage() for r in caplog.records)
    assert space.count(Person) == 9 and space.read(Person, 9) is None
    assert space.write(Person(9, "again")) == 10


def test_zeroed_tail_counts_as_torn(open_space: Callable[..., Space], space_dir: Path) -> None:
    space = open_space(partitions=1, snapshot_on_close=False)
    for i in range(5):
        space.write(Person(i))
    space.close()
    segment = _last_segment(space_dir)
    with open(segment, "ab") as f:
        f.write(b"\0" * 300)  # a file extended but never written, as after a power loss
    with pytest.raises(LogCorruptedError):
        open_space(partitions=1)
    assert open_space(partitions=1, on_corrupt_tail="truncate").count(Person) == 5


def test_damage_inside_the_log_is_never_repaired(open_space: Callable[..., Space],
                                                 space_dir: Path) -> None:
    space = open_space(partitions=1, snapshot_on_close=False)
    for i in range(10):
        space.write(Person(i, "some name"))
    space.close()
    segment = _last_segment(space_dir)
    data = bytearray(segment.read_bytes())
    data[60] ^= 0xFF  # inside the first or second record
    segment.write_bytes(bytes(data))
    for policy in ("fail", "truncate"):
        with pytest.raises(LogCorruptedError, match="not at the log's tail") as err:
            open_space(partitions=1, on_corrupt_tail=policy)
        assert err.value.path == str(segment)


def test_a_gap_between_partitions_is_reported(open_space: Callable[..., Space],
                                              space_dir: Path) -> None:
    # Lose the newest record of the partition that does not hold the last seq.
    _, last = _lose_a_middle_record(open_space, space_dir)
    with pytest.raises(LogCorruptedError, match="missing"):
        open_space(partitions=2)
    space = open_space(partitions=2, on_corrupt_tail="truncate")
    # the cut records' seqs (the lost one and the intact ones after it) are never reused
    assert space.next_seq == last + 1
    assert state_of(space) == replayed(read_log(space_dir))


def _records(space_dir: Path) -> list[Any]:
    reader = open_log_reader(space_dir)
    try:
        return reader.read_records(1, 10**6)
    finally:
        reader.close()


def _record_positions(segment: Path) -> list[int]:
    from gridstream.space._recovery import scan_file

    frames, _, _ = scan_file(segment)
    return [f.pos for f in frames]


def test_a_damaged_snapshot_is_reported(open_space: Callable[..., Space],
                                        space_dir: Path) -> None:
    space = open_space()
    space.write(Person(1))
    space.close()
    snapshot = space_dir / "snapshot.bin"
    data = bytearray(snapshot.read_bytes())
    data[-3] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    with pytest.raises(LogCorruptedError) as err:
        open_space()
    assert err.value.path == str(snapshot)


def test_sigkill_mid_stream_then_reopen(space_dir: Path,
                                        open_space: Callable[..., Space]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.unit.space._proc", "write", str(space_dir), "0", "never"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )
    acknowledged = 0
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while acknowledged < 3000 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        acknowledged = max(acknowledged, int(line))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert acknowledged >= 3000
    try:
        space = open_space()
    except LogCorruptedError as err:  # killed inside a write: a torn tail, named
        assert Path(err.path).is_relative_to(space_dir) and err.offset >= 0
        space = open_space(on_corrupt_tail="truncate")
    assert space.next_seq > acknowledged  # every acknowledged operation survived
    expected = replayed(read_log(space_dir))
    assert state_of(space) == expected


def test_a_live_reader_follows_a_repaired_log(open_space: Callable[..., Space],
                                              space_dir: Path) -> None:
    space = open_space(partitions=1, snapshot_on_close=False)
    for i in range(5):
        space.write(Person(i))
    reader = open_log_reader(space_dir)
    assert len(reader.read(1, 100)) == 5
    space.close()
    segment = _last_segment(space_dir)
    with open(segment, "ab") as f:
        f.write(b"\x40\x00\x00\x00garbage")  # a torn append
    space = open_space(partitions=1, on_corrupt_tail="truncate")
    space.write(Person(99, "after the repair"))
    bulks = reader.read(6, 100)
    assert [op.id for b in bulks for op in b.operations] == [99]
    reader.close()


def test_a_read_racing_an_append_is_read_again_not_reported(
    open_space: Callable[..., Space], space_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tailing read can see an appended record's bytes as zeros (the file's new size
    before its data): the reader reads again instead of reporting damage."""
    space = open_space(partitions=1)
    space.write(Person(1, "a"))
    reader = open_log_reader(space_dir)
    assert len(reader.read(1, 10)) == 1
    space.write(Person(2, "b"))
    space.write(Person(3, "c"))
    inode = _last_segment(space_dir).stat().st_ino
    real_pread = os.pread
    raced: list[int] = []

    def stale_pread(fd: int, n: int, pos: int) -> bytes:
        data = real_pread(fd, n, pos)
        if not raced and pos > 0 and os.fstat(fd).st_ino == inode:
            raced.append(pos)  # the first record's header is there, its bytes not yet
            return data[:HEADER_SIZE] + bytes(len(data) - HEADER_SIZE)
        return data

    monkeypatch.setattr(os, "pread", stale_pread)
    bulks = reader.read(2, 10)
    assert raced, "the stale read was not exercised"
    assert [op.id for b in bulks for op in b.operations] == [2, 3]
    reader.close()


def test_numbering_after_a_repair_goes_on_above_every_seq_used(
        open_space: Callable[..., Space], space_dir: Path) -> None:
    def acknowledge_all(space: Space) -> None:
        reader = open_log_reader(space_dir)
        reader.register("m")
        reader.acknowledge("m", space.next_seq)  # a consumer delivered everything
        reader.close()

    lost, last = _lose_a_middle_record(open_space, space_dir, acknowledge_all)

    space = open_space(partitions=2, on_corrupt_tail="truncate")
    assert space.next_seq == last + 1
    fresh = [space.write(Order(f"n{j}", f"c{j}")) for j in range(4)]
    assert fresh == list(range(last + 1, last + 5))
    space.close()
    space = open_space(partitions=2)  # the void is not a gap on the next open
    assert space.next_seq == last + 5
    expected = replayed(read_log(space_dir))
    assert state_of(space) == expected
    space.close()

    reader = open_log_reader(space_dir)
    try:
        firsts = [b.first_seq for b in reader.read(1, 10**6)]
        assert firsts == [s for s in range(1, last + 5) if s < lost or s > last]
        assert reader.resume_seq(lost) == last + 1
        assert [b.first_seq for b in reader.read(lost, 10)][0] == last + 1
        assert reader.end_seq() == last + 5
    finally:
        reader.close()


def _lose_a_middle_record(open_space: Callable[..., Space], space_dir: Path,
                          before_close: Callable[[Space], None] | None = None
                          ) -> tuple[int, int]:
    """Two partitions; the newest record of the one not holding the last seq is lost.
    Returns (the lost seq, the last seq)."""
    space = open_space(partitions=2, snapshot_on_close=False)
    seqs: dict[int, list[int]] = {0: [], 1: []}
    i = 0
    while min(len(v) for v in seqs.values()) < 3:
        version = space.write(Order(f"o{i}", f"c{i}"))
        seqs[space.partition_for(f"c{i}")].append(version)
        i += 1
    if before_close is not None:
        before_close(space)
    space.close()
    last = max(max(v) for v in seqs.values())
    victim = 0 if seqs[1][-1] == last else 1
    segment = next(space_dir.glob(f"p{victim:03d}/*.seg"))
    with open(segment, "r+b") as f:
        f.truncate(_record_positions(segment)[-1])
    return seqs[victim][-1], last


def test_a_repair_stopped_before_recording_its_void_never_reuses_a_seq(
        open_space: Callable[..., Space], space_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from gridstream.space._files import Layout

    lost, last = _lose_a_middle_record(open_space, space_dir)
    assert lost < last

    def crash(self: Layout, meta: Any) -> None:
        raise OSError("crash while recording the repair")

    with monkeypatch.context() as patch:
        patch.setattr(Layout, "write_meta", crash)
        with pytest.raises(OSError, match="crash"):
            open_space(partitions=2, on_corrupt_tail="truncate")
    space = open_space(partitions=2, on_corrupt_tail="truncate")
    assert space.next_seq == last + 1  # the seqs cut (lost..last) are never given again
    assert state_of(space) == replayed(read_log(space_dir))


def test_a_repair_stopped_after_recording_its_void_cuts_again(
        open_space: Callable[..., Space], space_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from gridstream.space import _open

    lost, last = _lose_a_middle_record(open_space, space_dir)

    def crash(recovered: Any) -> None:
        raise OSError("crash before the cut")

    with monkeypatch.context() as patch:
        patch.setattr(_open, "apply_cuts", crash)
        with pytest.raises(OSError, match="crash"):
            open_space(partitions=2, on_corrupt_tail="truncate")
    space = open_space(partitions=2, on_corrupt_tail="truncate")
    assert space.next_seq == last + 1
    assert [space.write(Order(f"n{j}", f"c{j}")) for j in range(2)] == [last + 1, last + 2]
    space.close()
    space = open_space(partitions=2)  # clean now: one void, nothing left to cut
    assert space.next_seq == last + 3
    assert state_of(space) == replayed(read_log(space_dir))
    space.close()
    reader = open_log_reader(space_dir)
    try:
        firsts = [b.first_seq for b in reader.read(1, 10**6)]
        assert firsts == [s for s in range(1, last + 3) if s < lost or s > last]
    finally:
        reader.close()


def test_a_live_reader_scanning_during_a_repair_follows_the_cut(
        open_space: Callable[..., Space], space_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from gridstream.space import _open

    lost, last = _lose_a_middle_record(open_space, space_dir)
    reader = open_log_reader(space_dir)
    from gridstream.space._recovery import apply_cuts as cut

    def scan_then_cut(recovered: Any) -> None:
        # the void is recorded, the files not cut yet: a live reader scans them now
        assert [b.first_seq for b in reader.read(1, 10**6)] == list(range(1, lost))
        cut(recovered)

    monkeypatch.setattr(_open, "apply_cuts", scan_then_cut)
    space = open_space(partitions=2, on_corrupt_tail="truncate")
    fresh = [space.write(Order(f"n{j}", f"c{j}")) for j in range(4)]
    assert fresh == list(range(last + 1, last + 5))
    try:
        firsts: list[int] = []
        bulks = reader.read(1, 10**6)
        while bulks:  # as a mirror reads: on from where the last read ended
            firsts += [b.first_seq for b in bulks]
            end = bulks[-1].first_seq + len(bulks[-1].operations)
            bulks = reader.read(end, 10**6) if end < reader.end_seq() else []
        assert firsts == [s for s in range(1, last + 5) if s < lost or s > last]
    finally:
        reader.close()
