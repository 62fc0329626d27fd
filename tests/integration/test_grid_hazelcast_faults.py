"""The Hazelcast adapter's change stream under faults, on private clusters.

A member SIGKILLed while a map is written and streamed: no change lost or reported twice.
A full cluster restart and a journal overflow: the stored position raises
PositionLostError, never an empty or shortened stream.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gridstream.errors import GridError, PositionLostError
from gridstream.grid import Position, Write
from gridstream.stack.hazelcast import PARTITIONS
from tests.integration.support.hazelcast_cluster import PrivateCluster, private_cluster

pytestmark = pytest.mark.integration

CACHE = "gs-fault-numbers"
KEYS = 20_000
BATCH = 100
PER_PARTITION = 10


@pytest.fixture()
def two_members(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PrivateCluster]:
    yield from private_cluster(tmp_path, monkeypatch, members=2, journal_capacity=1_000_000)


@pytest.fixture()
def small_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PrivateCluster]:
    # ten events per partition
    capacity = PER_PARTITION * PARTITIONS
    yield from private_cluster(tmp_path, monkeypatch, members=1, journal_capacity=capacity)


class Writer(threading.Thread):
    """Puts k0..k{KEYS-1} → {"n": i} in batches, retrying a failed batch (the adapter's
    apply is idempotent); counts the attempts of every key."""

    def __init__(self, cluster: PrivateCluster) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.attempts: Counter[str] = Counter()
        self.failures = 0
        self.written = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.cluster.adapter(invocation_timeout_s=120) as grid:
                for start in range(0, KEYS, BATCH):
                    batch = [Write(f"k{i}", {"n": i}) for i in range(start, start + BATCH)]
                    while True:
                        self.attempts.update(w.key for w in batch)  # type: ignore[misc]
                        try:
                            grid.apply(CACHE, batch)
                            self.written += len(batch)
                            break
                        except GridError:
                            self.failures += 1
                            time.sleep(0.2)
                    time.sleep(0.02)  # spread the writes over a few seconds
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


@pytest.mark.slow  # a fault run: the slow suite (make test-slow)
def test_member_kill_loses_and_repeats_no_change(two_members: PrivateCluster) -> None:
    reader = two_members.adapter(invocation_timeout_s=120)
    position = reader.end_position(CACHE)
    seen: Counter[tuple[str, int]] = Counter()
    values: dict[str, list[Any]] = defaultdict(list)
    writer = Writer(two_members)
    writer.start()
    killed = restarted = False
    written_at_kill = -1
    read_errors = 0
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            try:
                batch = reader.read_changes(CACHE, position, 2000)
            except PositionLostError:
                raise
            except GridError:
                read_errors += 1  # a read during the member's loss: retried from the position
                time.sleep(0.2)
                continue
            for change in batch.changes:
                seen[(change.stream, change.seq)] += 1
                values[str(change.key)].append(change.value)
            position = Position.from_json(batch.position.to_json())  # stored, as a job would
            if not killed and len(seen) >= KEYS // 4:
                written_at_kill = writer.written
                two_members.kill(2)
                killed = True
            elif killed and not restarted and len(seen) >= KEYS // 2:
                reader.close()  # a job restart: a new adapter resumes from the stored position
                reader = two_members.adapter(invocation_timeout_s=120)
                restarted = True
            if not writer.is_alive() and not batch.changes:
                break
            if not batch.changes:
                time.sleep(0.05)
        writer.join(timeout=60)
        assert writer.error is None, writer.error
        assert killed and restarted and not writer.is_alive()
        assert 0 < written_at_kill < KEYS * 3 // 4  # the member died mid-stream
        print(f"written at the kill {written_at_kill}, failed write batches "
              f"{writer.failures}, failed reads {read_errors}")

        duplicates = {k: n for k, n in seen.items() if n > 1}
        assert duplicates == {}
        expected = {f"k{i}": {"n": i} for i in range(KEYS)}
        missing = sorted(set(expected) - set(values))
        assert missing == []
        wrong = {k: v for k, v in values.items() if any(x != expected.get(k) for x in v)}
        assert wrong == {}
        # a key written once is seen once; one whose batch was retried at most once a try
        over = {k: len(v) for k, v in values.items() if len(v) > writer.attempts[k]}
        assert over == {}
        final = {e.key: e.value for b in reader.snapshot(CACHE, 5000) for e in b}
        assert final == expected
    finally:
        reader.close()

    # the whole cluster restarts: the stored position's journal is gone, and says so, to
    # a new adapter and to one whose client stayed open and reconnected
    staying = two_members.adapter(connect_timeout_s=180)
    try:
        before = staying.cluster_id()
        assert staying.read_changes(CACHE, position, 100).changes == []
        two_members.stop()
        two_members.start()
        with two_members.adapter() as fresh, pytest.raises(PositionLostError) as lost:
            fresh.read_changes(CACHE, position, 100)
        assert lost.value.detail == "lineage" and lost.value.cache == CACHE
        deadline = time.monotonic() + 120
        while staying.cluster_id() == before:
            assert time.monotonic() < deadline, "the open client did not reconnect"
            time.sleep(0.2)
        with pytest.raises(PositionLostError) as lost_too:
            staying.read_changes(CACHE, position, 100)
        assert lost_too.value.detail == "lineage"
    finally:
        staying.close()


def test_journal_overflow_is_a_lost_position(small_journal: PrivateCluster) -> None:
    with small_journal.adapter() as grid:
        start = grid.end_position(CACHE)
        grid.apply(CACHE, [Write(f"k{i}", {"n": i}) for i in range(200)])
        first = grid.read_changes(CACHE, start, 10)
        assert len(first.changes) == 10
        middle = first.position
        # a partition's journal keeps ten events: 20 more per key overwrite the first ones
        for round_ in range(20):
            grid.apply(CACHE, [Write(f"k{i}", {"n": i, "r": round_}) for i in range(200)])
        for stale in (start, middle):
            with pytest.raises(PositionLostError) as lost:
                grid.read_changes(CACHE, stale, 1000)
            assert lost.value.detail == "overflow"
        end = grid.end_position(CACHE).next_seqs
        oldest = grid.start_position(CACHE)
        assert oldest.next_seqs == {p: max(0, seq - PER_PARTITION) for p, seq in end.items()}
        rest = grid.read_changes(CACHE, oldest, 10_000)
        assert len(rest.changes) == sum(min(seq, PER_PARTITION) for seq in end.values())
