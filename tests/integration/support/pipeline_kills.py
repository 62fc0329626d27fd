"""The pipeline kill harness: numbered records produced into a topic (before and while the
pipeline runs), a pipeline driver (``pipeline_child``) SIGKILLed — its whole process
group — at seeded random moments and restarted from its checkpoint, then a last run
(``available_now``) that finishes what is left; the outputs read back for the checks of
``pipeline_check``.

Kill moments, drawn per kill from the seed: ``start`` (a delay after the process
starts: Spark's start-up, the query's start, the re-run of the batch in flight),
``batch`` (a delay after the driver reports a batch with data starting, once one batch
of the run has completed: inside the batch) and ``write`` (Kafka sinks: at once when
the output topic grows during a batch: inside its write; under ``EXACTLY_ONCE`` the
process group is then frozen (SIGSTOP) and killed if the output holds an open
transaction — inside it — or let go on (SIGCONT) to the next write, a few times, if the
transaction had committed). After each kill the output topic's
last stable offsets are compared with its high watermarks: a kill that left a
transaction open is counted (``kills_in_open_transaction``).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec

from tests.integration.support.child_output import start_piped
from tests.integration.support.pipeline_check import grid_key

ROOT = Path(__file__).resolve().parents[3]
log = logging.getLogger(__name__)

Record = tuple[bytes | None, bytes | None]
WRITE_ATTEMPTS = 12
"""How many writes an exactly-once ``write`` kill lets commit before it kills anyway."""
FROZEN_S = 1.5
"""How long the frozen driver is left before its output is looked at (a transaction seen
open at once may be one whose commit the broker is completing)."""
_LATEST: Any = OffsetSpec.latest()  # type: ignore[no-untyped-call]


def produce(bootstrap: str, topic: str, first: int, count: int, *, keys: int | None = None,
            rate: float | None = None, hurry: threading.Event | None = None) -> None:
    """Records ``first .. first+count-1`` in order (idempotent producer: each key's
    records keep their order); key ``str(i)``, or ``grid_key(i, keys)``; at most
    ``rate`` records per second when given, until ``hurry`` is set."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "enable.idempotence": True})
    started = time.monotonic()
    for i in range(first, first + count):
        value = str(i).encode()
        key = value if keys is None else grid_key(i, keys).encode()
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.1)
        if rate is not None and (i - first) % 100 == 99 and not (hurry and hurry.is_set()):
            ahead = started + (i - first + 1) / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
            producer.poll(0)
    assert producer.flush(120) == 0, "records left unsent"


class Background:
    """``produce`` in a thread (slowly: the kills that wait for a batch find one);
    ``join`` produces the rest at full speed and re-raises the thread's failure."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.error: BaseException | None = None
        self.hurry = threading.Event()

        def run() -> None:
            try:
                produce(*args, hurry=self.hurry, **kwargs)
            except BaseException as exc:  # handed to join
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self, timeout: float = 600) -> None:
        self.hurry.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the producer did not finish"
        if self.error is not None:
            raise self.error


def read_topic(bootstrap: str, topic: str, *, committed: bool = True,
               timeout_s: float = 300) -> list[Record]:
    """Every (key, value) of ``topic`` to each partition's end, ``read_committed`` (or
    ``read_uncommitted``)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False,
                         "isolation.level": "read_committed" if committed
                         else "read_uncommitted"})
    try:
        parts = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30,
                                                  cached=False)[1] for p in parts}
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        records: list[Record] = []
        deadline = time.monotonic() + timeout_s
        while True:
            for msg in consumer.consume(2000, timeout=0.5):
                assert msg.error() is None, msg.error()
                records.append((msg.key(), msg.value()))
            positions = consumer.position([TopicPartition(topic, p) for p in parts])
            if all(tp.offset >= ends[tp.partition] or ends[tp.partition] == 0
                   for tp in positions):
                return records
            assert time.monotonic() < deadline, f"not at the end: {positions} vs {ends}"
    finally:
        consumer.close()


