"""Across processes: a reader tails a live writer; routing is the same everywhere."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gridstream.errors import LogCorruptedError
from gridstream.space import Space, open_log_reader, stable_partition
from gridstream.space._frames import encode_frame

from .models import Person

ROOT = Path(__file__).resolve().parents[3]


def test_a_reader_tails_a_writer_in_another_process(space_dir: Path) -> None:
    count = 4000
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.unit.space._proc", "write", str(space_dir), str(count)],
        cwd=ROOT, stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not (space_dir / "space.json").exists():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        reader = open_log_reader(space_dir)
        seq, seen, txns = 1, [], 0
        while proc.poll() is None or reader.end_seq() > seq:
            assert time.monotonic() < deadline, "the tail stalled"
            bulks = reader.read(seq, 50)
            if not bulks:
                time.sleep(0.002)
                continue
            for bulk in bulks:
                assert bulk.first_seq == seq  # contiguous: no gap, no duplicate
                versions = [op.version for op in bulk.operations]
                assert versions == list(range(seq, bulk.next_seq))
                if bulk.txn_id is not None:
                    txns += 1
                    assert len(bulk.operations) == 2  # transactions arrive whole
                seen.extend(versions)
                seq = bulk.next_seq
        assert proc.wait(30) == 0
        assert seen == list(range(1, seq)) and len(seen) >= count
        assert txns == count // 10
        reader.close()
    finally:
        proc.kill()
        proc.wait()


def test_partitions_are_stable_across_processes() -> None:
    values = ["alice", "bob", "42", "ünïcödé", "a" * 100]
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run(
        [sys.executable, "-m", "tests.unit.space._proc", "partitions", "7", *values],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    ).stdout.split()
    assert [int(p) for p in out] == [stable_partition(v, 7) for v in values]
    assert stable_partition(42, 7) == stable_partition("42", 7)


def test_a_partial_record_is_invisible_while_the_writer_lives(
    open_space: Callable[..., Space], space_dir: Path
) -> None:
    space = open_space(partitions=1)
    space.write(Person(1))
    segment = next(space_dir.glob("p000/*.seg"))
    frame = encode_frame(b"\x93\xc0\x01\x90", 2, 1, 1)
    with open(segment, "ab") as f:
        f.write(frame[:-2])  # as if the writer were in the middle of an append
    reader = open_log_reader(space_dir)
    assert len(reader.read(1, 10)) == 1
    assert reader.read(2, 10) == []  # not yet visible: the writer holds the lock
    space.close()
    with pytest.raises(LogCorruptedError) as err:  # no writer any more: a torn tail
        reader.read(2, 10)
    assert err.value.path == str(segment)
    reader.close()
