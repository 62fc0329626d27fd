"""What a real-time query with a Python pass needs of its Spark session: how it is built
(``REAL_TIME_PYTHON_CONF``, checked by ``check_allowlist_off``) and the settings it
starts with (``real_time_conf``, ``producing_conf``), kept until the query has read them
(``await_sources``)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gridstream.errors import ConfigError, SparkError
from gridstream.pipeline.streaming import (
    ARROW_ROWS_CONF,
    MIN_BATCH_CONF,
    MIN_CHECKPOINT_INTERVAL_MS,
    REAL_TIME_ARROW_ROWS,
    REAL_TIME_PYTHON_BUFFER,
    SPARK_ARROW_ROWS,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["NOT_LISTED", "REAL_TIME_PYTHON_CONF", "await_sources", "check_allowlist_off",
           "producing_conf", "real_time_conf"]

log = logging.getLogger(__name__)

_V1_READERS = "spark.sql.streaming.disabledV2MicroBatchReaders"
_ALLOWLIST = "spark.sql.streaming.realTimeMode.allowlistCheck"
_BUFFER = "spark.buffer.size"
REAL_TIME_PYTHON_CONF = {_ALLOWLIST: "false", _BUFFER: str(REAL_TIME_PYTHON_BUFFER)}
"""What a Spark session needs to run Python passes in real-time mode: Spark 4.2 reads the
allow-list setting from the configuration the session was built with (set on a running
session, the query still fails at its first batch); and a small buffer to the Python
workers (``REAL_TIME_PYTHON_BUFFER``), read only when the session starts."""


def check_allowlist_off(spark: SparkSession, name: str) -> None:
    built = spark.sparkContext.getConf().get(_ALLOWLIST, "true")
    if str(built).strip().lower() != "false":
        raise ConfigError(
            f"pipeline {name!r}: real_time_python needs a Spark session built with "
            f"{_ALLOWLIST}=false (Spark 4.2 checks the setting the session was built with, "
            "for every batch): Pipeline.run builds its session so; for your own, "
            "get_spark(conf=REAL_TIME_PYTHON_CONF) from gridstream.pipeline.run")
    buffer = str(spark.sparkContext.getConf().get(_BUFFER, "65536")).strip()
    if not buffer.isdigit() or int(buffer) > REAL_TIME_PYTHON_BUFFER:
        log.warning("pipeline %r: the Spark session was built with %s=%s: a real-time "
                    "Python pass gets its input only once that much has come (build it "
                    "with REAL_TIME_PYTHON_CONF's %s)", name, _BUFFER, buffer,
                    REAL_TIME_PYTHON_BUFFER)
    # said once here: Spark's own warning, at every batch, is silenced (log4j2.properties)
    log.warning("pipeline %r: real-time mode with a Python pass: Spark %s", name,
                NOT_LISTED)


NOT_LISTED = ("4.2's real-time mode does not list MapInArrowExec among its operators; "
               "real_time_python=True runs them anyway in a session built with the "
               "allow-list check off (at your own risk, Spark says)")


_INITIALIZING = ("Initializing StreamExecution", "Initializing sources")
"""Spark's status messages before a query's plan (and so its sources) is resolved."""
_SOURCES_WAIT_S = 120.0


def await_sources(query: StreamingQuery) -> None:
    """Until the query has chosen its sources. Spark resolves a streaming query's plan —
    and reads which Kafka reader to use from the *starting* session's settings — in the
    query's own thread, after ``start`` returned; settings restored before that (under
    load, the suite's) made a real-time query take the V1 reader and fail with
    ``STREAMING_REAL_TIME_MODE.INPUT_STREAM_NOT_SUPPORTED``."""
    deadline = time.monotonic() + _SOURCES_WAIT_S
    while query.isActive and query.status.get("message") in _INITIALIZING:
        if time.monotonic() > deadline:
            raise SparkError(f"query {query.name!r} did not get past initializing its "
                             f"sources in {_SOURCES_WAIT_S:g}s")
        time.sleep(0.05)


@contextlib.contextmanager
def real_time_conf(spark: SparkSession, real_time: bool, python: bool) -> Iterator[None]:
    """While a real-time query starts (its session clones the configuration then):
    Spark's V2 Kafka reader on (real-time mode reads Kafka only through it; gridstream's
    sessions turn it off for micro-batches, ``gridstream.spark.session``), Spark's floor
    of the interval lowered to ours (``checkpoint_every`` checks it), and with ``python``
    the operator allow-list check off."""
    if not real_time:
        yield
        return
    with _settings(spark, {_V1_READERS: "", MIN_BATCH_CONF: str(MIN_CHECKPOINT_INTERVAL_MS),
                           **({_ALLOWLIST: "false"} if python else {})}):
        yield


@contextlib.contextmanager
def producing_conf(spark: SparkSession, produces: bool) -> Iterator[None]:
    """While a real-time query whose sink produces from its Python pass starts
    (``Sink.fuses``): Arrow batches of ``REAL_TIME_ARROW_ROWS`` rows, unless the session
    has a number other than Spark's default (a pass whose rows go back to Spark gains
    nothing from small batches: they come out at the batch's end)."""
    if not produces or spark.conf.get(ARROW_ROWS_CONF, None) not in (None, SPARK_ARROW_ROWS):
        yield
        return
    with _settings(spark, {ARROW_ROWS_CONF: str(REAL_TIME_ARROW_ROWS)}):
        yield


@contextlib.contextmanager
def _settings(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """``settings`` on the session, then what it had before."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)
