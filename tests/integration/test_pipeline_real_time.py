"""Real-time mode with a Python map: the Kafka sink's pass produces each Arrow batch as
it comes, not at the batch's end (where Spark's Python runner would hand the pass's rows
back), and the batch's counts are reported. The pipeline runs in a process of its own:
a real-time Python pass needs a Spark session built for it (``REAL_TIME_PYTHON_CONF``)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from tests.integration.support.child_output import await_line, start_piped

ROOT = Path(__file__).resolve().parents[2]
INTERVAL_S = 30
"""The real-time batch's length: a record held to its batch's end would wait for it."""


def test_a_real_time_python_pass_produces_its_records_before_the_batch_ends(
        kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path) -> None:
    source, target = topic_factory(1), topic_factory(1)
    child, lines = start_piped(
        [sys.executable, "-m", "tests.integration.support.real_time_child", kafka_bootstrap,
         source, target, str(tmp_path / "ck"), f"{INTERVAL_S} seconds"], ROOT)
    seen: list[str] = []
    try:
        await_line(child, lines, seen, lambda line: line.startswith("ready"))
        assert "the writer's produce (in the same task)" in seen[-1], seen[-1]
        consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": uuid.uuid4().hex,
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(target, 0, OFFSET_BEGINNING)])  # no group to join
        producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 0})
        # 4½ Arrow batches' worth (REAL_TIME_ARROW_ROWS a batch), two of them refused
        values = [f"bad{i}" if i in (7, 230) else f"v{i}" for i in range(450)]
        sent_ms = time.time() * 1000
        for i, text in enumerate(values):
            producer.produce(source, key=f"k{i}".encode(), value=text.encode())
        producer.flush()
        got: dict[str, str] = {}
        produced_after_ms: list[float] = []  # the pass's producer stamps each record
        deadline = time.monotonic() + INTERVAL_S + 90
        while len(got) < 448 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                key, value = msg.key(), msg.value()
                assert isinstance(key, bytes) and isinstance(value, bytes), msg
                got[key.decode()] = value.decode()
                produced_after_ms.append(msg.timestamp()[1] - sent_ms)
        consumer.close()
        assert got == {f"k{i}": v.upper() for i, v in enumerate(values)
                       if not v.startswith("bad")}
        # the full Arrow batches went out as they came; held to the batch's end (30 s
        # after it began, just before the records were sent) none would have been
        # produced within 10 s; the last, part-filled batch goes at the batch's end
        early = sum(ms < INTERVAL_S * 1000 / 3 for ms in produced_after_ms)
        assert early >= 300, sorted(produced_after_ms)
        counts = _counts(child, lines, seen, 450)
        assert counts == {"in": 450, "out": 448, "errors": 2}, seen[-20:]
    finally:
        if child.poll() is None:  # its whole group: the driver and its JVM
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)


def _counts(child: Any, lines: Any, seen: list[str], rows: int) -> dict[str, int]:
    """The batches' reports summed until ``rows`` rows were read (a report comes once its
    batch ends)."""
    total = {"in": 0, "out": 0, "errors": 0}
    while total["in"] < rows:
        await_line(child, lines, seen, lambda line: line.startswith(("report", "failed")),
                   timeout=INTERVAL_S + 120)
        assert not seen[-1].startswith("failed"), seen[-1]
        report = json.loads(seen[-1].split(" ", 1)[1])
        for name in total:
            total[name] += int(report[name])
    return total


@pytest.mark.slow  # two Spark starts and a kill: with the fault suites
def test_a_killed_real_time_pipeline_resumes_without_losing_a_record(
        kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path) -> None:
    """At least once across a SIGKILL of the driver mid-stream: records go out before
    their batch is committed, so the restart from the checkpoint writes part of the
    killed batch again (duplicates), and every record comes out, mapped."""
    source, target = topic_factory(1), topic_factory(1)
    total = 12_000
    argv = [sys.executable, "-m", "tests.integration.support.real_time_child",
            kafka_bootstrap, source, target, str(tmp_path / "ck"), "1 seconds"]
    feeding = threading.Thread(target=_feed, args=(kafka_bootstrap, source, total))
    child, lines = start_piped(argv, ROOT)
    seen: list[str] = []
    out: list[tuple[str, str]] = []
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(target, 0, OFFSET_BEGINNING)])
    try:
        await_line(child, lines, seen, lambda line: line.startswith("ready"))
        feeding.start()
        _read_until(consumer, out, lambda: len(out) >= total // 4, 120)
        os.killpg(child.pid, signal.SIGKILL)  # mid-stream: batches written, not committed
        child.wait(30)
        killed_at = len(out)
        child, lines = start_piped(argv, ROOT)
        await_line(child, lines, seen, lambda line: line.startswith("ready"))
        feeding.join(120)
        _read_until(consumer, out, lambda: {k for k, _ in out} >= _keys(total), 240)
    finally:
        consumer.close()
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
    assert 0 < killed_at < total, killed_at
    assert dict(out) == {f"k{i}": f"V{i}" for i in range(total)}  # each one, mapped


def _keys(total: int) -> set[str]:
    return {f"k{i}" for i in range(total)}


def _feed(bootstrap: str, topic: str, total: int) -> None:
    """``total`` records at ~2 000 a second."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for start in range(0, total, 200):
        for i in range(start, min(total, start + 200)):
            producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
        producer.flush()
        time.sleep(0.1)


def _read_until(consumer: Any, out: list[tuple[str, str]], done: Callable[[], bool],
                timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"{len(out)} records read"
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            out.append((msg.key().decode(), msg.value().decode()))
