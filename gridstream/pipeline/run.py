"""Running a pipeline: ``PipelineJob`` (a ``Runnable`` for ``PipelineRunner``) and
``run_jobs`` (blocks, progress lines, Ctrl-C).

The job checks what it can before Spark starts (checkpoint required for
``AT_LEAST_ONCE``/``EXACTLY_ONCE``, the error policy, what real-time mode refuses),
compiles the chain at ``start`` and reports each batch from the query's progress: rows
read, rows written, error rows (observed in the JVM at the sink).
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gridstream.errors import ConfigError, GridstreamError, SparkError
from gridstream.ops.counts import BatchCounts
from gridstream.ops.failures import error_line
from gridstream.pipeline._real_time import (
    NOT_LISTED,
    REAL_TIME_PYTHON_CONF,
    await_sources,
    check_allowlist_off,
    producing_conf,
    real_time_conf,
)
from gridstream.pipeline.api import BatchStep, ItemStep, JvmStep, Pipeline
from gridstream.pipeline.base import Guarantee, RunContext
from gridstream.pipeline.compile import Compiled, compile_chain, plan
from gridstream.pipeline.errors import ERRORS
from gridstream.pipeline.stateful import late_rows
from gridstream.pipeline.streaming import (
    OBSERVED,
    checkpoint_every,
    is_real_time,
    real_time_interval,
    trigger_options,
)
from gridstream.spark.runnable import Runnable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["REAL_TIME_PYTHON_CONF", "PipelineJob", "PipelineReport", "RunOptions", "run_jobs"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOptions:
    """How a pipeline runs (validated: ``RunOptions.of``)."""

    guarantee: Guarantee
    checkpoint: str | None
    trigger: str | None
    errors: str = "fail"
    dead_letter_topic: str | None = None
    checkpoint_interval: str | None = None
    """Real-time mode's interval; None: ``real_time_interval``'s default for the plan."""
    allowed_modules: tuple[str, ...] = ()
    real_time_python: bool = False
    """Run Python passes in real-time mode although Spark's allow-list of real-time
    operators does not list ``MapInArrowExec``: the Spark session must be built with its
    check off (``REAL_TIME_PYTHON_CONF``; ``Pipeline.run`` does so)."""

    @classmethod
    def of(cls, guarantee: Guarantee | str, checkpoint: str | None, trigger: str | None, *,
           errors: str = "fail", dead_letter_topic: str | None = None,
           checkpoint_interval: str | None = None,
           allowed_modules: tuple[str, ...] = (),
           real_time_python: bool = False) -> RunOptions:
        chosen = Guarantee.parse(guarantee)
        if chosen != Guarantee.NONE and not checkpoint:
            raise ConfigError(f"guarantee {chosen}: give a checkpoint directory (the "
                              "offsets and the batch ids live there)")
        if errors not in ERRORS:
            raise ConfigError(f"errors {errors!r}: use one of {', '.join(ERRORS)}")
        if (errors == "dead_letter") != bool(dead_letter_topic):
            raise ConfigError("errors='dead_letter' needs dead_letter_topic (and only it)")
        trigger_options(trigger)  # a bad trigger is a ConfigError now
        if checkpoint_interval is not None:  # and a bad interval, whatever the trigger
            checkpoint_every(checkpoint_interval)
        return cls(chosen, checkpoint, trigger, errors, dead_letter_topic,
                   checkpoint_interval, tuple(allowed_modules), real_time_python)


@dataclass(frozen=True)
class PipelineReport:
    """One batch: rows read, written to the sink, error rows (skipped or
    dead-lettered per the policy)."""

    pipeline: str
    batch_id: int
    rows_in: int
    rows_out: int
    errors: int
    seconds: float
    errors_policy: str = "fail"
    extra: dict[str, Any] = field(default_factory=dict)
    """The sink's own counts (the exactly-once writer: ``written``, ``skipped``)."""
    windowed: bool = False
    """The chain aggregates in windows: what comes out are windows, emitted when the
    watermark passes them, so the rows in and out are not compared (none counts as
    filtered)."""

    def line(self, lag: int | None = None) -> str:
        """``in``, ``out``, what the steps filtered and, under an error policy that goes
        on, the bad rows; then the sink's own counts (``sink: written 3, ...``: the
        exactly-once writer counts dead letters it wrote in the same transaction)."""
        rate = self.rows_in / self.seconds if self.seconds > 0 else 0.0
        counts = self.counts()
        text = f"{self.pipeline}  batch {self.batch_id}: {self.rows_in} in, {self.rows_out} out"
        if self.windowed:
            text += " (windows)"
        if counts.filtered:
            text += f", {counts.filtered} filtered"
        if self.errors_policy == "dead_letter":
            text += f", {self.errors} dead-lettered"
        elif self.errors_policy != "fail" or self.errors:
            text += f", {self.errors} skipped (logged)"
        text += f" in {self.seconds:.2f}s ({rate:,.0f} rec/s)"
        if self.extra:
            text += "; sink: " + ", ".join(f"{k} {v}" for k, v in sorted(self.extra.items()))
        return text if lag is None else f"{text}, lag {lag}"

    def counts(self) -> BatchCounts:
        """Rows neither out nor errors were dropped by the steps (a filter): filtered
        (not counted in a windowed chain: rows in windows do not come out one for one)."""
        bad = self.errors
        return BatchCounts(self.rows_in, self.rows_out,
                           0 if self.windowed else max(0, self.rows_in - self.rows_out - bad),
                           0 if self.errors_policy == "dead_letter" else bad,
                           bad if self.errors_policy == "dead_letter" else 0, self.seconds)


