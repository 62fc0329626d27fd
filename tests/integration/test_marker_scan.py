"""The exactly-once writer's driver-side marker scan on a real broker: every partition at
once, the newest marker of a slot whichever partition holds it, other queries' and
aborted markers ignored, tombstones, incremental reads, an open transaction waited for
and named when it outlasts the wait."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from gridstream.errors import SparkError
from gridstream.spark._kafka_slots import Marker, marker_key
from gridstream.spark._marker_scan import MarkerScan


def _producer(bootstrap: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap,
                         "transactional.id": f"gs-test-markers-{uuid.uuid4().hex}"})
    producer.init_transactions(30)
    return producer


def _marker(query: str, slot: int, batch: int) -> bytes:
    return Marker(query, slot, batch, 0, 10 * batch, f"{10 * batch}:x").encode()


def _send(producer: Producer, topic: str, records: list[tuple[int, bytes, bytes | None]],
          *, commit: bool = True) -> None:
    producer.begin_transaction()
    for partition, key, value in records:
        producer.produce(topic, value, key, partition=partition)
    if commit:
        producer.commit_transaction(30)
    else:  # sent, the transaction left open
        assert producer.flush(30) == 0


def test_the_scan_reads_every_partition_to_its_end_incrementally(
        kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(4)  # partition 3 never holds a record
    producer = _producer(kafka_bootstrap)
    _send(producer, topic, [
        (0, marker_key("q1", 0), _marker("q1", 0, 1)),
        (2, marker_key("q1", 0), _marker("q1", 0, 3)),  # newer, another partition
        (1, marker_key("q1", 1), _marker("q1", 1, 2)),
        (1, marker_key("q2", 0), _marker("q2", 0, 9)),  # another query's
        (1, marker_key("q1", 1), None)])                 # slot 1's marker deleted
    _send(producer, topic, [(0, marker_key("q1", 5), _marker("q1", 5, 7))], commit=False)
    producer.abort_transaction(30)
    scan = MarkerScan({"bootstrap.servers": kafka_bootstrap}, topic, "q1")
    try:
        found = scan.markers(4, 10.0)
        assert {slot: m.batch for slot, m in found.items()} == {0: 3}
        assert found[0] == Marker.decode(_marker("q1", 0, 3))
        ends = dict(scan._next)
        # the empty one; 3 records and their commit marker, which the broker may not have
        # written yet: commit_transaction returns once the coordinator has logged the
        # commit, and the coordinator writes the markers into the partitions after that
        assert ends[3] == 0 and ends[1] in (3, 4)

        _send(producer, topic, [(1, marker_key("q1", 2), _marker("q1", 2, 4)),
                                (2, marker_key("q1", 0), None)])  # slot 0's, found before
        found = scan.markers(4, 10.0)  # from where the last scan ended, the rest kept
        assert {slot: m.batch for slot, m in found.items()} == {0: 1, 2: 4}
        # one more record at 4 (after the first commit's marker at 3), and its commit
        # marker at 5 if the broker has written it yet (above)
        assert scan._next[1] in (5, 6) and scan._next[0] == ends[0]

        _send(producer, topic, [(2, marker_key("q1", 3), _marker("q1", 3, 5))], commit=False)
        with pytest.raises(SparkError, match=r"marker partition\(s\) \[2\] .* within 1s"):
            scan.markers(4, 1.0)
        producer.commit_transaction(30)
        found = scan.markers(4, 10.0)
        assert {slot: m.batch for slot, m in found.items()} == {0: 1, 2: 4, 3: 5}
    finally:
        scan.close()


def test_a_partition_added_between_scans_is_read(
        kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    topic = topic_factory(1)
    producer = _producer(kafka_bootstrap)
    _send(producer, topic, [(0, marker_key("q1", 0), _marker("q1", 0, 1))])
    scan = MarkerScan({"bootstrap.servers": kafka_bootstrap}, topic, "q1")
    try:
        assert {s: m.batch for s, m in scan.markers(1, 10.0).items()} == {0: 1}
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        admin.create_partitions([NewPartitions(topic, 2)])[topic].result(30)
        later = _producer(kafka_bootstrap)  # one that knows the new partition
        _send(later, topic, [(1, marker_key("q1", 1), _marker("q1", 1, 2))])
        assert {s: m.batch for s, m in scan.markers(2, 10.0).items()} == {0: 1, 1: 2}
    finally:
        scan.close()
