"""``GridAdapter.acknowledge``: the Space registers the reader as a log consumer and its
retention keeps what the reader has not acknowledged; Hazelcast ignores it."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from gridstream.errors import ConfigError, PositionLostError
from gridstream.grid import Position
from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig
from gridstream.grid.space import SpaceAdapter, SpaceGridConfig
from gridstream.model import SpaceDocument
from gridstream.space import Space


def _acks(data_dir: Path) -> dict[str, int]:
    return dict(orjson.loads((data_dir / "consumers.json").read_bytes())["consumers"])


def test_space_acknowledgement_registers_and_holds_retention(tmp_path: Path) -> None:
    data_dir = tmp_path / "space"
    space = Space.embedded("acks", data_dir=data_dir, segment_bytes=4096, fsync="never")
    adapter = SpaceAdapter(SpaceGridConfig(str(data_dir), "acks"))  # a reader only
    try:
        adapter.open()
        for i in range(100):
            space.write(SpaceDocument("Item", {"id": f"k{i}", "pad": "x" * 200}))
        middle = adapter.end_position("Item")
        for i in range(100, 200):
            space.write(SpaceDocument("Item", {"id": f"k{i}", "pad": "x" * 200}))
        end = adapter.end_position("Item")
        space.snapshot()
        reader = space.log_reader()
        try:
            adapter.acknowledge("source-a", middle)
            assert _acks(data_dir)["source-a"] == middle.next_seqs["log"]
            # another consumer passing everything: the log keeps what source-a needs
            reader.register("other")
            reader.acknowledge("other", end.next_seqs["log"])
            assert 1 < reader.first_seq() <= middle.next_seqs["log"]
            assert adapter.read_changes("Item", middle, 10).changes
            adapter.acknowledge("source-a", end)
            assert reader.first_seq() > middle.next_seqs["log"]
            adapter.acknowledge("source-a", middle)  # never moves back
            assert _acks(data_dir)["source-a"] == end.next_seqs["log"]
        finally:
            reader.close()
        with pytest.raises(PositionLostError) as lost:
            adapter.acknowledge("source-a", Position("another-log", {"log": 5}))
        assert lost.value.detail == "lineage"
        with pytest.raises(ConfigError):
            adapter.acknowledge("source-a", Position(end.lineage, {"log": 5, "x": 1}))
    finally:
        adapter.close()
        space.close()


def test_hazelcast_acknowledgement_is_a_no_op() -> None:
    adapter = HazelcastAdapter(HazelcastGridConfig())  # not even connected
    adapter.acknowledge("source-a", Position("cluster", {"0": 3}))
