"""Run files in tests: a Python value as TOML text; ``gridstream run`` started as a
child process, its status read, awaited and stopped."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson

from tests.integration.support.child_output import await_line, start_piped

ROOT = Path(__file__).resolve().parents[3]
GRIDSTREAM = [sys.executable, "-m", "gridstream.cli"]


def toml_value(value: Any) -> str:
    """``value`` (a dict, a list, a string, a number, a bool) as a TOML value."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}"
                                for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value)


def start_run(path: Path) -> tuple[subprocess.Popen[str], Any, list[str], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the workers import the steps' module
    process, lines = start_piped([*GRIDSTREAM, "run", str(path)], ROOT, env)
    seen: list[str] = []
    await_line(process, lines, seen, lambda line: line.startswith("status: http://"))
    url = re.search(r"status: (http://[\d.:]+)/", seen[-1])
    assert url is not None, seen
    return process, lines, seen, url.group(1)


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 - loopback http
        body: bytes = answer.read()
        return body


def status(url: str) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in orjson.loads(get(url + "/status"))["flows"]}


def await_flows(url: str, done: Any, process: subprocess.Popen[str], seen: list[str],
           lines: Any, timeout: float = 240, may_fail: tuple[str, ...] = ()
           ) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        while not lines.empty():
            seen.append(lines.get())
        assert process.poll() is None, "".join(seen[-40:])
        flows = status(url)
        if done(flows):
            return flows
        failed = {n: f["error"] for n, f in flows.items()
                  if f["state"] == "failed" and n not in may_fail}
        assert not failed, (failed, "".join(seen[-40:]))
        time.sleep(0.5)
    raise AssertionError(f"not reached in {timeout}s: {status(url)}\n" + "".join(seen[-40:]))


def stop_run(process: subprocess.Popen[str], lines: Any, seen: list[str]) -> int:
    os.killpg(process.pid, signal.SIGTERM)
    code = process.wait(timeout=120)
    time.sleep(0.2)
    while not lines.empty():
        seen.append(lines.get())
    return code
