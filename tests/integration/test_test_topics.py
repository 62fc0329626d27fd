"""The integration tests' own topics (``topic_factory``)."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka.admin import AdminClient, ConfigResource


def test_test_topics_keep_records_with_old_timestamps(
        kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    """Tests write event times years back (``T0`` of the window tests is in 2023): with
    the broker's 7-day retention by record time such a segment was deleted whenever the
    retention check came during the test, and the query failed with "Some data may have
    been lost" (a CI run of 2026-11-26)."""
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for topic, expected in ((topic_factory(1), "-1"),
                            (topic_factory(1, retention_ms=60_000), "60000")):
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        configs = admin.describe_configs([resource])[resource].result(30)
        assert configs["retention.ms"].value == expected
