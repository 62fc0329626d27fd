"""What the exactly-once writer keeps across batches: when tasks may skip the marker
check, and which kept producer a task may use (pure logic, fakes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gridstream.kafka import KafkaProperties
from gridstream.spark import _producers
from gridstream.spark.kafka_writer import KafkaExactlyOnceWriter


class _Context:
    def __init__(self, props: dict[str, str]) -> None:
        self.props = props

    def getLocalProperty(self, key: str) -> str | None:  # noqa: N802 - Spark's name
        return self.props.get(key)


class _Session:
    def __init__(self, props: dict[str, str]) -> None:
        self.sparkContext = _Context(props)  # noqa: N815 - Spark's name


class _Batch:
    def __init__(self, run: str | None, query: str = "q1") -> None:
        props = {"sql.streaming.queryId": query}
        if run is not None:
            props["spark.jobGroup.id"] = run
        self.sparkSession = _Session(props)  # noqa: N815 - Spark's name


@pytest.fixture()
def writer(monkeypatch: pytest.MonkeyPatch) -> KafkaExactlyOnceWriter:
    w = KafkaExactlyOnceWriter("127.0.0.1:1", name="w", topic="t")

    def prepare(df: Any, query_id: str, slots: int) -> None:
        w._prepared_for = query_id
        w._clean = None

    monkeypatch.setattr(w, "_prepare", prepare)
    return w


def test_only_the_batch_right_after_a_completed_one_of_the_same_run_skips_the_check(
        writer: KafkaExactlyOnceWriter) -> None:
    run_a = _Batch("run-a")
    assert writer.begin(run_a, "q1", 5, 1)  # type: ignore[arg-type]  # first of the run
    writer.completed("q1", 5)
    assert not writer.begin(run_a, "q1", 6, 1)  # type: ignore[arg-type]
    # batch 6 fails; the runner restarts the query in this process: a new run
    run_b = _Batch("run-b")
    assert writer.begin(run_b, "q1", 6, 1)  # type: ignore[arg-type]
    writer.completed("q1", 6)
    assert not writer.begin(run_b, "q1", 7, 1)  # type: ignore[arg-type]
    # 7 failed (never completed): the same run asking for 7 again checks
    assert writer.begin(run_b, "q1", 7, 1)  # type: ignore[arg-type]


def test_a_batch_after_a_completed_one_of_another_run_or_query_checks(
        writer: KafkaExactlyOnceWriter) -> None:
    writer.begin(_Batch("r"), "q1", 1, 1)  # type: ignore[arg-type]
    writer.completed("q1", 1)
    assert writer.begin(_Batch("other"), "q1", 2, 1)  # type: ignore[arg-type]
    writer.completed("q1", 2)
    assert writer.begin(_Batch("other", "q2"), "q2", 3, 1)  # type: ignore[arg-type]


def test_without_a_run_id_every_batch_checks(writer: KafkaExactlyOnceWriter) -> None:
    batch = _Batch(None)
    assert writer.begin(batch, "q1", 1, 1)  # type: ignore[arg-type]
    writer.completed("q1", 1)
    assert writer.begin(batch, "q1", 2, 1)  # type: ignore[arg-type]


class _Producer:
    closed = 0

    def purge(self, **kwargs: Any) -> None:
        return None

    def close(self) -> None:
        _Producer.closed += 1


def test_a_kept_producer_is_used_until_another_one_of_its_id_is_initialised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_producers, "_OWNERS", tmp_path)
    monkeypatch.setattr(_producers, "_TXN", {})
    props = KafkaProperties({"bootstrap.servers": "127.0.0.1:1"})
    made: list[_Producer] = []

    def init() -> Any:
        made.append(_Producer())
        return made[-1]

    first = _producers.transactional(props, "id-0", init)
    assert _producers.transactional(props, "id-0", init) is first and len(made) == 1
    _producers.claim("127.0.0.1:1", "id-0")  # another worker initialised id-0 since
    second = _producers.transactional(props, "id-0", init)
    assert second is not first and len(made) == 2  # fenced: initialised again
    assert _producers.transactional(props, "id-0", init) is second
    other = _producers.transactional(props, "id-1", init)  # ids are kept apart
    assert other is not second and len(made) == 3


def test_a_worker_keeps_a_bounded_number_of_producers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_producers, "_OWNERS", tmp_path)
    monkeypatch.setattr(_producers, "_TXN", {})
    props = KafkaProperties({"bootstrap.servers": "127.0.0.1:1"})
    for i in range(_producers._MAX_KEPT + 5):
        _producers.transactional(props, f"id-{i}", lambda: _Producer())  # type: ignore[arg-type, return-value]
    assert len(_producers._TXN) == _producers._MAX_KEPT


class _FullQueue:
    """A producer whose local queue is full for the first produce."""

    def __init__(self) -> None:
        self.full, self.polled, self.sent, self.committed = 1, 0, 0, False

    def produce(self, *args: Any, **kwargs: Any) -> None:
        if self.full:
            self.full -= 1
            raise BufferError("Local: Queue full")
        self.sent += 1

    def poll(self, timeout: float) -> int:
        self.polled += 1
        return 0

    def commit_transaction(self, timeout: float) -> None:
        self.committed = True


def test_the_commit_marker_waits_for_room_in_a_full_queue() -> None:
    """A slot of many records fills the producer's queue: its marker must wait for room,
    not fail the slot (it did, with BufferError, at 200,000 records a batch)."""
    from gridstream.spark._kafka_slots import SlotPlan, SlotTxn

    plan = SlotPlan(KafkaProperties({"bootstrap.servers": "127.0.0.1:1"}), None, "m", 1,
                    "q", "p", 0, {}, 5.0, 5.0)
    producer = _FullQueue()
    SlotTxn(plan, 0, "origin", producer).commit(10)  # type: ignore[arg-type]
    assert producer.committed and producer.sent == 1 and producer.polled >= 1


def _made_configs(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The configurations ``new_producer`` makes its producers with (none is made)."""
    configs: list[dict[str, Any]] = []

    class _Made:
        def __init__(self, config: dict[str, Any]) -> None:
            configs.append(config)

        def init_transactions(self, timeout: float) -> None:
            return None

    monkeypatch.setattr(_producers, "Producer", _Made)
    return configs


