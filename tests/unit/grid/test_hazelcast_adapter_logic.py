"""The Hazelcast adapter's pure parts: config, the fair share of a read, key and value checks."""

from __future__ import annotations

import pickle
import struct

import pytest
from hazelcast.core import HazelcastJsonValue
from hazelcast.errors import HazelcastError, HazelcastSerializationError
from hazelcast.serialization.data import Data

from gridstream.errors import ConfigError, GridError, PositionLostError
from gridstream.grid import Position, Write
from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig, _journal
from gridstream.grid.hazelcast import adapter as hz
from gridstream.grid.hazelcast._codec import JournalEvent
from gridstream.grid.hazelcast._journal import MAX_READ, Bounds, PartitionRead
from gridstream.grid.hazelcast._values import value_of


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
    assert value_of("m", HazelcastJsonValue('{"a": [1, {"b": null}]}')) == {"a": [1, {"b": None}]}
    for value in ("text", HazelcastJsonValue("[1]"), HazelcastJsonValue("{bad")):
        with pytest.raises(GridError, match="^cache 'm': "):
            value_of("m", value)
        with pytest.raises(GridError, match="^cache 'm', key 'k': "):
            value_of("m", value, "k")
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


def _data(type_id: int, text: str) -> Data:
    raw = text.encode()
    return Data(struct.pack(">iii", 0, type_id, len(raw)) + raw)


def _put(key: str, n: int) -> JournalEvent:
    return JournalEvent(1, _data(-11, key), _data(-130, f'{{"n": {n}}}'), None)


class FakeJournal:
    """Journals of string-keyed puts per partition; ``journals[p][seq]`` is an event."""

    def __init__(self, partitions: int) -> None:
        self.journals: dict[int, list[JournalEvent]] = {p: [] for p in range(partitions)}

    def subscribe(self, client: object, name: str, partitions: list[int]) -> dict[int, Bounds]:
        return {p: Bounds(0, len(self.journals[p])) for p in partitions}

    def read_partitions(self, client: object, name: str, starts: dict[int, int],
                        sizes: dict[int, int]) -> list[PartitionRead]:
        reads = []
        for p in sorted(sizes):
            events = self.journals[p][starts[p] : starts[p] + min(sizes[p], MAX_READ)]
            reads.append(PartitionRead(p, list(range(starts[p], starts[p] + len(events))),
                                       events))
        return reads


class _Partitions(HazelcastAdapter):
    def __init__(self, count: int, ids: list[str] | None = None) -> None:
        super().__init__(HazelcastGridConfig())
        self.count = count
        self.ids = ids or ["A"]
        self._client = object()

    def cluster_id(self) -> str:
        return self.ids.pop(0) if len(self.ids) > 1 else self.ids[0]

    def _partitions(self) -> list[int]:
        return list(range(self.count))


@pytest.fixture()
def journal(monkeypatch: pytest.MonkeyPatch) -> FakeJournal:
    fake = FakeJournal(271)
    monkeypatch.setattr(hz._journal, "subscribe", fake.subscribe)
    monkeypatch.setattr(hz._journal, "read_partitions", fake.read_partitions)
    return fake


def test_a_restart_after_the_journal_read_is_a_lost_position_with_no_changes(
        journal: FakeJournal) -> None:
    journal.journals[0] = [_put("a", 1), _put("b", 2)]
    grid = _Partitions(271, ["A", "A", "A", "B"])  # restarted after the read
    start = Position("A", dict.fromkeys(map(str, range(271)), 0))
    with pytest.raises(PositionLostError) as lost:
        grid.read_changes("m", start, 10)
    assert lost.value.detail == "lineage"
    assert [c.key for c in _Partitions(271).read_changes("m", start, 10).changes] == ["a", "b"]


def test_successive_reads_by_new_adapters_rotate_over_every_partition(
        journal: FakeJournal) -> None:
    for p in range(271):
        journal.journals[p] = [_put(f"k{p}-{i}", i) for i in range(10)]
    position = Position("A", dict.fromkeys(map(str, range(271)), 0))
    served: set[str] = set()
    for _ in range(3):  # 3 reads of 100 cover 271 partitions, each by a new adapter
        batch = _Partitions(271).read_changes("m", position, 100)
        assert len(batch.changes) == 100
        served |= {c.stream for c in batch.changes}
        position = Position.from_json(batch.position.to_json())
    assert len(served) == 271


