"""A real-time query keeps the start-up settings until it has chosen its sources (Spark
resolves them in the query's thread after ``start`` returned: restored too early, under
load, the query took the V1 Kafka reader and failed)."""

from __future__ import annotations

from typing import Any

import pytest

from gridstream.errors import SparkError
from gridstream.pipeline import _real_time as run


class _Query:
    name = "q"

    def __init__(self, messages: list[str]) -> None:
        self.messages = messages
        self.polled = 0

    @property
    def isActive(self) -> bool:  # noqa: N802 - Spark's name
        return True

    @property
    def status(self) -> dict[str, Any]:
        self.polled += 1
        return {"message": self.messages[min(self.polled, len(self.messages)) - 1]}


def test_the_wait_lasts_until_the_sources_are_initialised() -> None:
    query = _Query(["Initializing StreamExecution", "Initializing sources",
                    "Initializing sources", "Waiting for data to arrive"])
    run.await_sources(query)  # type: ignore[arg-type]
    assert query.polled == 4


def test_a_query_stuck_initialising_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run, "_SOURCES_WAIT_S", 0.1)
    with pytest.raises(SparkError, match="initializing its sources"):
        run.await_sources(_Query(["Initializing sources"]))  # type: ignore[arg-type]


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = dict(values)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)


class _Session:
    def __init__(self, values: dict[str, str]) -> None:
        self.conf = _Conf(values)


ROWS = "spark.sql.execution.arrow.maxRecordsPerBatch"


def test_a_real_time_start_lowers_sparks_interval_floor_and_restores_it() -> None:
    """Spark refuses a real-time interval under its floor (5 s) at start: it is lowered
    to gridstream's while the query starts, then set back as it was."""
    from gridstream.pipeline.streaming import MIN_BATCH_CONF

    spark = _Session({MIN_BATCH_CONF: "5000"})
    with run.real_time_conf(spark, True, True):  # type: ignore[arg-type]
        assert spark.conf.values[MIN_BATCH_CONF] == "100"
    assert spark.conf.values == {MIN_BATCH_CONF: "5000"}
    with run.real_time_conf(spark, False, True):  # type: ignore[arg-type]
        assert spark.conf.values == {MIN_BATCH_CONF: "5000"}


@pytest.mark.parametrize(("own", "during"), [(None, "100"), ("10000", "100"),
                                             ("40", "40")])
def test_a_producing_real_time_start_takes_small_arrow_batches(
        own: str | None, during: str) -> None:
    """A pass whose sink produces from it gets its input in Arrow batches of
    ``REAL_TIME_ARROW_ROWS`` rows (Spark's 10 000 would make a record wait for 10 000
    more); a number other than Spark's default that the session set stays; everything
    is restored after the start; a pass whose rows go back to Spark keeps Spark's."""
    session = _Session({} if own is None else {ROWS: own})
    with run.producing_conf(session, True):  # type: ignore[arg-type]
        assert session.conf.values[ROWS] == during
    assert session.conf.values == ({} if own is None else {ROWS: own})
    held = _Session({})
    with run.real_time_conf(held, True, True), run.producing_conf(held, False):  # type: ignore[arg-type]
        assert ROWS not in held.conf.values
        assert held.conf.values["spark.sql.streaming.realTimeMode.allowlistCheck"] == "false"


class _Built:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def getConf(self) -> _Built:  # noqa: N802 - Spark's name
        return self

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


class _BuiltSession:
    def __init__(self, values: dict[str, str]) -> None:
        self.sparkContext = _Built(values)


@pytest.mark.parametrize(("buffer", "warned"), [(None, True), ("65536", True),
                                                ("64k", True), ("1024", False),
                                                ("512", False)])
def test_a_session_built_with_a_large_worker_buffer_is_warned_about(
        buffer: str | None, warned: bool, caplog: pytest.LogCaptureFixture) -> None:
    """Spark buffers 64 KiB towards a Python worker by default: a real-time pass would
    get its input only once that much had come. ``REAL_TIME_PYTHON_CONF`` builds the
    session with 1 KiB; a session built with more (or a size that is not a plain
    number of bytes) is warned about, not refused."""
    values = {"spark.sql.streaming.realTimeMode.allowlistCheck": "false"}
    if buffer is not None:
        values["spark.buffer.size"] = buffer
    with caplog.at_level("WARNING"):
        run.check_allowlist_off(_BuiltSession(values), "p")  # type: ignore[arg-type]
    assert ("spark.buffer.size" in caplog.text) is warned, caplog.text
    assert run.REAL_TIME_PYTHON_CONF["spark.buffer.size"] == "1024"
    caplog.clear()
    with caplog.at_level("WARNING"):
        run.check_allowlist_off(_BuiltSession(dict(run.REAL_TIME_PYTHON_CONF)), "p")  # type: ignore[arg-type]
    assert "spark.buffer.size" not in caplog.text