def _ends(admin: AdminClient, topic: str, partitions: int,
          isolation: IsolationLevel) -> dict[int, int]:
    request = {TopicPartition(topic, p): _LATEST for p in range(partitions)}
    futures = admin.list_offsets(request, isolation_level=isolation, request_timeout=15)
    return {tp.partition: future.result().offset for tp, future in futures.items()}


def open_transaction(admin: AdminClient, topic: str, partitions: int) -> bool:
    """Whether some partition's last stable offset is behind the high watermark it had
    just before (read in that order: a transaction that commits between the two reads is
    not taken for an open one)."""
    high = _ends(admin, topic, partitions, IsolationLevel.READ_UNCOMMITTED)
    stable = _ends(admin, topic, partitions, IsolationLevel.READ_COMMITTED)
    return any(stable[p] < high[p] for p in high)


@dataclass
class KillRun:
    """One run of a pipeline under kills."""

    config: dict[str, Any]
    """The child's config (``pipeline_child``) without ``trigger``."""
    tmp: Path
    kills: int
    seed: int
    start_delay_s: tuple[float, float] = (2.0, 30.0)
    batch_delay_s: tuple[float, float] = (0.0, 3.0)
    styles: tuple[str, ...] = ("start", "batch", "write")
    """The kill moments drawn from (``write`` only for Kafka sinks)."""
    target_partitions: int = 0
    """The output topic's partitions (Kafka sinks), watched for ``write`` kills."""
    moments: list[str] = field(default_factory=list)
    kills_in_open_transaction: int = 0
    kills_after_a_batch: int = 0
    """Runs killed after at least one of their batches had completed."""
    runs: int = 0

    def _start(self, trigger: str) -> tuple[subprocess.Popen[str], queue.Queue[str], Path]:
        self.runs += 1
        path = self.tmp / f"child-{self.runs}.json"
        path.write_text(json.dumps({**self.config, "trigger": trigger}))
        process, lines = start_piped([sys.executable, "-m",
                                      "tests.integration.support.pipeline_child",
                                      str(path)], ROOT)
        return process, lines, self.tmp / f"child-{self.runs}.log"

    def kill_loop(self, admin: AdminClient | None) -> None:
        """``kills`` runs, each SIGKILLed at a seeded moment."""
        rng = random.Random(self.seed)
        for number in range(self.kills):
            style = rng.choice(self.styles)
            delay = rng.uniform(*(self.start_delay_s if style == "start"
                                  else self.batch_delay_s))
            process, lines, logfile = self._start("1 second")
            seen: list[str] = []
            try:
                moment = self._await_moment(process, lines, seen, style, delay, admin)
            finally:  # killed whatever happened: no driver outlives the test
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(60)
                _drain(lines, seen)
                logfile.write_text("".join(seen))
            in_txn = admin is not None and open_transaction(
                admin, self.config["target"], self.target_partitions)
            self.kills_in_open_transaction += in_txn
            self.kills_after_a_batch += any(_completed(line) for line in seen)
            batches = [line.strip() for line in seen if line.startswith("batch ")]
            moment += f" (open transaction: {in_txn}; last lines: {batches[-2:]})"
            self.moments.append(moment)
            print(f"kill {number + 1}: {moment}", flush=True)

    def _await_moment(self, process: subprocess.Popen[str], lines: queue.Queue[str],
                      seen: list[str], style: str, delay: float,
                      admin: AdminClient | None) -> str:
        if style == "start":
            _pump_until(process, lines, seen, None, time.monotonic() + delay)
            return f"start+{delay:.2f}s"
        if style == "batch":
            # the next batch after one that completed in this run (the first one of a
            # run re-runs the batch in flight at the last kill)
            _pump_until(process, lines, seen, _completed, time.monotonic() + 300)
        _pump_until(process, lines, seen, lambda line: line.startswith("batch start"),
                    time.monotonic() + 300)
        if style == "batch":
            _pump_until(process, lines, seen, None, time.monotonic() + delay)
            return f"{_last_start(seen)} +{delay:.2f}s"
        assert admin is not None, "write kills watch a Kafka output topic"
        topic, parts = self.config["target"], self.target_partitions
        transactional = self.config["guarantee"] == "EXACTLY_ONCE"
        before = _ends(admin, topic, parts, IsolationLevel.READ_UNCOMMITTED)
        started = time.monotonic()
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            # the first rows of a batch on the broker (one read per poll: a slot's
            # transaction commits within milliseconds of its rows)
            while _ends(admin, topic, parts, IsolationLevel.READ_UNCOMMITTED) == before:
                _pump_until(process, lines, seen, None, time.monotonic() + 0.002)
                assert time.monotonic() - started < 300, "the output never grew"
            if not transactional:
                break
            # freeze the driver's process group and look: a transaction still open once
            # a commit already asked for has had time to complete on the broker is
            # killed inside it; one committed, let the driver go on and retry
            os.killpg(process.pid, signal.SIGSTOP)
            time.sleep(FROZEN_S)
            if open_transaction(admin, topic, parts):
                return (f"{_last_start(seen)} +write after "
                        f"{time.monotonic() - started:.2f}s, frozen inside a transaction "
                        f"(attempt {attempt})")
            before = _ends(admin, topic, parts, IsolationLevel.READ_UNCOMMITTED)
            os.killpg(process.pid, signal.SIGCONT)
        return f"{_last_start(seen)} +write after {time.monotonic() - started:.2f}s"

    def finish(self, timeout_s: float = 1200) -> list[str]:
        """A last run, ``available_now``, to the end of the input; its lines."""
        process, lines, logfile = self._start("available_now")
        seen: list[str] = []
        try:
            _pump_until(process, lines, seen, lambda line: line.startswith(("finished",
                                                                            "FAILED")),
                        time.monotonic() + timeout_s, until_exit=True)
            code = process.wait(120)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(60)
            _drain(lines, seen)
            logfile.write_text("".join(seen))
        assert code == 0 and any(line.startswith("finished") for line in seen), \
            "the last run failed:\n" + "".join(seen[-60:])
        return seen


