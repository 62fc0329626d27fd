"""A mirror name's stored position belongs to one operation log: reusing the name for a
new space must fail loudly instead of skipping the new space's first operations."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from gridstream.errors import MirrorError
from gridstream.mirror import Mirror
from gridstream.model import SpaceDocument
from gridstream.operations import TypeDescriptor
from gridstream.space import Space
from tests.integration.support.mirror_helpers import kafka_endpoint


def _mirror_once(space: Space, bootstrap: str, name: str) -> None:
    mirror = Mirror(space, kafka_endpoint(bootstrap), name=name)
    mirror.start()
    assert mirror.wait_for(space.next_seq, timeout_s=60)
    mirror.stop()


def _space(path: Path, topic: str, writes: int) -> Space:
    space = Space.embedded("identity", data_dir=path)
    space.introduce_type(TypeDescriptor("Item", "id", topic=topic))
    for i in range(writes):
        space.write(SpaceDocument("Item", {"id": str(i), "n": i}))
    return space


def test_a_new_log_under_an_old_mirror_name_is_refused(
    kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path
) -> None:
    topic, name = topic_factory(1), f"identity-{uuid.uuid4().hex[:8]}"
    with _space(tmp_path / "first", topic, 5) as first:
        _mirror_once(first, kafka_bootstrap, name)
    with _space(tmp_path / "second", topic, 7) as second:  # past the old position too
        mirror = Mirror(second, kafka_endpoint(kafka_bootstrap), name=name)
        with pytest.raises(MirrorError, match="holds a position .* for another operation log"):
            mirror.open()
        mirror.stop()


def test_the_same_log_resumes_under_its_name(
    kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path
) -> None:
    topic, name = topic_factory(1), f"identity-{uuid.uuid4().hex[:8]}"
    with _space(tmp_path / "space", topic, 3) as space:
        _mirror_once(space, kafka_bootstrap, name)
    with Space.embedded("identity", data_dir=tmp_path / "space") as space:
        space.write(SpaceDocument("Item", {"id": "late", "n": 9}))
        mirror = Mirror(space, kafka_endpoint(kafka_bootstrap), name=name)
        assert mirror.open() == 4
        mirror.stop()
