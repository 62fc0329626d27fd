"""A batch's events (and the changes NONE skipped) are kept only once the batch is
written: a batch whose write fails runs again and must not count them twice."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gridstream.connect.config import SourceConnectorConfig
from gridstream.connect.source import SourceConnector
from gridstream.errors import KafkaClientError


class _Rows:
    """The few DataFrame calls ``process_batch`` makes, over fixed rows."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def persist(self, level: Any) -> _Rows:
        return self

    def unpersist(self) -> None:
        return None

    def groupBy(self, *columns: str) -> _Rows:  # noqa: N802 - Spark's name
        counts: dict[tuple[Any, ...], int] = {}
        for row in self.rows:
            key = tuple(row[c] for c in columns)
            counts[key] = counts.get(key, 0) + 1
        return _Rows([{**dict(zip(columns, k, strict=True)), "count": n}
                      for k, n in counts.items()])

    def count(self) -> _Rows:
        return self

    def collect(self) -> list[dict[str, Any]]:
        return self.rows

    def where(self, condition: Any) -> _Rows:
        if condition == "status = 'event'":
            return _Rows([r for r in self.rows if r["status"] == "event"])
        return _Rows([r for r in self.rows if r["status"] in ("ok", "dead")])

    def select(self, *columns: str) -> _Rows:
        return self


class _Column:
    def isin(self, *values: str) -> str:
        return "written"


def _batch() -> list[dict[str, Any]]:
    event = {"kind": "skipped", "cache": "orders", "detail": "from 3 to 9"}
    return ([{"status": "event", "topic": None, "cache": "orders",
              "reason": orjson.dumps(event).decode()}]
            + [{"status": "gap", "topic": None, "cache": "orders", "reason": None}] * 6
            + [{"status": "ok", "topic": "t", "cache": "orders", "reason": None}] * 2)


def test_events_of_a_batch_whose_write_failed_are_not_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import pyspark.sql.functions as F

    monkeypatch.setattr(F, "col", lambda name: _Column())
    config = SourceConnectorConfig.model_validate({
        "name": "s", "grid": {"kind": "space", "data_dir": "/d", "space_name": "x"},
        "checkpoint": "/tmp/c", "failoverPolicy": "NONE"})
    connector = SourceConnector(config, bootstrap_servers="127.0.0.1:1")
    monkeypatch.setattr(connector, "_ensure_topics", lambda topics: None)
    attempts = []

    def write(out: Any, batch_id: int) -> None:
        attempts.append(batch_id)
        if len(attempts) == 1:
            raise KafkaClientError("broker gone", code=None)

    monkeypatch.setattr(connector, "_write", write)
    with pytest.raises(KafkaClientError):
        connector.process_batch(_Rows(_batch()), 4)  # type: ignore[arg-type]
    assert connector.skipped_while_down == {} and list(connector.events) == []
    report = connector.process_batch(_Rows(_batch()), 4)  # type: ignore[arg-type]
    assert connector.skipped_while_down == {"orders": 6}
    assert [e.kind for e in connector.events] == ["skipped"]
    assert report.written == 2 and "6 changes" in report.note
