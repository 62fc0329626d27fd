"""A real-time query keeps the start-up settings until it has chosen its sources (Spark
resolves them in the query's thread after ``start`` returned: restored too early, under
load, the query took the V1 Kafka reader and failed)."""

from __future__ import annotations

from typing import Any

import pytest

from gridstream.errors import SparkError
from gridstream.pipeline import run


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
    run._await_sources(query)  # type: ignore[arg-type]
    assert query.polled == 4


def test_a_query_stuck_initialising_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run, "_SOURCES_WAIT_S", 0.1)
    with pytest.raises(SparkError, match="initializing its sources"):
        run._await_sources(_Query(["Initializing sources"]))  # type: ignore[arg-type]


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = dict(values)
        self.seen: list[dict[str, str]] = []

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


@pytest.mark.parametrize(("own", "during"), [(None, "100"), ("10000", "100"),
                                             ("40", "40")])
def test_a_real_time_python_start_takes_small_arrow_batches_unless_the_session_has_its_own(
        own: str | None, during: str) -> None:
    """A pass gets its input in Arrow batches of ``REAL_TIME_ARROW_ROWS`` rows (Spark's
    10 000 would make a record wait for 10 000 more at 5 000 a second); a number the
    session set itself stays; everything is restored after the start."""
    session = _Session({} if own is None else {ROWS: own})
    with run._real_time_conf(session, True, True):  # type: ignore[arg-type]
        assert session.conf.values[ROWS] == during
        assert session.conf.values["spark.sql.streaming.realTimeMode.allowlistCheck"] == \
            "false"
    assert session.conf.values == ({} if own is None else {ROWS: own})
    without_python = _Session({})
    with run._real_time_conf(without_python, True, False):  # type: ignore[arg-type]
        assert ROWS not in without_python.conf.values


def test_a_session_for_real_time_python_is_built_with_a_small_worker_buffer() -> None:
    """Spark buffers 64 KiB towards a Python worker by default: a real-time pass would
    get its input only once that much had come."""
    assert int(run.REAL_TIME_PYTHON_CONF["spark.buffer.size"]) <= 1024
