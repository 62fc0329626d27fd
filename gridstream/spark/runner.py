"""Running store feeds, API pipelines and connectors until stopped: one line per
batch, a heartbeat while idle, each flow failing alone, clean Ctrl-C.

SIGINT and SIGTERM stop every query (a batch in flight is abandoned before its offsets
are committed, and runs again on the next start) and then the Spark session. A flow
whose query fails is reported in one line (the whole trace goes to the run's log file,
``gridstream.ops.failures``); the other flows go on. A failure that may pass by itself
(``is_transient``: a service unreachable, a store refusing) is retried from the
checkpoint after a bounded exponential backoff (``RestartPolicy``), re-running the
failed batch idempotently; a permanent one (a record the flow cannot take, a lost
position) leaves the flow failed. The run ends when every flow has finished or failed,
with exit code 1 when one failed. The signal handlers only raise a ``StopFlag`` (no
lock taken inside a handler), which the supervising loop waits on.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from gridstream._stopping import StopFlag, stop_on_signals
from gridstream.ops.failures import Failure, LogFile, describe
from gridstream.ops.status import Monitor, lag_by_source
from gridstream.spark.runnable import Runnable
from gridstream.spark.session import spark_running

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["PipelineRunner", "RestartPolicy"]

log = logging.getLogger(__name__)


MAX_REPLANS = 20
"""Re-plans of a flow (a schema id its plan lacked) in a row without a batch: the next
such failure fails it (bytes that carry ever new ids are not Avro of the topic's)."""


class RestartPolicy:
    """How often a flow whose failure is transient is started again: after ``delay_s``,
    doubling at each attempt up to ``max_delay_s``, at most ``max_restarts`` times in a
    row (a completed batch, or a trigger of the restarted query, starts the count
    again)."""

    def __init__(self, max_restarts: int = 0, delay_s: float = 10.0,
                 max_delay_s: float = 60.0, wait_s: float = 300.0) -> None:
        self.max_restarts = max_restarts
        self.delay_s = delay_s
        self.max_delay_s = max(max_delay_s, delay_s)
        self.wait_s = wait_s
        """How long a flow waits for an input that is not there yet (a topic another
        flow creates), checking every ``min(delay_s, 5)`` seconds; no restart is
        counted for it."""

    def delay(self, attempt: int) -> float:
        """The wait before restart number ``attempt`` (1, 2, ...)."""
        return float(min(self.delay_s * 2 ** max(attempt - 1, 0), self.max_delay_s))


@dataclass
class _Flow:
    pipeline: Runnable
    query: StreamingQuery | None = None
    state: str = "starting"
    attempts: int = 0
    replans: int = 0
    """Re-plans since its last batch (``MAX_REPLANS``)."""
    restart_at: float | None = None
    last_said: float = 0.0
    started_at: float = 0.0
    waiting_since: float | None = None

    @property
    def done(self) -> bool:
        return self.state in ("failed", "finished")


class PipelineRunner:
    """Starts flows on one Spark session and supervises them."""

    def __init__(self, pipelines: Sequence[Runnable],
                 spark_factory: Callable[[], SparkSession], *, out: TextIO | None = None,
                 poll_s: float = 1.0, restarts: dict[str, RestartPolicy] | None = None,
                 monitor: Monitor | None = None, log: LogFile | None = None,
                 heartbeat_s: float = 60.0,
                 preflight: Callable[[Runnable], None] | None = None) -> None:
        self.pipelines = list(pipelines)
        self.spark_factory = spark_factory
        self.out = out or sys.stdout
        self.poll_s = poll_s
        self.restarts = restarts or {}
        self.monitor = monitor or Monitor()
        self.log = log
        self.heartbeat_s = heartbeat_s
        self.preflight = preflight
        """Checks before each start of a flow (``gridstream.ops.preflight``); what it
        raises fails the flow as its query's failure would."""
        self._stop = StopFlag()
        self._stop_reason = "Ctrl-C"
        self._flows = {p.name: _Flow(p) for p in self.pipelines}
        for p in self.pipelines:
            self.monitor.add(p.name, p.kind, p.describe(), p.endpoints())

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def stop(self, reason: str | None = None) -> None:
        """Ask ``run`` to stop (thread-safe, takes no lock: what the signal handlers
        call, without a ``reason``; the closing line says it, default "Ctrl-C")."""
        if reason is not None:
            self._stop_reason = reason
        self._stop.set()

    def run(self) -> int:
        """Run until stopped or until every flow has finished or failed: 1 when a flow
        failed, else 0. The Spark session is stopped at the end only if the runner
        started it: a session that was running before (an application's, a notebook's)
        is left running."""
        owned = not spark_running()
        spark = self.spark_factory()
        # installed after the SparkContext, which installs its own SIGINT handler
        with stop_on_signals(self.stop):
            try:
                for flow in self._flows.values():
                    if self._stop.is_set():
                        break
                    self.say(f"starting {flow.pipeline.describe()}")
                    self._start(spark, flow)
                return self._supervise(spark)
            finally:
                self._shutdown(spark, owned)

    def _supervise(self, spark: SparkSession) -> int:
        while not self._stop.is_set():
            try:
                self._pass(spark)
            except Exception:
                if self._stop.is_set():  # the signal stopped the JVM under this pass
                    break
                raise
            if all(f.done for f in self._flows.values()):
                self._report()
                failed = [n for n, f in self._flows.items() if f.state == "failed"]
                self.say(f"failed: {', '.join(failed)}" if failed else "all pipelines finished")
                return 1 if failed else 0
            self._stop.wait(self.poll_s)
        _quietly("the last reports", self._report)  # the JVM may be stopping by the signal
        self.say(f"stopping ({self._stop_reason}): in-flight batches are not committed and "
                 "will re-run")
        return 1 if any(f.state == "failed" for f in self._flows.values()) else 0

    def _pass(self, spark: SparkSession) -> None:
        """One look at every flow: reports, then failures and due restarts. Nothing is
        judged once a stop was asked (a signal to the process group stops Spark's JVM
        too, and its queries then end in errors that are no failure of theirs)."""
        self._report()
        now = time.monotonic()
        for flow in self._flows.values():
            if self._stop.is_set():
                return
            query = flow.query
            if flow.state in ("restarting", "waiting", "replanning"):
                if flow.restart_at is not None and now >= flow.restart_at:
                    if flow.state == "restarting":
                        self.monitor.restarted(flow.pipeline.name)
                    self._start(spark, flow)
            elif query is not None and not flow.done and not query.isActive:
                error = query.exception()
                if self._stop.is_set():
                    return
                if error is None:
                    flow.state = "finished"
                    self.monitor.state(flow.pipeline.name, "finished")
                else:
                    self._failed(flow, flow.pipeline.failure, str(error))

    def _start(self, spark: SparkSession, flow: _Flow) -> None:
        flow.restart_at = None
        flow.started_at = time.monotonic()
        if flow.waiting_since is None:
            flow.last_said = flow.started_at
        try:
            if self.preflight is not None:
                self.preflight(flow.pipeline)
            flow.query = flow.pipeline.start(spark)
        except Exception as exc:  # noqa: BLE001 - one flow's start fails it alone
            flow.query = None
            self._failed(flow, exc, "")
            return
        flow.state, flow.waiting_since = "running", None
        self.monitor.state(flow.pipeline.name, "running")

    def _wait(self, flow: _Flow, failure: Failure) -> bool:
        """An input not there yet: check again soon, for at most the policy's
        ``wait_s`` (no restart counted, no trace logged); False when the wait is over."""
        policy = self.restarts.get(flow.pipeline.name)
        now = time.monotonic()
        first = flow.waiting_since is None
        since = flow.waiting_since = flow.waiting_since or now
        endless = bool(getattr(failure.error, "created_here", False))
        if policy is None or not endless and now - since >= policy.wait_s:
            return False
        delay = min(policy.delay_s, 5.0)
        flow.state, flow.restart_at = "waiting", now + delay
        if first or now - flow.last_said >= 30:  # a line at first, then every 30 s
            flow.last_said = now
            limit = "" if endless else f" of {policy.wait_s:g}s"
            self.say(f"{flow.pipeline.name}: {failure.line}; checking every {delay:g}s "
                     f"(waited {now - since:.0f}s{limit})")
        self.monitor.state(flow.pipeline.name, "waiting", failure.line, time.time() + delay)
        return True

    def _failed(self, flow: _Flow, error: BaseException | None, java: str) -> None:
        name = flow.pipeline.name
        failure = Failure(name, error, java)
        if failure.waiting and self._wait(flow, failure):
            return
        if (failure.replan and flow.replans < MAX_REPLANS
                and flow.pipeline.replan(f"{error}\n{java}")):
            flow.replans += 1
            flow.state, flow.restart_at = "replanning", time.monotonic()  # not a restart
            self.say(f"{name}: {failure.line}; re-planning from the checkpoint")
            self.monitor.state(name, "restarting", failure.line, time.time())
            return
        if failure.replan and flow.replans >= MAX_REPLANS:
            self.say(f"{name}: re-planned {flow.replans} times without a batch between: "
                     "giving up")
        where = ""
        if self.log is not None:
            self.log.failure(failure)
            where = f" (traces: {self.log.path})"
        policy = self.restarts.get(name)
        restartable = flow.pipeline.restartable
        if (failure.transient and not failure.waiting and restartable and policy is not None
                and flow.attempts < policy.max_restarts):
            flow.attempts += 1
            delay = policy.delay(flow.attempts)
            flow.state, flow.restart_at = "restarting", time.monotonic() + delay
            self.say(f"{name}: failed: {failure.line}; restart {flow.attempts}/"
                     f"{policy.max_restarts} from the checkpoint in {delay:g}s{where}")
            self.monitor.state(name, "restarting", failure.line, time.time() + delay)
            return
        flow.state = "failed"
        hint = failure.hint()
        if failure.waiting:
            hint = f"gave up waiting after {policy.wait_s if policy else 0:g}s"
        elif failure.transient and not restartable:
            hint = "not restarted: it has no checkpoint to resume from"
        gave_up = (f" (gave up after {flow.attempts} restarts)"
                   if flow.attempts and failure.transient and not failure.waiting else "")
        self.say(f"{name}: FAILED{gave_up}: {failure.line}{'; ' + hint if hint else ''}"
                 f"{where}")
        self.monitor.state(name, "failed", failure.line)

    def _report(self) -> None:
        now = time.monotonic()
        for name, flow in self._flows.items():
            pipeline, query = flow.pipeline, flow.query
            progress = query.lastProgress if query is not None else None
            lags = lag_by_source(progress)
            if query is not None and flow.state == "running":
                lags.update(pipeline.lags(progress))  # a grid source's, not in progress
            lag = sum(lags.values()) if lags else None
            if query is not None:
                pipeline.progressed(progress)
            batches = 0
            while pipeline.reports:
                report = pipeline.reports.popleft()
                self.say(report.line(lag))
                self.monitor.batch(name, report.counts())
                batches += 1
            if query is not None:
                self.monitor.progress(name, progress, lags)
            if batches or (flow.attempts and progress is not None):
                flow.attempts = 0  # it got through a trigger: the next failure counts from 1
            if batches:
                flow.replans = 0
                flow.last_said = now
                if flow.state == "running":
                    self.monitor.state(name, "running")
            elif flow.state == "running" and now - flow.last_said >= self.heartbeat_s:
                flow.last_said = now
                self.say(self._heartbeat(name, lag, now - flow.started_at))
                self.monitor.state(name, "idle")

    def _heartbeat(self, name: str, lag: int | None, running_s: float) -> str:
        flow = self.monitor.flow(name)
        quiet = time.time() - flow.last_batch_at if flow.last_batch_at else running_s
        last = (time.strftime("%H:%M:%S", time.localtime(flow.last_batch_at))
                if flow.last_batch_at else "none yet")
        text = (f"{name}  idle: no batch for {quiet:.0f}s; {flow.batches} batches, "
                f"{flow.read} records read so far, last batch {last}")
        return text if lag is None else f"{text}, lag {lag}"

    def _shutdown(self, spark: SparkSession, owned: bool) -> None:
        """Stop every query, close every flow, stop the session if ours. A SIGTERM to
        the whole process group (``systemctl stop``, ``kill -- -PGID``) reaches Spark's
        JVM too, which stops the SparkContext at the same time: what then fails to stop
        is said in one line each (it was stopping anyway), not as a trace."""
        if owned:
            _quiet_accumulator_server()
        for flow in self._flows.values():
            stop = getattr(flow.query, "stop", None)  # a library user's query may lack it
            if callable(stop):
                _quietly(f"{flow.pipeline.name}: stopping its query", stop)
            if not flow.done:
                flow.state = "stopped"
                self.monitor.state(flow.pipeline.name, "stopped")
        for pipeline in self.pipelines:
            _quietly(f"{pipeline.name}: closing", pipeline.close)
        if owned:
            _quietly("stopping Spark", spark.stop)


def _quietly(what: str, action: Callable[[], object]) -> None:
    try:
        action()
    except Exception as exc:  # noqa: BLE001 - at shutdown, one line and go on
        try:
            reason = describe(exc, "").splitlines()[0][:300]
        except Exception:  # noqa: BLE001 - str() of a Py4J error asks the JVM, maybe gone
            reason = type(exc).__name__
        log.warning("%s: %s", what, reason)


def _quiet_accumulator_server() -> None:
    """PySpark's accumulator server prints a trace to stderr when the JVM's connection
    ends under it (the JVM stopped by the same signal): at shutdown, that is no news."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return
    context = SparkContext._active_spark_context
    server = getattr(context, "_accumulatorServer", None)
    if server is not None:
        server.handle_error = lambda request, address: None


