"""The pipeline API's examples run against the local stack and print what they say."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(ROOT / "examples" / script)], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_pipeline_print_prints_each_record(kafka_service: Any) -> None:
    out = _run("pipeline_print.py")
    for i in range(10):
        assert f"('key-{i}', 'value-{i}')" in out, out


def test_pipeline_logs_writes_the_entries_exactly_once(kafka_service: Any) -> None:
    out = _run("pipeline_logs.py")
    lines = [line for line in out.splitlines() if ": " in line and not line.startswith(
        ("pipeline", "starting", "  "))]
    assert sorted(lines[-3:]) == ["api: ERROR: upstream timeout", "api: INFO: started",
                                  "db: WARN: slow query 1.2s"], out
