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
        self.failures: list[str] = []
        if "sasl.jaas.config" in config:  # what librdkafka says of a Java-only setting
            raise KafkaException(f"No such configuration property: \"sasl.jaas.config\" "
                                 f"({config['sasl.jaas.config']})")  # quoting the value
        _Consumer.made.append(self)

    def commit(self, *, offsets: Any, asynchronous: bool) -> None:
        assert asynchronous  # never blocks the runner
        if self.fail:
            raise KafkaException("broker away")
        self.commits.append([(tp.topic, tp.partition, tp.offset) for tp in offsets])

    def poll(self, timeout: float) -> None:
        """Serves the results of earlier commits (``failures`` queued by a test)."""
        while self.failures:
            self.config["on_commit"](self.failures.pop(0), [])

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
    made[0].failures.append("COORDINATOR_NOT_AVAILABLE")  # an asynchronous failure,
    group.progressed(_progress({"t": {"0": 2}}))  # served at the next report, even idle:
    assert made[0].commits[-2:] == [[("t", 0, 2)], [("t", 0, 2)]]  # committed again


def test_an_idle_sinks_group_is_committed_again_every_hour(
        made: list[_Consumer], monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka drops an empty group's offsets after offsets.retention.minutes."""
    clock = [1000.0]
    monkeypatch.setattr(positions.time, "monotonic", lambda: clock[0])
    group = GroupPositions("sink", "b:1", {})
    group.progressed(_progress({"t": {"0": 3}}))
    clock[0] += 3000
    group.progressed(_progress({"t": {"0": 3}}))
    assert len(made[0].commits) == 1
    clock[0] += 700
    group.progressed(_progress({"t": {"0": 3}}))
    assert len(made[0].commits) == 2


def test_java_only_properties_skip_the_group_and_say_so_once(
        made: list[_Consumer], caplog: pytest.LogCaptureFixture) -> None:
    """A sink's properties are the Java client's (Spark's Kafka source): a JAAS line
    means nothing to librdkafka. The flow goes on; the secret is not logged."""
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required password="s3cr3t";'
    group = GroupPositions("sink", "b:1", {"sasl.jaas.config": jaas})
    with caplog.at_level(logging.WARNING):
        for offset in (1, 2, 3):
            group.progressed(_progress({"t": {"0": offset}}))
    assert not made
    assert caplog.text.count("not committed there") == 1
    assert "s3cr3t" not in caplog.text
