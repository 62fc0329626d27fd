"""The sink connector before it runs: its Kafka source options, its checks, its line."""

from __future__ import annotations

from typing import Any

import pytest

from gridstream.connect.config import SinkConnectorConfig
from gridstream.connect.sink import SinkConnector
from gridstream.errors import ConfigError

HAZELCAST = {"kind": "hazelcast", "cluster_name": "c", "members": ["127.0.0.1:5701"]}


def config(**options: Any) -> SinkConnectorConfig:
    return SinkConnectorConfig.model_validate(
        {"name": "s", "grid": HAZELCAST, "checkpoint": "/tmp/ck", "topics": "a,b", **options})


def test_source_options_read_headers_only_for_dead_letters() -> None:
    plain = SinkConnector(config(), bootstrap_servers="k:9092").source_options()
    assert plain["subscribe"] == "a,b" and plain["includeHeaders"] == "false"
    assert plain["kafka.isolation.level"] == "read_committed"
    assert plain["startingOffsets"] == "earliest" and plain["maxOffsetsPerTrigger"] == "100000"
    dead = SinkConnector(config(errorHandlingPolicy="DEAD_LETTER", deadLetterTopic="dlq"),
                         bootstrap_servers="k:9092").source_options()
    assert dead["includeHeaders"] == "true"
    regex = SinkConnector(config(topics=None, **{"topics.regex": "t-.*"}),
                          bootstrap_servers="k:9092").source_options()
    assert regex["subscribePattern"] == "t-.*" and "subscribe" not in regex


def test_secrets_never_show_in_the_line() -> None:
    connector = SinkConnector(config(kafka={"sasl.password": "hunter2"}),
                              bootstrap_servers="k:9092")
    assert "hunter2" not in connector.describe()
    assert connector.source_options()["kafka.sasl.password"] == "hunter2"


def test_bad_parts_are_refused_before_anything_runs() -> None:
    with pytest.raises(ConfigError, match="enable.auto.commit"):
        SinkConnector(config(kafka={"enable.auto.commit": "true"}), bootstrap_servers="k")
    with pytest.raises(ConfigError, match="allow-list"):
        SinkConnector(config(cacheFilter="tests.unit.connect.sink_filters:even"),
                      bootstrap_servers="k")
    with pytest.raises(ConfigError, match="Space"):
        SinkConnector(config(), bootstrap_servers="k", space=object())  # type: ignore[arg-type]
    allowed = SinkConnector(config(cacheFilter="tests.unit.connect.sink_filters:even"),
                            bootstrap_servers="k", allowed_modules=["tests.unit.connect"])
    assert allowed.spec.allowed_modules[0] == "tests.unit.connect"
