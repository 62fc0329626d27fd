"""What every sink does the same way when it starts its query: checkpoint, trigger,
query name, the batch counts (observed in the JVM) and the error policy's routing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gridstream.errors import ConfigError
from gridstream.spark.triggers import parse_trigger

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    from gridstream.pipeline.base import RunContext

__all__ = ["ARROW_ROWS_CONF", "CHECKPOINT_INTERVAL", "MIN_BATCH_CONF", "OBSERVED",
           "PYTHON_CHECKPOINT_INTERVAL", "REAL_TIME",
           "REAL_TIME_ARROW_ROWS", "REAL_TIME_PYTHON_BUFFER", "SPARK_ARROW_ROWS",
           "configure", "good_rows", "observed", "real_time_interval", "trigger_options"]

REAL_TIME = "real_time"
OBSERVED = "gs_pipeline"
"""The name of the observed metrics (``rows``, ``errors``) of the rows reaching the sink."""


CHECKPOINT_INTERVAL = "5 seconds"
"""Real-time mode's batch (and checkpoint) interval when none is given and no Python
pass runs: Spark's own minimum."""
PYTHON_CHECKPOINT_INTERVAL = "200 milliseconds"
"""The same with a Python pass. Spark's Python runner hands the pass's output on only
when its socket stops taking input or the input ends, which in real-time mode is the end
of the batch: a record waits up to a batch's cycle, its length and its turnaround
(``docs/pipeline-api.md``). A Kafka sink that produces from the pass (``Sink.fuses``)
sends each Arrow batch as it comes (``REAL_TIME_ARROW_ROWS``), and a batch that does not
fill goes at the batch's end: short batches bound that wait at low rates, and at
10 000 records/s gave the lowest p99 too (296 ms, against 303 ms with 1 s batches,
436 ms with 5 s and 304 ms with 10 s: the records that arrive during a turnaround wait
for the next batch's tasks, and a short batch's turnaround is short). Not shorter:
Spark sets a real-time batch's end when the driver plans it, before its tasks are
scheduled, so the tasks read only for what is left of it. Measured at 10 000 records/s
on two cores: the tasks' readers started with a median of −4 to 24 ms left of a 100 ms
batch over a run's first 40 s (100 ms batches fell 13–29 s behind), and with 115–158 ms
left of a 200 ms one (``docs/benchmarks.md``)."""
REAL_TIME_ARROW_ROWS = 100
"""A real-time Python pass's Arrow batches: Spark hands the pass a batch once it holds
this many rows or its input ends (``ARROW_ROWS_CONF``; the session's own number when it
set one). A sink that produces from the pass (``Sink.fuses``) sends each batch as it
comes: at 5 000 records/s a partition a record waits ~20 ms for its batch to fill; a
slower partition's batch goes at the real-time batch's end."""
ARROW_ROWS_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"
SPARK_ARROW_ROWS = "10000"
"""Spark's own default of ``ARROW_ROWS_CONF``."""
REAL_TIME_PYTHON_BUFFER = 1024
"""Bytes Spark buffers towards a Python worker (``spark.buffer.size``, 64 KiB by
default, read when the session starts) in sessions built for real-time Python passes:
with Spark's default a batch of input reaches the pass only once 64 KiB have come."""
MIN_CHECKPOINT_INTERVAL_MS = 100
"""Real-time mode writes its checkpoint at most this often."""
MIN_BATCH_CONF = "spark.sql.streaming.realTimeMode.minBatchDuration"
"""Spark's own floor of the real-time interval (5 s by default), lowered while a
real-time query starts (``gridstream.pipeline.run``) so ours applies."""


def real_time_interval(given: str | None, *, python: bool) -> str:
    """The interval a real-time query runs with: the one given, else the default for
    its plan."""
    if given is not None:
        return given
    return PYTHON_CHECKPOINT_INTERVAL if python else CHECKPOINT_INTERVAL


def trigger_options(trigger: str | None, checkpoint_interval: str = CHECKPOINT_INTERVAL,
                    ) -> dict[str, Any]:
    """``DataStreamWriter.trigger`` keywords: ``{}`` (as fast as possible), processing
    time, ``availableNow``, or ``realTime`` (the interval is a real-time batch's length:
    how often the checkpoint is written and, with a Python pass, how long its output
    waits at most)."""
    if trigger is None:
        return {}
    if trigger.strip().lower().replace("-", "_") == REAL_TIME:
        return {"realTime": checkpoint_every(checkpoint_interval)}
    return parse_trigger_or_raise(trigger)


def checkpoint_every(interval: str) -> str:
    """``checkpoint_interval`` checked (a duration of at least 100 milliseconds) →
    Spark's interval text (``"10000 milliseconds"``); ``ConfigError`` otherwise."""
    try:
        parsed = parse_trigger(interval).get("processingTime")
    except ValueError:
        parsed = None
    if not isinstance(parsed, str):
        raise ConfigError(f"checkpoint_interval {interval!r}: use a duration such as "
                          "'5 seconds' or '250 milliseconds'")
    if int(parsed.split()[0]) < MIN_CHECKPOINT_INTERVAL_MS:
        raise ConfigError(f"checkpoint_interval {interval!r}: at least "
                          f"{MIN_CHECKPOINT_INTERVAL_MS} milliseconds")
    return parsed


def parse_trigger_or_raise(text: str) -> dict[str, Any]:
    try:
        return parse_trigger(text)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def is_real_time(trigger: str | None) -> bool:
    return trigger is not None and trigger.strip().lower().replace("-", "_") == REAL_TIME


def configure(writer: DataStreamWriter, context: RunContext) -> DataStreamWriter:
    """Checkpoint, trigger (real-time: ``context.checkpoint_interval``), query name (the
    pipeline's), output mode."""
    writer = (writer.option("checkpointLocation", context.checkpoint)
              .queryName(context.name))
    if is_real_time(context.trigger):
        writer = writer.outputMode("update")
    options = trigger_options(context.trigger, context.checkpoint_interval)
    return writer.trigger(**options) if options else writer


def observed(df: DataFrame) -> DataFrame:
    """``df`` counting its rows and error rows (``OBSERVED`` in the query's progress)."""
    import pyspark.sql.functions as F

    return df.observe(OBSERVED, F.count(F.lit(1)).alias("rows"),
                      F.count(F.col("_gs_error")).alias("errors"))


def good_rows(df: DataFrame, context: RunContext) -> DataFrame:
    """Under ``fail``: a row that reached the sink with an error fails the query (in the
    JVM: a JVM decode's error); under ``log``: error rows left out (counted); under
    ``dead_letter``: unchanged (the sink routes them)."""
    import pyspark.sql.functions as F

    if context.errors == "fail":
        failed = F.concat(F.lit("RecordError: "), F.col("_gs_where"), F.lit(": "),
                          F.coalesce(F.col("_gs_stage"), F.lit("decode")), F.lit(": "),
                          F.col("_gs_error"))
        return df.where(F.when(F.col("_gs_error").isNull(), F.lit(True))
                        .otherwise(F.raise_error(failed).cast("boolean")))
    if context.errors == "log":
        return df.where(F.col("_gs_error").isNull())
    return df
