"""kill -9 the mirror at random moments while the space writes; after restarts a
read_committed consumer sees every operation exactly once, in per-entity order, with
transactions whole."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gridstream.mirror.kafka import committed_position
from gridstream.model import SpaceDocument
from gridstream.operations import Bulk, PropertySpec, TypeDescriptor
from gridstream.space import Space, open_log_reader
from tests.integration.support.mirror_helpers import assert_exactly_once, consume_all

MakeTopic = Callable[..., str]
REPO = Path(__file__).resolve().parents[2]


def _write_workload(space: Space, type_name: str, operations: int, duration_s: float,
                    seed: int) -> None:
    """Singles and transactions of every kind, paced over ``duration_s``."""
    rnd = random.Random(seed)
    alive: set[int] = set()
    started, done = time.monotonic(), 0

    def one(api: Any, n: int) -> None:
        doc = SpaceDocument(type_name, {"id": str(n), "n": rnd.randint(0, 99), "pad": "p" * 120})
        if n not in alive:
            api.write(doc)
            alive.add(n)
            return
        kind = rnd.choice(["update", "partial", "change", "remove", "take"])
        if kind == "update":
            api.update(doc)
        elif kind == "partial":
            api.partial_update(SpaceDocument(type_name, {"id": str(n), "n": 1}))
        elif kind == "change":
            api.change(type_name, str(n), {"n": rnd.randint(0, 9)})
        else:
            getattr(api, kind)(type_name, str(n))
            alive.discard(n)

    while done < operations:
        size = min(rnd.choice([1, 1, 1, 2, 5, 10, 20]), operations - done)
        ids = rnd.sample(range(400), size)
        if size == 1:
            one(space, ids[0])
        else:
            with space.transaction() as tx:
                for n in ids:
                    one(tx, n)
        done += size
        ahead = done / operations * duration_s - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)


class MirrorProcess:
    """``python -m gridstream.mirror`` as a child process that can be killed."""

    def __init__(self, data_dir: Path, bootstrap: str, name: str, logs: Path) -> None:
        self.cmd = [sys.executable, "-m", "gridstream.mirror", "--data-dir", str(data_dir),
                    "--bootstrap", bootstrap, "--name", name, "--metrics-interval", "0",
                    "--max-batch-operations", "500", "--log-level", "INFO"]
        self.logs = logs
        self.runs = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.runs += 1
        out = (self.logs / f"mirror-{self.runs}.log").open("wb")
        self.proc = subprocess.Popen(self.cmd, cwd=REPO, stdout=out, stderr=out)

    def wait_delivering(self, timeout_s: float = 60.0) -> None:
        """Wait until the current run has resumed (opened Kafka, read its position)."""
        deadline = time.monotonic() + timeout_s
        while "resumes at seq" not in self.tail():
            assert time.monotonic() < deadline, f"mirror did not start: {self.tail()}"
            time.sleep(0.02)

    def kill(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            pytest.fail(f"mirror exited by itself ({self.proc.returncode}): {self.tail()}")
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)

    def tail(self) -> str:
        path = self.logs / f"mirror-{self.runs}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def _all_bulks(data_dir: Path) -> list[Bulk]:
    reader = open_log_reader(data_dir)
    try:
        bulks: list[Bulk] = []
        seq = reader.first_seq()
        while seq < reader.end_seq():
            chunk = reader.read(seq, 10_000)
            bulks.extend(chunk)
            seq = chunk[-1].next_seq
        return bulks
    finally:
        reader.close()


def _crash_scenario(bootstrap: str, topic: str, tmp_path: Path, operations: int,
                    kills: int, seed: int) -> int:
    """Run the scenario; the number of records of aborted transactions (what the kills
    interrupted, visible only to read_uncommitted readers)."""
    data_dir, name = tmp_path / "space", f"crash-{uuid.uuid4().hex[:8]}"
    space = Space.embedded("crash", data_dir=data_dir)
    descriptor = space.introduce_type(TypeDescriptor(
        name="Account", id_property="id", topic=topic,
        fixed=(PropertySpec("id", "str"), PropertySpec("n", "int"), PropertySpec("pad", "str"))))
    audit = open_log_reader(data_dir)
    audit.register("audit")  # keeps the whole log for the final comparison
    audit.close()
    rnd = random.Random(seed)
    writer = threading.Thread(target=_write_workload,
                              args=(space, "Account", operations, kills * 2.0, seed))
    mirror = MirrorProcess(data_dir, bootstrap, name, tmp_path)
    mirror.start()
    writer.start()
    for n in range(kills):
        if n % 3 == 2:  # some kills land while it starts (connecting, fencing, resuming)
            time.sleep(rnd.uniform(0.05, 1.5))
        else:  # most while it delivers
            mirror.wait_delivering()
            time.sleep(rnd.uniform(0.0, 1.0))
        mirror.kill()
        mirror.start()
    writer.join()
    end = space.next_seq
    deadline = time.monotonic() + 180
    while (committed_position(bootstrap, name) or 0) < end:
        assert time.monotonic() < deadline, f"mirror stuck: {mirror.tail()}"
        time.sleep(0.5)
    # the last run may have found everything delivered by the one killed before it: let
    # it finish starting (its SIGTERM handler is installed once it runs) before stopping
    mirror.wait_delivering()
    assert mirror.stop() == 0, mirror.tail()
    space.close()
    bulks = _all_bulks(data_dir)
    assert sum(len(b.operations) for b in bulks) == operations
    assert any(b.txn_id for b in bulks)
    records = consume_all(bootstrap, [topic], operations, timeout_s=300,
                          types={descriptor.name: descriptor})
    assert_exactly_once(records, bulks)
    assert mirror.runs == kills + 1
    everything = consume_all(bootstrap, [topic], operations, timeout_s=300,
                             read_committed=False, types={descriptor.name: descriptor})
    return len(everything) - operations


@pytest.mark.slow  # a fault run (17 s); the twenty-kill one below is its larger twin
def test_kill_9_five_times_during_5k_operations(
        kafka_bootstrap: str, topic_factory: MakeTopic, tmp_path: Path,
        record_property: Callable[[str, object], None]) -> None:
    aborted = _crash_scenario(kafka_bootstrap, topic_factory(3), tmp_path, 5_000, 5, seed=11)
    record_property("aborted_records", aborted)


@pytest.mark.slow
def test_kill_9_twenty_times_during_50k_operations(
        kafka_bootstrap: str, topic_factory: MakeTopic, tmp_path: Path,
        record_property: Callable[[str, object], None]) -> None:
    aborted = _crash_scenario(kafka_bootstrap, topic_factory(3), tmp_path, 50_000, 20, seed=29)
    # how many records the kills left in aborted transactions (timing-dependent, often > 0)
    record_property("aborted_records", aborted)
