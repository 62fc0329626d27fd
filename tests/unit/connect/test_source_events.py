"""A batch's events (and the changes NONE skipped) are kept only once the batch is
written: a batch whose write fails runs again and must not count them twice."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gridstream.connect.config import SourceConnectorConfig
from gridstream.connect.source import SourceConnector
from gridstream.errors import KafkaClientError


class _Context:
    def setLocalProperty(self, key: str, value: Any) -> None:  # noqa: N802 - Spark's name
        return None


class _Session:
    sparkContext = _Context()  # noqa: N815 - Spark's name


class _Rows:
    """The few DataFrame calls ``process_batch`` makes: the partitions' report rows;
    the first read fails (a broker gone while the batch was written)."""

    sparkSession = _Session()  # noqa: N815 - Spark's name

    def __init__(self, reports: list[dict[str, Any]], fail: list[bool]) -> None:
        self.reports = reports
        self.fail = fail

    def select(self, *columns: str) -> _Rows:
        return self

    def collect(self) -> list[dict[str, Any]]:
        if self.fail.pop(0):
            raise KafkaClientError("broker gone", code=None)
        return [{"reason": orjson.dumps(r).decode()} for r in self.reports]


def _batch() -> list[dict[str, Any]]:
    event = {"kind": "skipped", "cache": "orders", "detail": "from 3 to 9"}
    base = {"samples": [], "error": None, "committed_earlier": False}
    return [{**base, "slot": 0, "counts": {"gap": 6, "ok": 2}, "gaps": {"orders": 6},
             "events": [], "written": 2},
            {**base, "slot": 1, "counts": {"event": 1}, "gaps": {},
             "events": [orjson.dumps(event).decode()], "written": 0}]


def test_events_of_a_batch_whose_write_failed_are_not_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    config = SourceConnectorConfig.model_validate({
        "name": "s", "grid": {"kind": "space", "data_dir": "/d", "space_name": "x"},
        "checkpoint": "/tmp/c", "failoverPolicy": "NONE",
        "deliveryGuarantee": "at_least_once"})
    connector = SourceConnector(config, bootstrap_servers="127.0.0.1:1")
    rows = _Rows(_batch(), [True, False])
    with pytest.raises(KafkaClientError):
        connector.process_batch(rows, 4)  # type: ignore[arg-type]
    assert connector.skipped_while_down == {} and list(connector.events) == []
    report = connector.process_batch(rows, 4)  # type: ignore[arg-type]
    assert connector.skipped_while_down == {"orders": 6}
    assert [e.kind for e in connector.events] == ["skipped"]
    assert report.written == 2 and "6 changes" in report.note


def test_a_record_the_policy_stops_on_is_named_with_how_to_get_past_it() -> None:
    from gridstream.errors import RecordError

    config = SourceConnectorConfig.model_validate({
        "name": "s", "grid": {"kind": "space", "data_dir": "/d", "space_name": "x"},
        "checkpoint": "/tmp/c", "deliveryGuarantee": "at_least_once"})
    connector = SourceConnector(config, bootstrap_servers="127.0.0.1:1")
    bad = {"slot": 0, "counts": {"error": 2, "ok": 5}, "gaps": {}, "events": [],
           "samples": [], "error": ["nc/k7", "convert: value is not JSON", "nc"],
           "written": 5, "committed_earlier": False}
    with pytest.raises(RecordError) as caught:
        connector.process_batch(_Rows([bad], [False]), 3)  # type: ignore[arg-type]
    text = str(caught.value)
    assert "nc/k7" in text and "value is not JSON" in text and "2 bad record(s)" in text
    assert "errors.tolerance=all" in text and "deadLetterTopic" in text
