"""A log whose tail was cut (``on_corrupt_tail="truncate"``) never reuses a sequence
number the mirror may have delivered: every operation written after the repair reaches
Kafka with a version above every earlier one."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from gridstream.mirror import Mirror
from gridstream.model import SpaceDocument
from gridstream.operations import TypeDescriptor
from gridstream.space import Space
from tests.integration.support.mirror_helpers import consume_all, kafka_endpoint


def _open(path: Path, **options: str) -> Space:
    return Space.embedded("repaired", data_dir=path, partitions=1, snapshot_on_close=False,
                          **options)  # type: ignore[arg-type]


def _mirror_once(space: Space, bootstrap: str, name: str) -> None:
    mirror = Mirror(space, kafka_endpoint(bootstrap), name=name)
    mirror.start()
    assert mirror.wait_for(space.next_seq, timeout_s=60)
    mirror.stop()


def test_operations_after_a_tail_repair_all_reach_kafka_with_higher_versions(
    kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path
) -> None:
    topic, name = topic_factory(1), f"repaired-{uuid.uuid4().hex[:8]}"
    path = tmp_path / "space"
    with _open(path) as space:
        space.introduce_type(TypeDescriptor("Item", "id", topic=topic))
        for i in range(10):
            space.write(SpaceDocument("Item", {"id": f"old-{i}", "n": i}))
        _mirror_once(space, kafka_bootstrap, name)  # delivers all ten
    # a power loss takes the end of the last record, which the mirror had delivered
    segment = max(path.glob("p*/*.seg"), key=lambda p: p.stat().st_mtime_ns)
    with open(segment, "r+b") as f:
        f.truncate(segment.stat().st_size - 5)

    with _open(path, on_corrupt_tail="truncate") as space:
        for i in range(5):
            space.write(SpaceDocument("Item", {"id": f"new-{i}", "n": i}))
        _mirror_once(space, kafka_bootstrap, name)

    records = consume_all(kafka_bootstrap, [topic], 15, settle_s=3.0)
    old = [r for r in records if str(r.id).startswith("old-")]
    new = [r for r in records if str(r.id).startswith("new-")]
    assert sorted(str(r.id) for r in new) == [f"new-{i}" for i in range(5)]
    assert len(old) == 10 and len(records) == 15
    assert min(r.version for r in new) > max(r.version for r in old)
    assert len({r.version for r in records}) == 15  # no version given twice