class _Reports:
    """The job's reports: filled from the query's progress whenever they are looked at."""

    def __init__(self, job: PipelineJob) -> None:
        self._job = job
        self._queue: deque[PipelineReport] = deque(maxlen=1000)

    def __len__(self) -> int:
        self._job.poll()
        return len(self._queue)

    def popleft(self) -> PipelineReport:
        return self._queue.popleft()

    def append(self, report: PipelineReport) -> None:
        self._queue.append(report)


class PipelineJob(Runnable):
    """A pipeline ready to start on a Spark session (``PipelineRunner``'s ``Runnable``)."""

    kind = "pipeline"

    def __init__(self, pipeline: Pipeline, options: RunOptions) -> None:
        self.pipeline, self.options = pipeline, options
        self.source, self.steps, self.sink = pipeline.source, pipeline.steps, pipeline.sink
        self.guarantee = options.guarantee.lowered_to(self.sink.cap).lowered_to(
            self.source.cap)
        self.source.check(self.guarantee)
        self.sink.check(self.guarantee)
        self._check_real_time()
        self.reports: _Reports = _Reports(self)
        self.batches: dict[int, dict[str, Any]] = {}
        self._failure: BaseException | None = None
        self._query: StreamingQuery | None = None
        self._compiled: Compiled | None = None
        self._temporary: str | None = None
        self._last_batch = -1
        self._windows = any(isinstance(s, JvmStep) and s.label.startswith("window#")
                            for s in self.steps)

    @property
    def name(self) -> str:
        return self.pipeline.name

    @property
    def query(self) -> StreamingQuery | None:
        return self._query

    def _check_real_time(self) -> None:
        if not is_real_time(self.options.trigger):
            return
        why = f"pipeline {self.name!r}: real-time mode (trigger='real_time') cannot run"
        if self.guarantee == Guarantee.EXACTLY_ONCE:
            raise ConfigError(f"{why} EXACTLY_ONCE (it has no foreachBatch for the "
                              "transactional writer); use AT_LEAST_ONCE")
        if not self.source.stateless_ok:
            raise ConfigError(f"{why} source {self.source.describe()} (Kafka only)")
        stateful = [s.label for s in self.steps if isinstance(s, JvmStep) and s.stateful]
        if stateful:
            raise ConfigError(f"{why} stateful steps ({', '.join(stateful)}): run them with "
                              "a micro-batch trigger")
        if self.sink.foreach_batch:
            raise ConfigError(f"{why} a foreachBatch sink ({self.sink.describe()}): only a "
                              "Kafka sink")
        python = [s.label for s in self.steps if isinstance(s, ItemStep | BatchStep)]
        if python and not self.options.real_time_python:
            raise ConfigError(f"{why} Python steps ({', '.join(python)}) by default: Spark "
                              f"{NOT_LISTED}")

    @property
    def failure(self) -> BaseException | None:
        """The error that failed the query (a task's gridstream error keeps its line)."""
        if self._failure is not None:
            return self._failure
        error = self._query.exception() if self._query is not None else None
        if error is None:
            return None
        return SparkError(f"pipeline {self.name!r} failed: {error_line(str(error))}")

    @failure.setter
    def failure(self, error: BaseException | None) -> None:
        self._failure = error

    def endpoints(self) -> tuple[list[str], list[str]]:
        """The places it reads and writes (the run's topology)."""
        return self.source.nodes(), self.sink.nodes()

    def describe(self) -> str:
        asked = self.options.guarantee
        by = [what for what, cap in (("the sink", self.sink.cap),
                                     (f"the source ({self.source.describe()})",
                                      self.source.cap))
              if asked.lowered_to(cap) != asked]
        guarantee = str(self.guarantee) if asked == self.guarantee else (
            f"{self.guarantee} (asked {asked}, lowered by {' and '.join(by)})")
        runs = self._compiled.where if self._compiled is not None else _static_plan(self)
        checkpoint = self.options.checkpoint or "a temporary checkpoint"
        return (f"pipeline {self.name}: {self.source.describe()} -> {self.sink.describe()}\n"
                f"  [guarantee {guarantee}, checkpoint {checkpoint}, trigger "
                f"{self.options.trigger or 'as fast as possible'}, errors "
                f"{self.options.errors}]\n  runs: " + "; ".join(runs))

    def context(self, checkpoint: str) -> RunContext:
        return RunContext(self.name, self.guarantee, checkpoint, self.options.trigger,
                          self.options.allowed_modules, self.options.errors,  # type: ignore[arg-type]
                          self.options.dead_letter_topic, self._dead_letter_options(),
                          real_time_interval(self.options.checkpoint_interval,
                                             python=bool(self._compiled and
                                                         self._compiled.python_passes)))

    def _dead_letter_options(self) -> dict[str, str]:
        for end in (self.sink, self.source):
            options = getattr(end, "producer_options", None)
            if options is not None:
                return dict(options())
        client = getattr(self.source, "client", None)
        bootstrap = getattr(self.source, "bootstrap", None)
        if client is not None and bootstrap is not None:
            from gridstream.spark.kafka_source import client_options

            return client_options(bootstrap, client.client_config())
        return {}

    def start(self, spark: SparkSession) -> StreamingQuery:
        """Compile the chain and start its query (resuming from the checkpoint)."""
        self._failure = None
        self._query = None
        checkpoint = self.options.checkpoint
        if checkpoint is None:  # a re-plan resumes from the one it had
            checkpoint = self._temporary = self._temporary or tempfile.mkdtemp(
                prefix=f"gs-{self.name}-")
        context = self.context(checkpoint)
        try:
            real_time = is_real_time(self.options.trigger)
            with real_time_conf(spark, real_time, self.options.real_time_python):
                flow = self.source.flow(spark, context)
                self._compiled = compile_chain(flow, self.steps, self.sink, context)
                if real_time and self._compiled.python_passes and \
                        not self.options.real_time_python:
                    raise ConfigError(f"pipeline {self.name!r}: real-time mode cannot run "
                                      "the Python pass its (de)serializers need by "
                                      f"default: Spark {NOT_LISTED}")
                if real_time and self._compiled.python_passes:
                    check_allowlist_off(spark, self.name)
                context = self.context(checkpoint)  # the real-time interval for this plan
                produces = real_time and self._compiled.flow.last_pass is not None and \
                    self.sink.fuses(context)
                with producing_conf(spark, produces):
                    self._query = self.sink.start(self._compiled.flow, context,
                                                  self._on_batch)
                    if real_time:  # the settings stay until the query has read them
                        await_sources(self._query)
        except GridstreamError as exc:
            self._failure = exc
            self._stop_started()
            raise
        except Exception:
            self._stop_started()
            raise
        return self._query

    def _stop_started(self) -> None:
        """A start that failed after its query started stops it (a restart would start a
        second query on the same checkpoint)."""
        query = self._query
        if query is not None and query.isActive:
            with contextlib.suppress(Exception):
                query.stop()

    def replan(self, failure: str) -> bool:
        """After a ``NewSchemaError`` (its text ``failure``): the source's deserializers
        learn the ids it names for the next start's plan; False when they knew them all
        (a re-plan would fail the same)."""
        from gridstream.pipeline.serde._avro_jvm import learned_ids

        new = False
        for side in ("key", "value"):
            learn = getattr(getattr(self.source, f"{side}_de", None), "learn", None)
            if learn is not None and learn(learned_ids(failure, side)):
                new = True
        return new

    @property
    def restartable(self) -> bool:
        """Whether a restart resumes it: only from a checkpoint of its own (a temporary
        one is kept only until ``close``: the runner's restarts do not count on it; a
        re-plan after ``NewSchemaError`` resumes from it)."""
        return self.options.checkpoint is not None

    def _on_batch(self, batch_id: int, counts: dict[str, Any]) -> None:
        self.batches[batch_id] = dict(counts)
        while len(self.batches) > 1000:
            del self.batches[min(self.batches)]

    def poll(self) -> None:
        """Turn the query's new progress into reports (and, under ``NONE`` with group
        commits, commit each finished batch's offsets for the group)."""
        if self._query is None:
            return
        for progress in self._query.recentProgress:
            batch = int(progress.get("batchId", -1))
            if batch <= self._last_batch:
                continue
            data = json.loads(progress.json)
            rows_in = int(data.get("numInputRows") or 0)
            extra = dict(self.batches.get(batch, {}))
            # a sink that runs the last pass in its own tasks counts its rows there
            counted = extra.pop(OBSERVED, None)
            # (not an idle trigger's progress, which carries the id of the batch after it)
            metrics = (data.get("observedMetrics") or {}).get(OBSERVED) or (
                counted if rows_in else None) or {}
            if rows_in == 0 and not metrics:
                continue  # an idle trigger's progress carries the id the next batch runs as
            self._last_batch = batch
            errors = int(metrics.get("errors") or 0)
            rows = int(metrics.get("rows") or 0)
            seconds = float((data.get("durationMs") or {}).get("triggerExecution", 0)) / 1000
            if self._windows:
                extra["late"] = late_rows(data)  # dropped by the watermark: never silent
            self.reports.append(PipelineReport(
                self.name, batch, rows_in, rows - errors, errors, seconds,
                self.options.errors, extra, windowed=bool(self._windows)))
            self._commit_group(data)

    def _commit_group(self, progress: dict[str, Any]) -> None:
        if self.guarantee != Guarantee.NONE or not getattr(self.source, "group_commit", False):
            return
        from gridstream.pipeline.groups import commit_offsets

        for source in progress.get("sources", []):
            end = source.get("endOffset")
            end = json.loads(end) if isinstance(end, str) else end
            if isinstance(end, dict):
                commit_offsets(self.source, end)  # type: ignore[arg-type]

    def close(self) -> None:
        """Stop the query if it runs, close the source and the sink, remove a
        temporary checkpoint."""
        try:
            if self._query is not None and self._query.isActive:
                self._query.stop()
        finally:
            self.sink.close()
            self.source.close()
            if self._temporary is not None:
                shutil.rmtree(self._temporary, ignore_errors=True)
                self._temporary = None


def _static_plan(job: PipelineJob) -> list[str]:
    """What runs where, before the source has decided where it decodes."""
    runs = ["jvm: source"]
    for group in plan(job.steps):
        first = group[0]
        if isinstance(first, ItemStep):
            runs.append("python pass: " + ", ".join(s.label for s in group))
        elif isinstance(first, BatchStep):
            runs.append(f"python pass: {first.label}")
        else:
            runs.append(f"jvm: {first.label}")
    return runs


def run_jobs(jobs: Sequence[Any], spark_factory: Callable[[], SparkSession] | None = None,
             ) -> None:
    """Run jobs until Ctrl-C or until they finish; the error that failed one is raised."""
    from gridstream.spark.runner import PipelineRunner
    from gridstream.spark.session import get_spark

    conf = dict(REAL_TIME_PYTHON_CONF) if any(
        getattr(getattr(j, "options", None), "real_time_python", False) for j in jobs) else {}
    runner = PipelineRunner(jobs, spark_factory or (lambda: get_spark(conf=conf)))
    if runner.run() != 0:
        failed = [j.failure for j in jobs if j.failure is not None]
        if failed and isinstance(failed[0], GridstreamError):
            raise failed[0]
        raise SparkError("a pipeline failed (see above)")
