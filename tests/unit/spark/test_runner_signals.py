"""``gridstream run``'s runner stops cleanly on SIGTERM / SIGINT, and its signal handler
takes no lock (a handler interrupting the supervising loop inside a lock it then needs
would deadlock). Fakes stand in for Spark: only the supervision is under test."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from gridstream.spark.runnable import Runnable
from gridstream.spark.runner import PipelineRunner
from tests.unit.test_stopping import lock_calls

ROOT = Path(__file__).resolve().parents[3]


class FakeQuery:
    isActive = True
    lastProgress = None

    def exception(self) -> None:
        return None

    def stop(self) -> None:
        self.isActive = False


class FakeSink:
    def close(self) -> None:
        print("sink closed", flush=True)


class FakePipeline(Runnable):
    kind = "fake"
    name = "fake"

    def __init__(self) -> None:
        self.reports: deque[Any] = deque()
        self.failure = None
        self.sink = FakeSink()
        self.locks: list[str] | None = None

    def describe(self) -> str:
        return "fake pipeline"

    def start(self, spark: Any) -> FakeQuery:
        print("started", flush=True)
        return FakeQuery()

    def close(self) -> None:
        self.sink.close()


class FakeSpark:
    def stop(self) -> None:
        print("spark stopped", flush=True)


class SignalledPipeline(FakePipeline):
    """Invokes the runner's SIGTERM handler as a signal would, while the runner runs."""

    def start(self, spark: Any) -> FakeQuery:
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler)
        self.locks = lock_calls(lambda: handler(signal.SIGTERM, None))
        return FakeQuery()


def test_the_runners_signal_handler_takes_no_lock() -> None:
    pipeline = SignalledPipeline()
    runner = PipelineRunner([pipeline], FakeSpark, out=io.StringIO(),  # type: ignore[list-item, arg-type]
                            poll_s=0.05)
    previous = signal.getsignal(signal.SIGTERM)
    assert runner.run() == 0  # the handler stopped it
    assert pipeline.locks == []
    assert signal.getsignal(signal.SIGTERM) is previous


SCRIPT = textwrap.dedent("""
    import sys
    from tests.unit.spark.test_runner_signals import FakePipeline, FakeSpark
    from gridstream.spark.runner import PipelineRunner

    sys.exit(PipelineRunner([FakePipeline()], FakeSpark, poll_s=30.0).run())
""")


@pytest.mark.parametrize("blocked", [False, True], ids=["", "blocked-by-parent"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_running_runner_stops_cleanly_on_a_signal(sig: signal.Signals,
                                                    blocked: bool) -> None:
    """The loop waits 30 s between polls: only the signal can end it within the timeout.
    A child inherits its parent's signal mask: started with the stop signals blocked,
    it still stops on them (it did not, and slept through its 30 s)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGINT]
                                  if blocked else [])
    try:
        child = subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    try:
        assert child.stdout is not None
        lines = []
        for line in child.stdout:
            lines.append(line)
            if line.strip() == "started":
                break
        child.send_signal(sig)
        try:
            out, err = child.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the child did not stop: {_where(child.pid)}")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    output = "".join(lines) + out
    assert child.returncode == 0, (output, err)
    assert "stopping (Ctrl-C)" in output
    assert "sink closed" in output and "spark stopped" in output
    assert "Traceback" not in err


def _where(pid: int) -> str:
    """What a child that does not stop is doing: its signal state and its stacks."""
    status = Path(f"/proc/{pid}/status").read_text()
    signals = [line for line in status.splitlines() if line.startswith(("State", "Sig", "Shd"))]
    threads = sorted(p.name for p in Path(f"/proc/{pid}/task").iterdir())
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        return f"{signals}, threads {threads} (no py-spy for its stacks)"
    dump = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True,
                          timeout=30)
    return f"{signals}, threads {threads}\n{dump.stdout}{dump.stderr}"


class FinishedQuery(FakeQuery):
    isActive = False


class FinishingPipeline(FakePipeline):
    def start(self, spark: Any) -> FakeQuery:
        return FinishedQuery()


class CountingSpark:
    stops = 0

    def stop(self) -> None:
        CountingSpark.stops += 1


@pytest.mark.parametrize("running_before", [False, True])
def test_the_runner_stops_only_a_spark_session_it_started(
        monkeypatch: pytest.MonkeyPatch, running_before: bool) -> None:
    """A session running before the runner (an application's, another test's: the
    demo's runner stopped the test suite's shared session) is left running."""
    from pyspark import SparkContext

    monkeypatch.setattr(SparkContext, "_active_spark_context",
                        object() if running_before else None)
    CountingSpark.stops = 0
    runner = PipelineRunner([FinishingPipeline()], CountingSpark, out=io.StringIO(),  # type: ignore[list-item, arg-type]
                            poll_s=0.01)
    assert runner.run() == 0
    assert CountingSpark.stops == (0 if running_before else 1)
