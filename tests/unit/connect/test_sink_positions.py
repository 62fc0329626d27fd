"""A sink's positions committed to its consumer group for lag tools (fakes)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from confluent_kafka import KafkaException

from gridstream.connect.sink import positions
from gridstream.connect.sink.positions import GroupPositions, group_id


class _Consumer:
    made: list[_Consumer] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.commits: list[list[tuple[str, int, int]]] = []
        self.fail = False
        _Consumer.made.append(self)

    def commit(self, *, offsets: Any, asynchronous: bool) -> None:
        assert asynchronous  # never blocks the runner
        if self.fail:
            raise KafkaException("broker away")
        self.commits.append([(tp.topic, tp.partition, tp.offset) for tp in offsets])

    def poll(self, timeout: float) -> None:
        return None

    def close(self) -> None:
        return None


def _progress(end: Any) -> dict[str, Any]:
    return {"sources": [{"endOffset": end, "latestOffset": end}]}


@pytest.fixture()
def made(monkeypatch: pytest.MonkeyPatch) -> list[_Consumer]:
    _Consumer.made = []
    monkeypatch.setattr(positions, "Consumer", _Consumer)
    return _Consumer.made


def test_each_completed_batch_commits_its_end_offsets_once(made: list[_Consumer]) -> None:
    group = GroupPositions("hz-sink", "b:1", {"security.protocol": "PLAINTEXT",
                                              "fetch.max.wait.ms": 10})
    group.progressed(None)  # before the first batch
    assert not made
    group.progressed(_progress('{"orders": {"1": 7, "0": 12}}'))
    group.progressed(_progress({"orders": {"0": 12, "1": 7}}))  # unchanged: no commit
    group.progressed(_progress({"orders": {"0": 15, "1": 7}}))
    (consumer,) = made
    assert consumer.commits == [[("orders", 0, 12), ("orders", 1, 7)],
                                [("orders", 0, 15), ("orders", 1, 7)]]
    assert consumer.config["group.id"] == group_id("hz-sink") == "connect-hz-sink"
    assert consumer.config["bootstrap.servers"] == "b:1"
    assert consumer.config["security.protocol"] == "PLAINTEXT"
    assert "fetch.max.wait.ms" not in consumer.config  # not a client-wide setting


def test_a_source_connectors_offsets_are_not_kafka_positions(made: list[_Consumer]) -> None:
    GroupPositions("s", "b:1", {}).progressed(_progress({"v": 1, "caches": {"c": {}}}))
    assert not made


def test_a_failed_commit_is_logged_and_tried_again(made: list[_Consumer],
                                                   caplog: pytest.LogCaptureFixture) -> None:
    group = GroupPositions("sink", "b:1", {})
    group.progressed(_progress({"t": {"0": 1}}))
    made[0].fail = True
    with caplog.at_level(logging.WARNING):
        group.progressed(_progress({"t": {"0": 2}}))  # raises inside: logged, not raised
    assert "connect-sink" in caplog.text and "checkpoint is unaffected" in caplog.text
    made[0].fail = False
    group.progressed(_progress({"t": {"0": 2}}))
    assert made[0].commits[-1] == [("t", 0, 2)]
    group._on_commit("COORDINATOR_NOT_AVAILABLE", [])  # an asynchronous failure
    group.progressed(_progress({"t": {"0": 2}}))  # the same offsets: committed again
    assert made[0].commits[-2:] == [[("t", 0, 2)], [("t", 0, 2)]]
