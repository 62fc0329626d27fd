"""Shared parts of the pipeline benchmarks: the records, the topics, the output checks,
Quix Streams' own virtualenv, and the one-process sides run as subprocesses.

The workload: ``N`` string records of ``RECORD_BYTES`` bytes (``"%012d-"`` then
lowercase letters), key the record's number as text; the map uppercases the value. An
output record must be its input uppercased: the check reads every output record back
and counts missing and duplicated numbers and any value that is not the expected one.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks._spark_bench import read_to_end

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BOOTSTRAP = "127.0.0.1:9092"
RECORD_BYTES = 100
_PREFIX = 13  # "%012d-"
FILLER = (b"abcdefghijklmnopqrstuvwxyz" * 4)[: RECORD_BYTES - _PREFIX]
UPPER_FILLER = FILLER.upper()

QUIX_VERSION = "3.28.*"
"""Quix Streams pins ``confluent-kafka<2.13``: it runs in a virtualenv of its own."""
QUIX_VENV = Path(os.environ.get("GRIDSTREAM_BENCH_QUIX_VENV",
                                Path.home() / ".gridstream" / "bench" / "quix-venv"))


def record(i: int) -> tuple[bytes, bytes]:
    """Record ``i``: (key, value)."""
    return b"%d" % i, b"%012d-" % i + FILLER


# ------------------------------------------------------------------------- topics


def create_topics(topics: Sequence[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=partitions, replication_factor=1) for t in topics])
    for future in futures.values():
        future.result(30)


def delete_topics(topics: Sequence[str]) -> None:
    if not topics:
        return
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for future in admin.delete_topics(list(topics)).values():
        with contextlib.suppress(KafkaException):  # never created: the run failed before
            future.result(30)


def fresh_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def send(producer: Producer, topic: str, value: bytes, key: bytes) -> None:
    """``produce``, waiting while the producer's queue is full."""
    while True:
        try:
            producer.produce(topic, value, key)
            break
        except BufferError:
            producer.poll(0.05)
    producer.poll(0)


def fill(topic: str, records: int) -> float:
    """Produce records ``0..records-1`` (idempotent, lz4); the seconds it took."""
    started = time.perf_counter()
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 20,
                         "enable.idempotence": True, "compression.type": "lz4"})
    for i in range(records):
        key, value = record(i)
        send(producer, topic, value, key)
    if producer.flush(60):
        raise AssertionError("records undelivered after 60 s")
    return time.perf_counter() - started


def check_output(topic: str, records: int, *, exactly_once: bool) -> dict[str, int]:
    """Read ``topic`` to its end (read_committed) and check it against the input:
    every number present, each value its input uppercased, the key unchanged; under
    ``exactly_once`` no duplicates either. ``AssertionError`` otherwise (a side that
    wrote nothing fails here). Returns the counts."""
    seen = bytearray(records)
    total = wrong = 0
    for m in read_to_end(topic, BOOTSTRAP):
        total += 1
        value = m.value() or b""
        number = int(value[:12]) if value[:12].isdigit() else -1
        if (not 0 <= number < records or value[12:] != b"-" + UPPER_FILLER
                or m.key() != b"%d" % number):
            wrong += 1
            continue
        if seen[number] < 255:
            seen[number] += 1
    missing = seen.count(0)
    duplicates = total - wrong - (records - missing)
    counts = {"records": total, "missing": missing, "duplicates": duplicates,
              "wrong": wrong}
    if missing or wrong or (exactly_once and duplicates):
        raise AssertionError(f"{topic}: output does not match the input: {counts}")
    return counts


# ------------------------------------------------------------------------- processes


def warm_rounds(sides: Sequence[str], run: Callable[[str, str, str], Callable[[], Any] | None], *,
                repeat: int, partitions: int, topics: list[str],
                after: Callable[[str, str, int, float], None] | None = None
                ) -> dict[str, list[float]]:
    """The rounds of a one-session benchmark: each side once to warm up, then ``repeat``
    times in rotating order, each run into a fresh output topic (added to ``topics``,
    for the caller to delete) with a fresh checkpoint. ``run(side, target, checkpoint)``
    starts the side's query and waits for its end, and may return what to do once it is
    timed (while the checkpoint exists: closing a job); the seconds are kept from round 0
    on, and ``after(side, target, round, seconds)`` sees every run."""
    times: dict[str, list[float]] = {side: [] for side in sides}
    order = list(sides)
    for r in range(-1, repeat):
        for side in order[r % len(order):] + order[:r % len(order)]:
            target = fresh_topic("gs-bench-round-out")
            topics.append(target)
            create_topics([target], partitions)
            with tempfile.TemporaryDirectory(prefix="gs-bench-ck-") as checkpoint:
                began = time.perf_counter()
                then = run(side, target, checkpoint)
                seconds = time.perf_counter() - began
                if then is not None:
                    then()
            if after is not None:
                after(side, target, r, seconds)
            if r >= 0:
                times[side].append(seconds)
    return times


def summary(times: dict[str, list[float]], records: int, baseline: str) -> dict[str, Any]:
    """A one-session benchmark's figures: each side's seconds, its median rate, and its
    ratio to ``baseline``'s (``vs_<baseline>``)."""
    med = {s: statistics.median(v) for s, v in times.items()}
    return {"seconds": {s: [round(x, 2) for x in v] for s, v in times.items()},
            "records_per_s": {s: round(records / m) for s, m in med.items()},
            f"vs_{baseline}": {s: round(med[baseline] / m, 3) for s, m in med.items()}}


def quix_python() -> Path:
    """The Quix virtualenv's interpreter, the virtualenv created on first use
    (``python -m venv`` + ``pip install quixstreams``)."""
    python = QUIX_VENV / "bin" / "python"
    if python.exists():
        return python
    QUIX_VENV.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(QUIX_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q",
                    f"quixstreams=={QUIX_VERSION}"], check=True)
    return python


def last_json(stdout: str) -> dict[str, Any]:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            value = json.loads(line)
            assert isinstance(value, dict)
            return value
    raise AssertionError("the side printed no JSON line")


def run_process(argv: Sequence[str], *, timeout_s: float = 1800.0,
                env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one side as its own process: its JSON line plus ``process_s``, the wall time
    from its start to its exit."""
    started = time.perf_counter()
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s,
                          check=False, env=env, cwd=ROOT)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise AssertionError(f"{argv[1]} {' '.join(argv[2:4])} exited {proc.returncode}:\n"
                             f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    result = last_json(proc.stdout)
    result["process_s"] = elapsed
    return result


def spark_env() -> dict[str, str]:
    """The environment of a Spark side: this checkout's package first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env