def _pump_until(process: subprocess.Popen[str], lines: queue.Queue[str], seen: list[str],
                matches: Any, deadline: float, until_exit: bool = False) -> None:
    """Read lines until one ``matches`` (or, with ``matches`` None, until ``deadline``);
    the process must stay alive unless ``until_exit``."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            assert matches is None, "no matching line in time:\n" + "".join(seen[-60:])
            return
        try:
            line = lines.get(timeout=min(remaining, 0.5))
        except queue.Empty:
            code = process.poll()
            if code is None or not lines.empty():
                continue
            assert until_exit, f"the driver ended ({code}):\n" + "".join(seen[-60:])
            return
        seen.append(line)
        if matches is not None and matches(line):
            return


def _last_start(seen: list[str]) -> str:
    return next(line.strip() for line in reversed(seen) if line.startswith("batch start"))


def _completed(line: str) -> bool:
    return line.startswith("batch ") and " rows " in line


def _drain(lines: queue.Queue[str], seen: list[str]) -> None:
    time.sleep(0.2)
    while True:
        try:
            seen.append(lines.get_nowait())
        except queue.Empty:
            return


def read_map(cluster_name: str, members: tuple[str, ...], name: str) -> dict[Any, Any]:
    """The whole content of a grid map (key → value)."""
    from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig

    held: dict[Any, Any] = {}
    with HazelcastAdapter(HazelcastGridConfig(cluster_name=cluster_name,
                                              members=members)) as adapter:
        for entries in adapter.snapshot(name, 5000):
            for entry in entries:
                assert entry.key not in held, f"key {entry.key!r} read twice"
                held[entry.key] = entry.value
    return held
