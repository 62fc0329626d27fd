"""What every sink does the same way when it starts its query: checkpoint, trigger,
query name, the batch counts (observed in the JVM) and the error policy's routing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gridstream.errors import ConfigError
from gridstream.spark.config import parse_trigger

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    from gridstream.pipeline.base import RunContext

__all__ = ["OBSERVED", "REAL_TIME", "configure", "good_rows", "observed", "trigger_options"]

REAL_TIME = "real_time"
OBSERVED = "gs_pipeline"
"""The name of the observed metrics (``rows``, ``errors``) of the rows reaching the sink."""


MIN_CHECKPOINT_INTERVAL_MS = 5000
"""Real-time mode writes its checkpoint at most this often."""


def trigger_options(trigger: str | None, checkpoint_interval: str = "5 seconds",
                    ) -> dict[str, Any]:
    """``DataStreamWriter.trigger`` keywords: ``{}`` (as fast as possible), processing
    time, ``availableNow``, or ``realTime`` (the interval only sets how often the
    checkpoint is written)."""
    if trigger is None:
        return {}
    if trigger.strip().lower().replace("-", "_") == REAL_TIME:
        return {"realTime": checkpoint_every(checkpoint_interval)}
    return parse_trigger_or_raise(trigger)


def checkpoint_every(interval: str) -> str:
    """``checkpoint_interval`` checked (a duration of at least 5 seconds) → Spark's
    interval text (``"10000 milliseconds"``); ``ConfigError`` otherwise."""
    try:
        parsed = parse_trigger(interval).get("processingTime")
    except ValueError:
        parsed = None
    if not isinstance(parsed, str):
        raise ConfigError(f"checkpoint_interval {interval!r}: use a duration such as "
                          "'5 seconds' or '1 minute'")
    if int(parsed.split()[0]) < MIN_CHECKPOINT_INTERVAL_MS:
        raise ConfigError(f"checkpoint_interval {interval!r}: at least 5 seconds")
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
