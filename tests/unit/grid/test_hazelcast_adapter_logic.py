"""The Hazelcast adapter's pure parts: config, the fair share of a read, key and value checks."""

from __future__ import annotations

import pickle

import pytest
from hazelcast.core import HazelcastJsonValue

from gridstream.errors import ConfigError, GridError, PositionLostError
from gridstream.grid import Position, Write
from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig
from gridstream.grid.hazelcast import adapter as hz
from gridstream.grid.hazelcast._journal import MAX_READ, Bounds


def test_config_pickles_and_validates() -> None:
    config = HazelcastGridConfig(cluster_name="c1", members=("127.0.0.1:5701", "127.0.0.1:5702"))
    assert pickle.loads(pickle.dumps(config)) == config
    assert pickle.loads(pickle.dumps(HazelcastAdapter(config))).config == config
    for bad in ({"cluster_name": ""}, {"members": ()}, {"connect_timeout_s": 0}):
        with pytest.raises(ConfigError):
            HazelcastGridConfig(**bad)  # type: ignore[arg-type]


def test_adapter_needs_open() -> None:
    with pytest.raises(GridError, match="not open"):
        HazelcastAdapter(HazelcastGridConfig()).list_caches()


def test_allocate_shares_the_budget_and_rotates() -> None:
    pending = {0: 100, 1: 100, 2: 1, 3: 100}
    sizes, cursor = hz._allocate(pending, 10, 0, 4)
    assert sum(sizes.values()) == 10 and sizes[2] == 1
    assert max(sizes.values()) - min(v for p, v in sizes.items() if p != 2) <= 1
    # a budget smaller than the partitions with events: turns rotate between calls
    served: list[int] = []
    cursor = 0
    for _ in range(4):
        sizes, cursor = hz._allocate({0: 5, 1: 5, 2: 5, 3: 5}, 1, cursor, 4)
        served += list(sizes)
    assert served == [0, 1, 2, 3]


def test_allocate_caps_one_read_and_ignores_empty_partitions() -> None:
    sizes, _ = hz._allocate({0: 10 * MAX_READ, 1: 0}, 5 * MAX_READ, 0, 2)
    assert sizes == {0: MAX_READ}
    assert hz._allocate({}, 10, 3, 4) == ({}, 3)


def test_stored_sequence_outside_the_journal_is_lost() -> None:
    hz._check_seq("m", 0, 5, Bounds(5, 9))
    hz._check_seq("m", 0, 9, Bounds(5, 9))
    with pytest.raises(PositionLostError) as below:
        hz._check_seq("m", 0, 4, Bounds(5, 9))
    assert below.value.detail == "overflow"
    with pytest.raises(PositionLostError) as above:
        hz._check_seq("m", 0, 10, Bounds(5, 9))
    assert above.value.detail == "ahead"


def test_keys_and_values() -> None:
    assert hz._check_key("m", "k") == "k" and hz._check_key("m", -(2**63)) == -(2**63)
    for key in (True, 2**63, 1.5):
        with pytest.raises(GridError):
            hz._check_key("m", key)  # type: ignore[arg-type]
    with pytest.raises(GridError):
        hz._key("m", b"k")
    assert hz._value("m", HazelcastJsonValue('{"a": [1, {"b": null}]}')) == {"a": [1, {"b": None}]}
    for value in ("text", HazelcastJsonValue("[1]"), HazelcastJsonValue("{bad")):
        with pytest.raises(GridError):
            hz._value("m", value)
    assert hz._json("m", Write("k", {"n": 1})).to_string() == '{"n":1}'
    with pytest.raises(GridError):
        hz._json("m", Write("k", {"n": object()}))


class _SwitchingCluster(HazelcastAdapter):
    """An adapter whose cluster id answers from a script: a restart between two looks."""

    def __init__(self, ids: list[str]) -> None:
        super().__init__(HazelcastGridConfig())
        self.ids = ids
        self._client = object()

    def cluster_id(self) -> str:
        return self.ids.pop(0) if len(self.ids) > 1 else self.ids[0]

    def _partitions(self) -> list[int]:
        return [0, 1]


@pytest.fixture()
def fake_journal(monkeypatch: pytest.MonkeyPatch) -> None:
    def subscribe(client: object, name: str, partitions: list[int]) -> dict[int, Bounds]:
        return {p: Bounds(0, 5) for p in partitions}

    def read_partitions(*args: object) -> list[object]:
        return []

    monkeypatch.setattr(hz._journal, "subscribe", subscribe)
    monkeypatch.setattr(hz._journal, "read_partitions", read_partitions)


@pytest.mark.usefixtures("fake_journal")
def test_a_restart_between_the_lineage_check_and_the_bounds_is_a_lost_position() -> None:
    grid = _SwitchingCluster(["A", "B"])  # the position's cluster, then the new one
    with pytest.raises(PositionLostError) as lost:
        grid.read_changes("m", Position("A", {"0": 5, "1": 5}), 10)
    assert lost.value.detail == "lineage"


@pytest.mark.usefixtures("fake_journal")
def test_a_restart_while_taking_a_position_is_an_error() -> None:
    with pytest.raises(GridError, match="restarted"):
        _SwitchingCluster(["A", "B"]).end_position("m")
    assert _SwitchingCluster(["A"]).end_position("m") == Position("A", {"0": 5, "1": 5})


def test_an_unreachable_cluster_is_a_grid_error() -> None:
    grid = HazelcastAdapter(HazelcastGridConfig(members=("127.0.0.1:1",), connect_timeout_s=0.5))
    with pytest.raises(GridError, match="cannot reach cluster 'gridstream'"):
        grid.open()
    with pytest.raises(GridError, match="not open"):
        grid.cluster_id()