def test_a_recreated_journal_longer_than_the_position_is_a_lost_position(
        journal: FakeJournal) -> None:
    journal.journals[5] = [_put("a", n) for n in range(3)]
    grid = _Partitions(271)
    read = grid.read_changes("m", grid.start_position("m"), 100)
    assert [c.value for c in read.changes] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert grid.read_changes("m", read.position, 100).changes == []
    stored = Position.from_json(read.position.to_json())
    journal.journals[5] = [_put(k, 7) for k in ("x", "y", "z")]  # destroyed, re-created
    with pytest.raises(PositionLostError) as lost:
        grid.read_changes("m", stored, 100)
    assert lost.value.detail == "recreated"
    journal.journals[5] = [_put("a", n) for n in range(3)] + [_put("b", 1)]  # same journal
    assert [c.key for c in grid.read_changes("m", stored, 100).changes] == ["b"]


def test_an_end_position_marks_the_last_event_of_each_partition(journal: FakeJournal) -> None:
    journal.journals[3] = [_put("a", 1)]
    grid = _Partitions(271)
    end = grid.end_position("m")
    assert set(end.marks) == {"3"} and end.next_seqs["3"] == 1
    journal.journals[3] = [_put("b", 1), _put("c", 2)]
    with pytest.raises(PositionLostError) as lost:
        grid.read_changes("m", end, 10)
    assert lost.value.detail == "recreated"


def test_positions_without_marks_still_read() -> None:
    old = Position.from_json('{"lineage": "A", "next": {"0": 3}}')
    assert old == Position("A", {"0": 3}) and old.marks == {}
    assert Position.from_json(Position("A", {"0": 3}, {"0": "ab"}).to_json()).marks == {"0": "ab"}
    with pytest.raises(ConfigError):
        Position.from_json('{"lineage": "A", "next": {}, "marks": {"0": 1}}')


@pytest.fixture()
def fake_journal(monkeypatch: pytest.MonkeyPatch) -> None:
    def subscribe(client: object, name: str, partitions: list[int]) -> dict[int, Bounds]:
        return {p: Bounds(0, 5) for p in partitions}

    def read_partitions(client: object, name: str, starts: dict[int, int],
                        sizes: dict[int, int]) -> list[PartitionRead]:
        return [PartitionRead(p, [starts[p]], [_put("a", 1)]) for p in sorted(sizes)]

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
    end = _SwitchingCluster(["A"]).end_position("m")
    assert (end.lineage, end.next_seqs, set(end.marks)) == ("A", {"0": 5, "1": 5}, {"0", "1"})


def test_an_unreachable_cluster_is_a_grid_error() -> None:
    grid = HazelcastAdapter(HazelcastGridConfig(members=("127.0.0.1:1",), connect_timeout_s=0.5))
    with pytest.raises(GridError, match="cannot reach cluster 'gridstream'"):
        grid.open()
    with pytest.raises(GridError, match="not open"):
        grid.cluster_id()


class _FailingSerializer:
    def to_object(self, data: Data) -> object:
        raise HazelcastSerializationError("no serializer for type id 77")


class _FakeClient:
    _serialization_service = _FailingSerializer()


def test_undecodable_keys_and_values_are_grid_errors() -> None:
    grid = HazelcastAdapter(HazelcastGridConfig())
    grid._client = _FakeClient()
    bad_utf8 = Data(struct.pack(">iii", 0, -11, 2) + b"\xff\xfe")
    unknown = Data(struct.pack(">iii", 0, 77, 0))
    for decode, data in ((grid.decode_key, bad_utf8), (grid.decode_key, unknown),
                         (grid.decode_value, unknown)):
        with pytest.raises(GridError, match="cannot be read") as caught:
            decode("m", data)
        assert isinstance(caught.value.__cause__,
                          (HazelcastSerializationError, UnicodeDecodeError))


def test_a_member_stack_trace_is_left_out_of_messages() -> None:
    error = HazelcastError(
        "Exception from server: com.hazelcast.X: it broke\n"
        " \tat a.B.c(B.java:1)\n\tat d.E.f(E.java:2)",
        HazelcastError("Exception from server: java.io.IOException: disk\n \tat g.H.i(H.java:3)"),
    )
    assert _journal.brief(error) == (
        "Exception from server: com.hazelcast.X: it broke; "
        "Caused by: Exception from server: java.io.IOException: disk"
    )
