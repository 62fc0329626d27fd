"""The source's write mode: what a partition commits, aborts or reports, the slot plan
handed to the tasks, and the adaptive bound (pure logic, fakes)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from gridstream.connect.config import SourceConnectorConfig
from gridstream.connect.source import produce
from gridstream.connect.source.datasource import GridStreamReader, source_options
from gridstream.connect.source.offsets import CacheState, SourceOffset
from gridstream.errors import KafkaClientError
from gridstream.grid.contract import Position
from gridstream.kafka import KafkaProperties
from gridstream.spark._kafka_slots import Marker, SlotPlan

PROPS = KafkaProperties({"bootstrap.servers": "127.0.0.1:1", "sasl.password": "hunter2"})
SPEC = produce.SinkSpec(True, "w", "markers", 1, 5.0, 9.0)


class _Producer:
    def __init__(self, undelivered: int = 0) -> None:
        self.sent: list[tuple[str, Any]] = []
        self.undelivered = undelivered

    def produce(self, topic: str, value: Any, key: Any, **kwargs: Any) -> None:
        self.sent.append((topic, value))

    def flush(self, timeout: float) -> int:
        return self.undelivered

    def purge(self, **kwargs: Any) -> None:
        return None

    def close(self) -> None:
        return None


class _Txn:
    def __init__(self) -> None:
        self.producer = _Producer()
        self.committed: int | None = None
        self.failed = False

    def commit(self, records: int, slots: int | None = None) -> None:
        self.committed = records

    def fail(self) -> None:
        self.failed = True


def _plan() -> SlotPlan:
    return SlotPlan(PROPS, None, "markers", 1, "q", "p", 3, {}, 5.0, 9.0, {}, True)


def _rows(monkeypatch: pytest.MonkeyPatch, txn: _Txn | None) -> produce.ProducingRows:
    monkeypatch.setattr(produce, "open_slot", lambda plan, slot, content: txn)
    monkeypatch.setattr(produce, "_ensure_topic", lambda props, topic, parts: None)
    return produce.ProducingRows(SPEC, PROPS, _plan(), 0, "origin", "dlq")


def test_a_partition_commits_its_records_and_reports_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    txn = _Txn()
    rows = _rows(monkeypatch, txn)
    rows.add("t", b"k", b"v", None, "ok", "c")
    rows.add("dlq", b"k", b"raw", [("gs.error.reason", b"x")], "dead", "c")
    rows.add(None, None, None, None, "filtered", "c")
    report = rows.finish()
    assert txn.committed == 2 and not txn.failed
    assert report["counts"] == {"ok": 1, "dead": 1, "filtered": 1} and report["written"] == 2


def test_a_record_the_policy_stops_on_aborts_the_partition(
        monkeypatch: pytest.MonkeyPatch) -> None:
    txn = _Txn()
    rows = _rows(monkeypatch, txn)
    rows.add("t", b"k", b"v", None, "ok", "c")
    rows.add(None, None, None, None, "error", "c", "c/k2", "convert: bad")
    rows.add("t", b"k3", b"v", None, "ok", "c")  # counted, not produced
    report = rows.finish()
    assert txn.failed and txn.committed is None
    assert report["error"] == ("c/k2", "convert: bad", "c") and report["counts"]["ok"] == 2
    assert len(txn.producer.sent) == 1


def test_a_slot_an_earlier_run_committed_writes_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _rows(monkeypatch, None)
    rows.add("t", b"k", b"v", None, "ok", "c")
    report = rows.finish()
    assert report["committed_earlier"] and report["written"] == 0


def test_a_failed_partition_aborts_its_open_transaction(
        monkeypatch: pytest.MonkeyPatch) -> None:
    txn = _Txn()
    rows = _rows(monkeypatch, txn)
    rows.add("t", b"k", b"v", None, "ok", "c")
    rows.fail()
    assert txn.failed and txn.committed is None


def test_at_least_once_fails_when_records_stay_undelivered(
        monkeypatch: pytest.MonkeyPatch) -> None:
    producer = _Producer(undelivered=3)
    monkeypatch.setattr(produce._producers, "idempotent", lambda props: producer)
    monkeypatch.setattr(produce._producers, "discard", lambda p: None)
    monkeypatch.setattr(produce._producers, "undelivered", lambda p: [])  # none failed
    monkeypatch.setattr(produce, "_ensure_topic", lambda props, topic, parts: None)
    spec = produce.SinkSpec(False, "", "", 1, 5.0, 5.0)
    rows = produce.ProducingRows(spec, PROPS, None, 0, "origin", None)
    rows.add("t", b"k", b"v", None, "ok", "c")
    with pytest.raises(KafkaClientError, match="3 still queued") as caught:
        rows.finish()
    assert "hunter2" not in str(caught.value)


def test_the_slot_plan_reaches_the_tasks_without_secrets_and_with_its_markers() -> None:
    marker = Marker("q", 0, 3, 0, 10, "origin")
    plan = SlotPlan(PROPS, None, "markers", 4, "q", "p", 3, {}, 5.0, 9.0, {0: marker}, True)
    text = produce.batch_plan(plan)
    assert "hunter2" not in text and "127.0.0.1" not in text
    back = produce.plan_from(text, PROPS, SPEC)
    assert back.committed == {0: marker} and back.check and back.marker_partitions == 4
    assert (back.query_id, back.prefix, back.batch_id) == ("q", "p", 3)


class _Adapter:
    shared_stream = False


def test_the_bound_follows_the_measured_rate_under_exactly_once() -> None:
    config = SourceConnectorConfig.model_validate({
        "name": "s", "grid": {"kind": "space", "data_dir": "/d", "space_name": "x"},
        "checkpoint": "/tmp/c", "transaction.timeout.ms": 8000, "pollInterval": 100,
        "maxChangesPerBatch": 50_000})
    reader = GridStreamReader(source_options(config, ()))
    assert reader.bound() == 4_000  # 2,000 changes/s assumed, a quarter of 8 s
    begin = SourceOffset({"c": CacheState(Position("L", {"0": 0}))}, 1)
    end = SourceOffset({"c": CacheState(Position("L", {"0": 4_000}))}, 2)
    reader._adapter = _Adapter()  # type: ignore[assignment]
    reader._planned, reader._planned_from = end, begin
    reader._planned_at = time.monotonic() - 0.2  # 4,000 changes in 0.2 s: 20,000/s
    reader._measure(end)  # Spark asks for the next batch from its end: it has run
    assert 30_000 <= reader.bound() <= 40_000
    reader._planned, reader._planned_from = end, begin
    reader._planned_at = time.monotonic() - 100.0  # slow: 40 changes/s
    reader._measure(end)
    assert reader.bound() == 1_000  # the floor


def test_batches_below_their_bound_never_lower_the_rate() -> None:
    """A trigger slower than a quarter of the transaction timeout: every small batch's
    time includes the wait for the next trigger; taking it as the rate shrank the bound
    batch after batch to its floor (a backlog under steady load then never drained)."""
    config = SourceConnectorConfig.model_validate({
        "name": "s", "grid": {"kind": "space", "data_dir": "/d", "space_name": "x"},
        "checkpoint": "/tmp/c", "transaction.timeout.ms": 60_000, "pollInterval": 20_000})
    reader = GridStreamReader(source_options(config, ()))
    reader._adapter = _Adapter()  # type: ignore[assignment]
    before = reader.bound()
    for n in range(12):
        begin = SourceOffset({"c": CacheState(Position("L", {"0": n * 5_000}))}, 1)
        end = SourceOffset({"c": CacheState(Position("L", {"0": (n + 1) * 5_000}))}, 2)
        reader._planned, reader._planned_from = end, begin
        reader._planned_bound = reader.bound()
        reader._planned_at = time.monotonic() - 20.0  # a small batch, then the trigger
        reader._measure(end)
    assert reader.bound() == before


def test_the_log_consumer_is_named_by_the_checkpoints_place(tmp_path: Any,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    from gridstream.connect.source.datasource import consumer_name

    monkeypatch.chdir(tmp_path)
    here = consumer_name("src", "ck")
    assert here == consumer_name("src", str(tmp_path / "ck"))  # relative or absolute
    assert here == consumer_name("src", f"file://{tmp_path / 'ck'}")
    assert here != consumer_name("src", "other") != consumer_name("other", "ck")
    assert here.startswith("gridstream-source-src-")


def test_caches_of_a_shared_log_take_one_end_per_plan(tmp_path: Any) -> None:
    """The log moves between two caches' readings of its end: each cache then had an end
    of its own, so they never grouped into one read again (a scan, a transaction and a
    state rebuild per cache and batch)."""
    from gridstream.connect.config import FailoverPolicy
    from gridstream.connect.source.datasource import _AdapterView
    from gridstream.connect.source.offsets import Planner

    class _Moving:
        shared_stream = True
        seq = 100

        def list_caches(self) -> list[str]:
            return ["a", "b", "c"]

        def span(self, cache: str, since: Any = None) -> tuple[Position, Position]:
            self.seq += 7  # writes go on while the plan reads
            return Position("L", {"log": 1}), Position("L", {"log": self.seq})

        def end_position(self, cache: str) -> Position:
            return self.span(cache)[1]

        def cut(self, cache: str, begin: Position, end: Position) -> Position:
            return end

    adapter = _Moving()
    start = SourceOffset({c: CacheState(Position("L", {"log": 50})) for c in "abc"}, 1)
    planner = Planner(policy=FailoverPolicy.BACKLOG, on_position_lost="fail",
                      load_initial=False, batch_size=10)
    planner.first = False
    planned = planner.plan(start, _AdapterView(adapter, tmp_path), 2, 10_000)  # type: ignore[arg-type]
    assert len({s.pos.next_seqs["log"] for s in planned.caches.values()}) == 1


def test_a_quiet_grid_is_not_checked_again_before_its_back_off_ends(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """After a plan that found nothing, the next triggers answer the same offset without
    reading the grid until the back-off ends (the planner ran on every trigger: a quiet
    Hazelcast source read every partition's journal bounds ten times a second)."""
    config = SourceConnectorConfig.model_validate({
        "name": "s", "grid": {"kind": "space", "data_dir": "/d", "space_name": "x"},
        "checkpoint": "/tmp/c", "pollInterval": 100, "idlePollInterval": 2000})
    reader = GridStreamReader(source_options(config, ()))
    reader._adapter = _Adapter()  # type: ignore[assignment]
    start = SourceOffset({"c": CacheState(Position("L", {"0": 5}))}, 1)
    moved = SourceOffset({"c": CacheState(Position("L", {"0": 9}))}, 2)
    plans: list[SourceOffset] = []
    answer: list[SourceOffset | None] = [None]  # None: nothing moved (start itself)

    def plan(begin: SourceOffset, *args: Any) -> SourceOffset:
        plans.append(begin)
        reader._planner.first = False
        return answer[0] or begin

    monkeypatch.setattr(reader._planner, "plan", plan)
    monkeypatch.setattr(reader, "_acknowledge", lambda offset: None)
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    assert reader.latestOffset(start.to_dict()) == start.to_dict()  # the first plan
    assert reader.latestOffset(start.to_dict()) == start.to_dict()  # the same trigger
    assert len(plans) == 1
    clock[0] += 0.1
    reader.latestOffset(start.to_dict())
    assert len(plans) == 2  # the next trigger checks
    clock[0] += 0.1
    assert reader.latestOffset(start.to_dict()) == start.to_dict()
    assert len(plans) == 2  # backing off: 0.2 s now
    clock[0] += 0.1
    answer[0] = moved
    assert reader.latestOffset(start.to_dict()) == moved.to_dict()
    assert len(plans) == 3
    reader.latestOffset(moved.to_dict())  # a change found: checked at the next trigger
    assert len(plans) == 4
    reader._target = {}  # an available-now run never backs off
    answer[0] = None
    for _ in range(3):
        reader.latestOffset(moved.to_dict())
    assert len(plans) == 7


def test_a_failed_at_least_once_partition_drops_its_producer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What it queued goes with it: the next partition's flush does not wait for those
    records or take their failures."""
    producer = _Producer(undelivered=0)
    dropped: list[object] = []
    monkeypatch.setattr(produce._producers, "idempotent", lambda props: producer)
    monkeypatch.setattr(produce._producers, "undelivered", lambda p: [])
    monkeypatch.setattr(produce._producers, "discard", dropped.append)
    monkeypatch.setattr(produce, "_ensure_topic", lambda props, topic, parts: None)
    spec = produce.SinkSpec(False, "", "", 1, 5.0, 5.0)
    rows = produce.ProducingRows(spec, PROPS, None, 0, "origin", None)
    rows.add("t", b"k", b"v", None, "ok", "c")
    rows.fail()
    assert dropped == [producer]
