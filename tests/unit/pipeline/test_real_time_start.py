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
