"""Record timestamps: by default the time the mirror sends a record (so a mirror that
starts late does not hand time-based retention a backlog that is already "old"), the
commit time always in ``gs.ts``; ``record_timestamp="commit"`` keeps the commit time."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable

from gridstream.consumer import OperationConsumer, OperationRecord
from gridstream.mirror import KafkaEndpointConfig, KafkaSyncEndpoint, Mirror
from gridstream.mirror.testing import InMemoryLog
from gridstream.operations import PropertySpec, TypeDescriptor
from gridstream.protocol import H_TS, header_value

MakeTopic = Callable[..., str]
DAY_MS = 86_400_000


def _old_log(topic: str, n: int, committed_ms: int) -> InMemoryLog:
    log = InMemoryLog([TypeDescriptor(name="Row", id_property="id", topic=topic,
                                      fixed=(PropertySpec("id", "str"),))])
    for i in range(n):
        log.write("Row", str(i), {"id": str(i)})
    log._bulks = [  # committed long before the mirror starts
        dataclasses.replace(b, timestamp_ms=committed_ms, operations=[
            dataclasses.replace(op, timestamp_ms=committed_ms) for op in b.operations])
        for b in log._bulks]
    return log


def _mirror_and_read(bootstrap: str, topic: str, log: InMemoryLog,
                     **options: str) -> list[OperationRecord]:
    mirror = Mirror(log, KafkaSyncEndpoint(KafkaEndpointConfig(bootstrap_servers=bootstrap,
                                                            **options)),
                    name=f"it-{uuid.uuid4().hex[:8]}")
    while mirror.run_once():
        pass
    mirror.stop()
    got: list[OperationRecord] = []
    with OperationConsumer(bootstrap, topics=[topic],
                           group_id=f"gs-test-{uuid.uuid4().hex[:8]}") as consumer:
        for _ in range(30):
            got.extend(consumer.consume(100, timeout_s=1.0))
            if len(got) >= 5:
                break
    return got


def test_a_late_mirror_stamps_records_with_the_send_time(kafka_bootstrap: str,
                                                         topic_factory: MakeTopic) -> None:
    committed = int(time.time() * 1000) - 30 * DAY_MS
    topic = topic_factory(1, retention_ms=7 * DAY_MS)
    before = int(time.time() * 1000)
    records = _mirror_and_read(kafka_bootstrap, topic, _old_log(topic, 5, committed))
    after = int(time.time() * 1000)
    assert len(records) == 5
    for record in records:
        assert before - 1000 <= record.timestamp_ms <= after + 1000
        assert header_value(record.headers, H_TS) == str(committed)
        assert record.envelope.ts == committed


def test_commit_time_as_record_timestamp_on_request(kafka_bootstrap: str,
                                                    topic_factory: MakeTopic) -> None:
    committed = int(time.time() * 1000) - 2 * DAY_MS
    topic = topic_factory(1)
    records = _mirror_and_read(kafka_bootstrap, topic, _old_log(topic, 5, committed),
                               record_timestamp="commit")
    assert len(records) == 5
    for record in records:
        assert record.timestamp_ms == committed
        assert header_value(record.headers, H_TS) == str(committed)
