"""Topics created through the product's helper are usable at once: described, and
their metadata shows every partition with a leader, many in a row."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from gridstream.kafka import TopicSpec, ensure_topics, topic_max_message_bytes


@pytest.fixture()
def admin(kafka_bootstrap: str) -> Iterator[AdminClient]:
    client = AdminClient({"bootstrap.servers": kafka_bootstrap})
    names: list[str] = []
    client.created = names  # type: ignore[attr-defined]
    yield client
    if names:
        for future in client.delete_topics(names).values():
            future.result(timeout=60)


def test_many_topics_created_then_described_in_a_row(admin: AdminClient,
                                                     kafka_bootstrap: str) -> None:
    for i in range(25):
        name = f"gs-test-topics-{uuid.uuid4().hex[:10]}"
        admin.created.append(name)  # type: ignore[attr-defined]
        partitions = 1 + i % 4
        ensure_topics(admin, [TopicSpec(name, partitions, 1)], timeout_s=30)
        assert topic_max_message_bytes(admin, name, 30) is not None
        # a separate client (its own metadata cache) sees every partition with a leader
        fresh = AdminClient({"bootstrap.servers": kafka_bootstrap})
        metadata = fresh.list_topics(name, timeout=30).topics[name]
        assert metadata.error is None
        assert sorted(metadata.partitions) == list(range(partitions))
        assert all(p.leader >= 0 for p in metadata.partitions.values())
