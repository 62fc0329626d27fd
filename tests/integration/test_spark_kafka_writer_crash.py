"""Acceptance: 100,000 numbered records copied topic → topic by a Spark query whose driver
is SIGKILLed again and again and restarted from its checkpoint.

Through the exactly-once writer a ``read_committed`` consumer sees every record exactly
once. The same run through Spark's own Kafka sink is measured (its duplicates and
losses are logged, not asserted: it is at-least-once by design).
"""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.support.child_output import await_line, start_piped

ROOT = Path(__file__).resolve().parents[2]
log = logging.getLogger(__name__)


def fill(bootstrap: str, topic: str, count: int) -> None:
    """``count`` records numbered 0..count-1 (key and value: the number as text)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "enable.idempotence": True})
    for i in range(count):
        data = str(i).encode()
        while True:
            try:
                producer.produce(topic, data, data)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0


def read_all(bootstrap: str, topic: str, timeout_s: float = 120) -> tuple[Counter[bytes], int]:
    """Every committed value of ``topic`` (read_committed, to each partition's end) and
    how many records that was."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        parts = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30,
                                                  cached=False)[1] for p in parts}
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        seen: Counter[bytes] = Counter()
        deadline = time.monotonic() + timeout_s
        while True:
            for msg in consumer.consume(1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                seen[msg.value()] += 1
            positions = consumer.position([TopicPartition(topic, p) for p in parts])
            if all(ends[tp.partition] == 0 or tp.offset >= ends[tp.partition]
                   for tp in positions):
                return seen, sum(seen.values())
            assert time.monotonic() < deadline, f"not at the end: {positions} vs {ends}"
    finally:
        consumer.close()


def _command(sink: str, bootstrap: str, source: str, target: str, ckpt: Path,
             trigger: str) -> list[str]:
    return [sys.executable, "-m", "tests.integration.support.spark_kafka_copy", "--sink", sink,
            "--bootstrap", bootstrap, "--source", source, "--target", target,
            "--checkpoint", str(ckpt), "--trigger", trigger]


def crash_copy(sink: str, bootstrap: str, source: str, target: str, tmp: Path, *,
               kills: int, seed: int) -> int:
    """Run the copy, SIGKILL its whole process group ``kills`` times while batches flow,
    then let a last run finish what is left; returns the kills done."""
    ckpt = tmp / f"ckpt-{sink}"
    rng, seen = random.Random(seed), []
    done = 0
    for _ in range(kills):
        process, lines = start_piped(
            _command(sink, bootstrap, source, target, ckpt, "1 second"), ROOT)
        try:
            await_line(process, lines, seen, lambda line: line.startswith("batch "))
            time.sleep(rng.uniform(0.0, 2.5))
        finally:  # killed whatever happened: no driver outlives the test
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(60)
        done += 1
    final = subprocess.run(_command(sink, bootstrap, source, target, ckpt, "available_now"),
                           cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert final.returncode == 0, final.stdout[-4000:] + final.stderr[-4000:]
    assert "finished" in final.stdout
    return done


def tally(seen: Counter[bytes], expected: int) -> tuple[int, int]:
    """(missing, duplicated): numbers never seen, numbers seen more than once."""
    missing = sum(1 for i in range(expected) if seen[str(i).encode()] == 0)
    duplicated = sum(1 for count in seen.values() if count > 1)
    return missing, duplicated


RECORDS = 100_000
KILLS = 6


@pytest.mark.slow
def test_exactly_once_writer_survives_driver_kills_and_spark_sink_is_measured(
        kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path) -> None:
    source = topic_factory(4)
    fill(kafka_bootstrap, source, RECORDS)
    figures = {}
    for sink, seed in (("exactly_once", 11), ("spark", 11)):
        target = topic_factory(4)
        kills = crash_copy(sink, kafka_bootstrap, source, target, tmp_path, kills=KILLS,
                           seed=seed)
        seen, total = read_all(kafka_bootstrap, target)
        missing, duplicated = tally(seen, RECORDS)
        extra = sum(seen.values()) - (RECORDS - missing)
        figures[sink] = {"kills": kills, "records": RECORDS, "read": total,
                         "missing": missing, "duplicated": duplicated,
                         "extra_copies": extra}
        line = f"{sink}: {figures[sink]}"
        log.warning(line)
        print(line)
        assert kills >= 5
    assert figures["exactly_once"]["missing"] == 0
    assert figures["exactly_once"]["duplicated"] == 0
    assert figures["exactly_once"]["read"] == RECORDS
    # the comparison ran: Spark's sink was read to its end and holds every number
    assert figures["spark"]["read"] >= RECORDS - figures["spark"]["missing"] > 0
