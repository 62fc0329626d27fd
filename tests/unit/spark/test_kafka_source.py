"""The Kafka source options and lag every Spark job of gridstream shares."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from gridstream.errors import ConfigError
from gridstream.ops.lag import kafka_lag
from gridstream.spark.kafka_source import (
    check_consumer_properties,
    client_options,
    source_options,
)


def test_source_options_subscribe_or_pattern() -> None:
    options = source_options("b:9092", {"security.protocol": "SSL"}, topics=("a", "b"),
                             pattern=None, starting_offsets="earliest",
                             max_offsets_per_trigger=10, include_headers=True)
    assert options == {
        "kafka.bootstrap.servers": "b:9092", "kafka.security.protocol": "SSL",
        "kafka.fetch.max.wait.ms": "10",
        "kafka.isolation.level": "read_committed", "subscribe": "a,b",
        "startingOffsets": "earliest", "includeHeaders": "true", "failOnDataLoss": "true",
        "maxOffsetsPerTrigger": "10"}
    by_pattern = source_options("b:9092", {}, topics=None, pattern="t-.*",
                                starting_offsets="latest", min_partitions=4)
    assert by_pattern["subscribePattern"] == "t-.*" and "subscribe" not in by_pattern
    assert by_pattern["minPartitions"] == "4" and by_pattern["includeHeaders"] == "false"
    with pytest.raises(ConfigError):
        source_options("b", {}, topics=("a",), pattern="x", starting_offsets="earliest")


def test_a_short_fetch_wait_is_the_default_and_the_users_wins() -> None:
    """Kafka's 500 ms default made a task wait that long per partition read to the tail
    of the log; the user's own value is kept."""
    ours = source_options("b", {}, topics=("a",), pattern=None, starting_offsets="earliest")
    assert ours["kafka.fetch.max.wait.ms"] == "10"
    theirs = source_options("b", {"fetch.max.wait.ms": 200}, topics=("a",), pattern=None,
                            starting_offsets="earliest")
    assert theirs["kafka.fetch.max.wait.ms"] == "200"


def test_secrets_are_unwrapped_for_spark_only() -> None:
    options = client_options("b", {"sasl.password": SecretStr("pw"), "linger.ms": 5,
                                   "enable.idempotence": False})
    assert options["kafka.sasl.password"] == "pw"
    assert options["kafka.linger.ms"] == "5"
    assert options["kafka.enable.idempotence"] == "false"


def test_properties_spark_manages_are_refused() -> None:
    check_consumer_properties({"fetch.min.bytes": 1}, "x")
    with pytest.raises(ConfigError, match="enable.auto.commit"):
        check_consumer_properties({"enable.auto.commit": True}, "x")


def test_lag_sums_every_partition_of_every_source() -> None:
    progress = {"sources": [
        {"endOffset": {"t": {"0": 10, "1": 5}}, "latestOffset": '{"t": {"0": 15, "1": 5}}'},
        {"endOffset": {"u": {"0": 1}}, "latestOffset": {"u": {"0": 4}}},
    ]}
    assert kafka_lag(progress) == 8
    assert kafka_lag(None) is None
    assert kafka_lag({"sources": [{"endOffset": None, "latestOffset": "bad"}]}) is None


def test_a_c_clients_config_is_the_shared_part_with_secrets_revealed() -> None:
    from gridstream.kafka.config import client_config

    config = client_config("k:9092", {"sasl.password": SecretStr("pw"), "acks": "all",
                                      "enable.idempotence": True,
                                      "security.protocol": "SASL_SSL"})
    assert config == {"bootstrap.servers": "k:9092", "sasl.password": "pw",
                      "security.protocol": "SASL_SSL"}  # producer-only keys left out
