"""The pipeline API's examples run against the local stack and print what they say.

All four run in one child process, one after the other, each as ``python SCRIPT`` would
run it (``support/examples_child.py``): one Spark driver JVM for the four instead of one
each (half a minute or more of every default suite run)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.support.examples_child import sections

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ("pipeline_print.py", "pipeline_logs.py", "pipeline_kafka_to_hazelcast.py",
            "pipeline_window.py")


TIMEOUT_S = 720  # the four take about a minute; pytest's own limit is 900 s a test


def _text(stream: str | bytes | None) -> str:
    return stream.decode(errors="replace") if isinstance(stream, bytes) else stream or ""


@pytest.fixture(scope="module")
def outputs(kafka_service: Any, hazelcast_service: Any) -> dict[str, tuple[int, str]]:
    """Each example's exit status and output; the child's stderr under ``"stderr"``."""
    # unbuffered: what a hung example printed is there when the child is killed
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tests.integration.support.examples_child",
             *(str(ROOT / "examples" / script) for script in EXAMPLES)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
            check=False)
        stdout, stderr, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:  # what ended is still shown, and what hung
        stdout, stderr, code = _text(exc.stdout), _text(exc.stderr), None
    found = sections(stdout)
    missing = (f"did not end within {TIMEOUT_S} s" if code is None else
               f"did not end: the child exited {code} before it")
    for script in EXAMPLES:
        found.setdefault(script, (-1, f"{missing}:\n{stdout[-3000:]}"))
    if code is not None and all(c >= 0 for c, _ in found.values()):
        # the child's own status as its examples' (0 unless one failed): nothing failed
        # after the last one ended
        assert code == int(any(c for c, _ in found.values())), (code, stderr[-3000:])
    found["stderr"] = (code if code is not None else -1, stderr)
    return found


def _run(script: str, outputs: dict[str, tuple[int, str]]) -> str:
    code, out = outputs[script]
    assert code == 0, out[-3000:] + "\n" + outputs["stderr"][1][-3000:]
    return out


def test_pipeline_print_prints_each_record(outputs: dict[str, tuple[int, str]]) -> None:
    out = _run("pipeline_print.py", outputs)
    for i in range(10):
        assert f"('key-{i}', 'value-{i}')" in out, out


def test_pipeline_logs_writes_the_entries_exactly_once(
        outputs: dict[str, tuple[int, str]]) -> None:
    out = _run("pipeline_logs.py", outputs)
    lines = [line for line in out.splitlines() if ": " in line and not line.startswith(
        ("pipeline", "starting", "  "))]
    assert sorted(lines[-3:]) == ["api: ERROR: upstream timeout", "api: INFO: started",
                                  "db: WARN: slow query 1.2s"], out


def test_pipeline_kafka_to_hazelcast_fills_the_map_as_expected(
        outputs: dict[str, tuple[int, str]]) -> None:
    out = _run("pipeline_kafka_to_hazelcast.py", outputs)
    last = out.strip().splitlines()[-1]
    assert last.startswith("map 'orders-") and last.endswith(" 0 differ"), out
    assert "EXACTLY_ONCE" in out, out


def test_pipeline_window_writes_every_window_once_and_counts_the_late_record(
        kafka_bootstrap: str, outputs: dict[str, tuple[int, str]]) -> None:
    out = _run("pipeline_window.py", outputs)
    assert "18 windows (18 expected)" in out, out
    # its records are of 2023: its topics keep them (the broker's 7-day retention
    # deleted them at a retention check while the query read: 0 windows, now and then)
    from confluent_kafka.admin import AdminClient, ConfigResource

    source = re.search(r"kafka (example-req-[0-9a-f]{8})", out)
    assert source is not None, out
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, source.group(1))
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["retention.ms"].value == "-1"
    # svc-0's first window: requests 0, 3, ..., 39 (bytes 100 + i)
    assert "svc-0: 22:13:20-22:13:30 14 requests, 1673 bytes, largest 139" in out, out
    assert "late 1" in out, out
