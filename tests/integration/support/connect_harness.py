"""Processes and readers for the source connector's fault tests: the workload process,
the connector process (SIGKILLed and started again from its checkpoint), a
``read_committed`` reader of the connector's topics, and the grid's final state."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from gridstream.protocol import H_VERSION
from tests.integration.support.child_output import await_line, start_piped
from tests.integration.support.connect_plan import Seen

ROOT = Path(__file__).resolve().parents[3]
Slot = tuple[str, str]


class Child:
    """A child process (its own session) whose lines are kept and watched: the last
    ``op I`` it printed, and every line in ``seen``."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.argv = argv
        self.process, self._lines = start_piped(argv, ROOT)
        self.seen: list[str] = []
        self.last_op = -1
        self._log = log.open("a")
        self._log.write(f"--- start {' '.join(argv)}\n")

    def _drain(self) -> None:
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return
            self._keep(line)

    def _keep(self, line: str) -> None:
        self._log.write(line)
        if line.startswith("op "):
            self.last_op = int(line.split()[1])
        else:
            self.seen.append(line)

    def wait_for(self, matches: Callable[[str], bool], timeout: float = 300) -> None:
        """Block until a line matches (fails if the child ends first)."""
        self._drain()
        if any(matches(line) for line in self.seen):
            return
        got: list[str] = []
        try:
            await_line(self.process, self._lines, got,
                       lambda line: not line.startswith("op ") and matches(line), timeout)
        finally:
            for line in got:
                self._keep(line)

    def poll(self) -> int | None:
        self._drain()
        return self.process.poll()

    def kill(self) -> None:
        """SIGKILL the whole process group and reap it."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(60)
        self._drain()
        self._log.flush()

    def stop(self, timeout: float = 120) -> int:
        """SIGTERM, then wait (SIGKILL after ``timeout``); the exit code."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            code = -9
        self._drain()
        self._log.flush()
        return code

    def tail(self, lines: int = 40) -> str:
        self._drain()
        return "".join(self.seen[-lines:])


def write_json(path: Path, data: Mapping[str, Any]) -> Path:
    path.write_text(json.dumps(data))
    return path


def start_connector(config: Path, log: Path) -> Child:
    return Child([sys.executable, "-m",
                  "tests.integration.support.connector_proc", str(config)], log)


def start_workload(config: Path, log: Path) -> Child:
    return Child([sys.executable, "-m",
                  "tests.integration.support.connect_workload", str(config)], log)


# ------------------------------------------------------------------ Kafka


def _version(headers: Any) -> int | None:
    for name, raw in headers or ():
        if name == H_VERSION and raw is not None:
            return int(raw.decode() if isinstance(raw, bytes) else raw)
    return None


class TopicReader:
    """A ``read_committed`` consumer of every partition of ``topics`` from offset 0,
    keeping each (cache, key)'s records in the order read."""

    def __init__(self, bootstrap: str, topics: Mapping[str, str]) -> None:
        """``topics``: topic → cache."""
        self.topics = dict(topics)
        self.records: dict[Slot, list[Seen]] = {}
        self.count = 0
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"gs-check-{uuid.uuid4().hex}",
            "isolation.level": "read_committed", "enable.auto.commit": False,
        })
        self._parts: list[TopicPartition] = []

    def assign(self, timeout_s: float = 300) -> None:
        """Wait until every topic exists (the connector creates them), then read them all."""
        deadline = time.monotonic() + timeout_s
        while True:
            meta = self._consumer.list_topics(timeout=30).topics
            if all(t in meta and meta[t].partitions for t in self.topics):
                break
            missing = [t for t in self.topics if t not in meta]
            assert time.monotonic() < deadline, f"topics never created: {missing}"
            time.sleep(1)
        self._parts = [TopicPartition(t, p, 0) for t in self.topics
                       for p in sorted(meta[t].partitions)]
        self._consumer.assign(self._parts)

    def poll(self, seconds: float) -> int:
        """Read what is committed for about ``seconds``; how many records."""
        deadline, got = time.monotonic() + seconds, 0
        while time.monotonic() < deadline:
            for msg in self._consumer.consume(5000, timeout=0.3):
                assert msg.error() is None, msg.error()
                raw_value = msg.value()
                value = None if raw_value is None else json.loads(raw_value)
                topic, raw_key = msg.topic(), msg.key()
                assert topic is not None and raw_key is not None, "a record without a key"
                slot = (self.topics[topic], str(json.loads(raw_key)))
                where = f"{msg.topic()}[{msg.partition()}]@{msg.offset()}"
                self.records.setdefault(slot, []).append(
                    Seen(value, _version(msg.headers()), where))
                got += 1
        self.count += got
        return got

    def at_end(self) -> bool:
        """Every partition read up to its high watermark (committed data only stops
        short of it while a transaction is open)."""
        positions = self._consumer.position(
            [TopicPartition(tp.topic, tp.partition) for tp in self._parts])
        for tp in positions:
            high = self._consumer.get_watermark_offsets(
                TopicPartition(tp.topic, tp.partition), timeout=30, cached=False)[1]
            if high > 0 and tp.offset < high:
                return False
        return True

    def read_to_end(self, timeout_s: float = 300) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            self.poll(0.5)
            if self.at_end():
                return
            assert time.monotonic() < deadline, "the topics were not read to their end"

    def last_values(self) -> dict[Slot, Mapping[str, Any] | None]:
        return {slot: records[-1].value for slot, records in self.records.items()}

    def close(self) -> None:
        self._consumer.close()


def caught_up(reader: TopicReader, final: Mapping[Slot, Mapping[str, Any] | None]) -> list[Slot]:
    """The keys whose last record read is not yet the grid's value (whole value)."""
    last = reader.last_values()
    def plain(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else dict(value)

    return [slot for slot, value in final.items() if plain(last.get(slot)) != plain(value)]


def delete_topics(bootstrap: str, topics: Iterable[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = list(topics)
    existing = set(admin.list_topics(timeout=30).topics)
    doomed = [t for t in names if t in existing]
    if doomed:
        for future in admin.delete_topics(doomed).values():
            future.result(timeout=60)


# ------------------------------------------------------------------ the grid


def grid_state(adapter_factory: Callable[[], Any], caches: Iterable[str]
               ) -> dict[Slot, Mapping[str, Any]]:
    """Every entry of ``caches`` now, through a grid adapter's snapshot."""
    state: dict[Slot, Mapping[str, Any]] = {}
    with adapter_factory() as grid:
        for cache in caches:
            for batch in grid.snapshot(cache, 2000):
                for entry in batch:
                    state[(cache, str(entry.key))] = entry.value
    return state


def ready_checkpoint(reader: TopicReader, caches: Iterable[str], timeout_s: float = 600,
                     alive: Callable[[], None] | None = None) -> None:
    """Wait until the connector wrote each cache's first entry (its first batch ran)."""
    deadline = time.monotonic() + timeout_s
    wanted = {(cache, "k00000") for cache in caches}
    while not wanted <= set(reader.records):
        if alive is not None:
            alive()
        reader.poll(1)
        assert time.monotonic() < deadline, (
            f"the connector never wrote the first entries: {sorted(wanted - set(reader.records))}")


def connector_lines_ok(child: Child) -> None:
    """Fails when the connector process ended on its own (an error, not a kill)."""
    code = child.poll()
    assert code is None, f"the connector ended with {code}:\n{child.tail()}"

