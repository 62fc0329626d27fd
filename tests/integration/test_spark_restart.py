"""Crash-restart: ``gridstream run`` is SIGKILLed mid-stream again and again.

A producer writes mirror-style transactions while the pipelines (Cassandra, SQL, Delta)
run as a subprocess; the whole process group (Python driver, JVM, Python workers) is
killed with SIGKILL whenever batches are flowing, then restarted from its checkpoints.
At the end every store equals the expected final state and no deleted entity is back.
"""

from __future__ import annotations

import json
import os
import queue
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

from tests.integration.support.child_output import await_line, start_piped
from tests.integration.support.run_files import toml_value as _toml
from tests.integration.support.spark_checks import check_cassandra, check_delta, check_sql
from tests.integration.support.spark_workload import ORDER, PERSON, PERSON_TABLE, Workload, produce

ROOT = Path(__file__).resolve().parents[2]


def _write_config(path: Path, bootstrap: str, topics: list[str], keyspace: str, tmp: Path,
                  trigger: str) -> None:
    sinks = {
        "cassandra": {"kind": "cassandra", "keyspace": keyspace},
        "sql": {"kind": "sql", "url": f"sqlite:///{tmp / 'store.db'}"},
        "delta": {"kind": "delta", "path": str(tmp / "current")},
    }
    lines = [f"[kafka]\nbootstrap_servers = {_toml(bootstrap)}\n",
             f"[types.{json.dumps(PERSON.name)}]"]
    lines += [f"{k} = {_toml(v)}" for k, v in PERSON_TABLE.items()]
    for name, sink in sinks.items():
        lines += ["", "[[pipeline]]", f"name = {_toml(name)}", f"topics = {_toml(topics)}",
                  f"checkpoint = {_toml(str(tmp / ('ckpt-' + name)))}",
                  f"trigger = {_toml(trigger)}", "maxOffsetsPerTrigger = 120",
                  f"sink = {_toml(sink)}"]
    path.write_text("\n".join(lines) + "\n")


def _start(config: Path) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    return start_piped([sys.executable, "-m", "gridstream.cli", "run", str(config)], ROOT)


def _await_batch(process: subprocess.Popen[str], lines: queue.Queue[str],
                 seen: list[str]) -> None:
    """Block until the running pipelines report a batch (so the kill is mid-stream)."""
    await_line(process, lines, seen, lambda line: " batch " in line)


def _crash_restart(bootstrap: str, topic_factory: Callable[..., str], keyspace: str,
                   tmp: Path, *, kills: int, operations: int) -> Workload:
    people, orders = topic_factory(3), topic_factory(2)
    workload = Workload(seed=99)
    ops = workload.run(operations, people=60, orders=30)
    topics = {PERSON.name: people, ORDER: orders}
    txn = f"gs-restart-{uuid.uuid4().hex[:8]}"

    def feed() -> None:
        for start in range(0, len(ops), 40):
            produce(bootstrap, topics, ops[start:start + 40], transactional_id=txn, per_txn=20)
            time.sleep(0.5)

    producer = threading.Thread(target=feed)
    producer.start()
    streaming, final = tmp / "streaming.toml", tmp / "final.toml"
    _write_config(streaming, bootstrap, [people, orders], keyspace, tmp, "1 second")
    _write_config(final, bootstrap, [people, orders], keyspace, tmp, "available_now")
    rng, seen = random.Random(5), []
    for _ in range(kills):
        process, lines = _start(streaming)
        _await_batch(process, lines, seen)
        time.sleep(rng.uniform(0.0, 2.5))
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(60)
    producer.join(600)
    done = subprocess.run([sys.executable, "-m", "gridstream.cli", "run", str(final)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "all pipelines finished" in done.stdout
    return workload


def _check_all(spark: Any, cassandra_session: Any, keyspace: str, tmp: Path,
               workload: Workload) -> None:
    assert check_cassandra(cassandra_session, keyspace, workload) > 0
    assert check_sql(f"sqlite:///{tmp / 'store.db'}", workload) > 0
    assert check_delta(spark, str(tmp / "current"), workload) > 0


@pytest.mark.slow  # a fault run: 45-100 s (make test-slow)
def test_sigkilled_pipelines_recover_from_checkpoints(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], keyspace: str,
        cassandra_session: Any, tmp_path: Path) -> None:
    workload = _crash_restart(kafka_bootstrap, topic_factory, keyspace, tmp_path,
                              kills=2, operations=500)
    _check_all(spark, cassandra_session, keyspace, tmp_path, workload)


@pytest.mark.slow
def test_sigkilled_six_times_mid_stream_recover_from_checkpoints(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], keyspace: str,
        cassandra_session: Any, tmp_path: Path) -> None:
    workload = _crash_restart(kafka_bootstrap, topic_factory, keyspace, tmp_path,
                              kills=6, operations=1600)
    _check_all(spark, cassandra_session, keyspace, tmp_path, workload)