def test_a_new_transactional_producer_connects_without_the_default_backoff(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A slot moving to another worker makes a new producer: librdkafka's default
    reconnect.backoff.ms (100) made each one's init_transactions take 53 ms on loopback;
    the operator's own value still wins."""
    configs = _made_configs(monkeypatch)
    _producers.new_producer(KafkaProperties({"bootstrap.servers": "b:1"}), "t-0", 5.0)
    _producers.new_producer(KafkaProperties({"bootstrap.servers": "b:1",
                                               "reconnect.backoff.ms": 250}), "t-1", 5.0)
    assert configs[0]["reconnect.backoff.ms"] == 10
    assert configs[1]["reconnect.backoff.ms"] == 250
    assert [c["transactional.id"] for c in configs] == ["t-0", "t-1"]


def test_a_new_transactional_producer_connects_to_every_broker_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With librdkafka's sparse connections a new producer's init_transactions found no
    connected broker to ask for its coordinator about one time in ten and waited 0.5 s
    for librdkafka's coordinator timer (every such exactly-once batch +0.4 s); the
    operator's own value still wins."""
    configs = _made_configs(monkeypatch)
    _producers.new_producer(KafkaProperties({"bootstrap.servers": "b:1"}), "t-0", 5.0)
    _producers.new_producer(KafkaProperties({"bootstrap.servers": "b:1",
                                               "enable.sparse.connections": True}), "t-1", 5.0)
    assert configs[0]["enable.sparse.connections"] is False
    assert configs[1]["enable.sparse.connections"] is True


def test_the_pooled_idempotent_producer_reports_failures_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    configs: list[dict[str, Any]] = []
    monkeypatch.setattr(_producers, "Producer", lambda config: configs.append(config) or config)
    monkeypatch.setattr(_producers, "_PLAIN", {})
    _producers.idempotent(KafkaProperties({"bootstrap.servers": "b:1"}))
    assert configs[0]["delivery.report.only.error"] is True
