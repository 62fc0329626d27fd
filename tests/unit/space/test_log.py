"""The operation log as a reader sees it: order, bulks, offsets, segments, retention."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gridstream.errors import OperationLogError
from gridstream.space import Space, open_log_reader

from .models import Order, Person


def _all(reader_dir: Path, start: int = 1) -> list[int]:
    reader = open_log_reader(reader_dir)
    seqs: list[int] = []
    seq = start
    try:
        while True:
            bulks = reader.read(seq, 7)
            if not bulks:
                return seqs
            for bulk in bulks:
                seqs.extend(op.version for op in bulk.operations)
            seq = bulks[-1].next_seq
    finally:
        reader.close()


def test_bulks_come_whole_contiguous_and_bounded(space: Space, space_dir: Path) -> None:
    for i in range(20):
        space.write(Person(i))
    with space.transaction() as tx:
        for i in range(10):
            tx.write(Order(f"o{i}", f"c{i}"))
    reader = open_log_reader(space_dir)
    assert (reader.first_seq(), reader.end_seq()) == (1, 31)
    first = reader.read(1, 5)
    assert [b.first_seq for b in first] == [1, 2, 3, 4, 5]
    big = reader.read(21, 3)  # a larger bulk still comes whole
    assert len(big) == 1 and len(big[0].operations) == 10
    assert reader.read(31, 10) == []
    with pytest.raises(OperationLogError):
        reader.read(22, 10)  # inside a bulk
    reader.close()
    assert _all(space_dir) == list(range(1, 31))


def test_records_carry_partition_offsets(space: Space, space_dir: Path) -> None:
    for i in range(12):
        space.write(Order(f"o{i}", f"customer-{i % 3}"))
    reader = open_log_reader(space_dir)
    records = reader.read_records(1, 100)
    reader.close()
    by_partition: dict[int, list[int]] = {}
    for rec in records:
        assert rec.partition == rec.bulk.operations[0].partition
        by_partition.setdefault(rec.partition, []).append(rec.offset)
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))


def test_the_reader_sees_types_and_new_writes(space: Space, space_dir: Path) -> None:
    reader = open_log_reader(space_dir)
    assert reader.read(1, 10) == []
    space.write(Person(1, "Ann"))
    assert "test.Person" in reader.types()
    assert reader.types()["test.Person"].topic == "people"
    assert [b.first_seq for b in reader.read(1, 10)] == [1]
    space.write(Person(2, "Bob"))
    assert [b.first_seq for b in reader.read(2, 10)] == [2]
    reader.close()


def test_segments_roll_and_reads_cross_them(open_space: Callable[..., Space],
                                            space_dir: Path) -> None:
    space = open_space(segment_bytes=4096, partitions=2)
    for i in range(400):
        space.write(Person(i, "x" * 40))
    segments = list(space_dir.glob("p*/*.seg"))
    assert len(segments) > 4
    assert _all(space_dir) == list(range(1, 401))


def test_retention_deletes_only_segments_every_consumer_passed(
    open_space: Callable[..., Space], space_dir: Path
) -> None:
    space = open_space(segment_bytes=4096, partitions=1)
    reader = open_log_reader(space_dir)
    assert reader.register("fast") == 1
    assert reader.register("slow") == 1
    for i in range(300):
        space.write(Person(i, "y" * 40))
    space.snapshot()
    before = sorted(space_dir.glob("p000/*.seg"))
    reader.acknowledge("fast", 301)
    assert sorted(space_dir.glob("p000/*.seg")) == before  # "slow" still needs them
    reader.acknowledge("slow", 150)
    after = sorted(space_dir.glob("p000/*.seg"))
    assert len(after) < len(before)
    start = reader.first_seq()
    assert 1 < start <= 150
    assert all(int(p.stem) >= 1 for p in after)
    with pytest.raises(OperationLogError, match="no longer retained"):
        reader.read(1, 10)
    seqs: list[int] = []
    seq = start
    while bulks := reader.read(seq, 50):
        seqs.extend(b.first_seq for b in bulks)
        seq = bulks[-1].next_seq
    assert seqs == list(range(start, 301))
    assert reader.register("slow") == 150
    reader.close()


def test_nothing_is_deleted_without_consumers(open_space: Callable[..., Space],
                                              space_dir: Path) -> None:
    space = open_space(segment_bytes=4096, partitions=1)
    for i in range(200):
        space.write(Person(i, "z" * 40))
    before = sorted(space_dir.glob("p000/*.seg"))
    space.snapshot()
    assert sorted(space_dir.glob("p000/*.seg")) == before


def test_retention_waits_for_the_snapshot(open_space: Callable[..., Space],
                                          space_dir: Path) -> None:
    space = open_space(segment_bytes=4096, partitions=1, snapshot_on_close=False)
    reader = open_log_reader(space_dir)
    reader.register("mirror")
    for i in range(200):
        space.write(Person(i, "z" * 40))
    before = sorted(space_dir.glob("p000/*.seg"))
    reader.acknowledge("mirror", 201)  # no snapshot yet: recovery still needs the log
    assert sorted(space_dir.glob("p000/*.seg")) == before
    space.snapshot()
    assert len(sorted(space_dir.glob("p000/*.seg"))) < len(before)
    reader.close()


def test_acks_are_persisted_atomically(space: Space, space_dir: Path) -> None:
    reader = open_log_reader(space_dir)
    reader.register("m")
    reader.acknowledge("m", 7)
    reader.acknowledge("m", 3)  # never moves back
    reader.close()
    other = open_log_reader(space_dir)
    assert other.register("m") == 7
    other.unregister("m")
    other.close()
    assert not list(space_dir.glob(".*.tmp"))


def test_reader_needs_a_space_directory(tmp_path: Path) -> None:
    with pytest.raises(OperationLogError):
        open_log_reader(tmp_path)


def test_a_reader_behind_retention_goes_on_with_the_segments_left(
    open_space: Callable[..., Space], space_dir: Path
) -> None:
    space = open_space(segment_bytes=4096, partitions=1)
    lagging = open_log_reader(space_dir)
    space.write(Person(0, "a"))
    assert lagging.end_seq() == 2  # it has scanned into the first segment
    for i in range(1, 200):
        space.write(Person(i, "y" * 40))
    space.snapshot()
    other = open_log_reader(space_dir)
    other.register("m")
    other.acknowledge("m", 200)  # retention deletes the segment the lagging reader is in
    other.close()
    start = lagging.first_seq()
    assert start > 2
    space.write(Person(500, "after"))
    assert lagging.end_seq() == 202
    seqs: list[int] = []
    seq = start
    while bulks := lagging.read(seq, 50):
        seqs.extend(b.first_seq for b in bulks)
        seq = bulks[-1].next_seq
    assert seqs == list(range(start, 202))
    lagging.close()
