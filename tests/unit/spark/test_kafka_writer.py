"""The exactly-once Kafka writer's pure logic: markers, slots, decisions, checks."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from gridstream.errors import ConfigError, KafkaClientError, SparkError
from gridstream.spark._txn_timeout import broker_max
from gridstream.spark.kafka_writer import (
    KafkaExactlyOnceWriter,
    Marker,
    check_transaction_timeout,
    decide,
    marker_partition,
    match_slots,
    transactional_id,
)

CONTENT = "10:ab:cd"


def _marker(batch: int, slots: int = 4, records: int = 10) -> Marker:
    return Marker("q-1", 2, batch, slots, records, CONTENT)


def test_marker_round_trips() -> None:
    marker = _marker(7)
    assert Marker.decode(marker.encode()) == marker
    left_out = Marker("q-1", 2, 7, 0, 8, "10:t[0]@0-9", dropped=2)
    assert Marker.decode(left_out.encode()) == left_out


def test_a_marker_written_before_it_counted_left_out_rows_reads_none() -> None:
    import orjson

    old = orjson.dumps({"query": "q", "slot": 1, "batch": 3, "slots": 0, "records": 5,
                        "content": "5:a:b", "ts": 1})
    assert Marker.decode(old) == Marker("q", 1, 3, 0, 5, "5:a:b", 0)


@pytest.mark.parametrize("value", [b"not json", b"{}", b'{"query": "q", "slot": "x"}'])
def test_malformed_marker_is_a_spark_error(value: bytes) -> None:
    with pytest.raises(SparkError, match="malformed commit marker"):
        Marker.decode(value)


def test_no_marker_or_an_older_batch_is_written() -> None:
    assert decide(None, 0, 4, 10, CONTENT) is True
    assert decide(_marker(4), 5, 4, 10, CONTENT) is True


def test_a_marker_of_this_batch_with_the_same_rows_is_skipped() -> None:
    assert decide(_marker(5), 5, 4, 10, CONTENT) is False


def test_a_marker_ahead_of_the_batch_is_refused() -> None:
    with pytest.raises(SparkError, match="rolled back"):
        decide(_marker(9), 5, 4, 10, CONTENT)


@pytest.mark.parametrize(("slots", "records", "content"), [
    (3, 10, CONTENT), (4, 11, CONTENT), (4, 10, "10:ab:ce")])
def test_a_rerun_with_other_rows_is_refused(slots: int, records: int, content: str) -> None:
    with pytest.raises(SparkError, match="not deterministic"):
        decide(_marker(5), 5, slots, records, content)


def test_a_fresh_batch_takes_slots_in_the_order_of_its_contents() -> None:
    first = match_slots([(0, 10, "10:5:1"), (1, 12, "12:3:2"), (2, 10, "10:4:9"),
                         (3, 0, "0:0:0")], {}, 5)
    again = match_slots([(0, 10, "10:4:9"), (1, 0, "0:0:0"), (2, 12, "12:3:2"),
                         (3, 10, "10:5:1")], {}, 5)
    assert sorted(first.values()) == sorted(again.values())
    assert first[2] == (0, "10:4:9") and again[0] == (0, "10:4:9")
    assert first[1] == again[2] == (2, "12:3:2")
    assert 3 not in first and 1 not in again   # empty partitions get no slot


def test_a_partition_committed_by_an_earlier_run_keeps_its_slot_wherever_it_is_now() -> None:
    """The earlier run wrote by partition index (slot 3: content 10:5:1); the re-run
    has those rows in partition 0: partition 0 takes slot 3 (its task skips it), and
    the others take the slots no marker of the batch holds."""
    committed = {3: Marker("q", 3, 5, 0, 10, "10:5:1"),
                 1: Marker("q", 1, 4, 0, 7, "7:1:1")}   # an older batch: free
    slots = match_slots([(0, 10, "10:5:1"), (1, 12, "12:3:2"), (2, 10, "10:4:9")], committed, 5)
    assert slots == {0: (3, "10:5:1"), 2: (0, "10:4:9"), 1: (1, "12:3:2")}


def test_equal_contents_take_one_marker_each() -> None:
    slots = match_slots([(0, 5, "5:1:1"), (1, 5, "5:1:1")], {}, 2)
    assert sorted(slots.values()) == [(0, "5:1:1"), (1, "5:1:1")]
    one = match_slots([(0, 5, "5:1:1"), (1, 5, "5:1:1")],
                      {4: Marker("q", 4, 2, 0, 5, "5:1:1")}, 2)
    assert sorted(one.values()) == [(0, "5:1:1"), (4, "5:1:1")]


def test_slots_of_a_query_spread_over_the_marker_partitions() -> None:
    parts = {marker_partition("q-1", slot, 8) for slot in range(8)}
    assert parts == set(range(8))
    assert marker_partition("q-1", 3, 1) == 0


def test_transactional_ids_hold_the_slot_and_no_attempt() -> None:
    assert transactional_id("gridstream-spark-copy-q", 3) == "gridstream-spark-copy-q-3"
    writer = KafkaExactlyOnceWriter("b:9092", name="copy", topic="t")
    assert writer.transactional_id("q", 3) == "gridstream-spark-copy-q-3"


@pytest.mark.parametrize(("timeout_ms", "trigger"), [(10_000, "5 seconds"),
                                                      (60_000, "1 minute"), (0, None)])
def test_a_transaction_timeout_within_twice_the_trigger_is_a_config_error(
        timeout_ms: int, trigger: str | None) -> None:
    with pytest.raises(ConfigError, match="transaction.timeout.ms"):
        check_transaction_timeout(timeout_ms, trigger)
    with pytest.raises(ConfigError, match="transaction.timeout.ms"):
        KafkaExactlyOnceWriter("b:9092", name="w", topic="t", transaction_timeout_ms=timeout_ms,
                               trigger=trigger)


def test_transaction_timeout_checks_that_pass() -> None:
    check_transaction_timeout(60_000, "10 seconds", broker_max_ms=900_000)
    check_transaction_timeout(60_000, "available_now")


def test_a_timeout_above_the_broker_maximum_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"transaction\.max\.timeout\.ms \(900000\)"):
        check_transaction_timeout(1_000_000, None, broker_max_ms=900_000)


def test_a_malformed_trigger_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="trigger"):
        check_transaction_timeout(60_000, "often")


@pytest.mark.parametrize("key", ["transactional.id", "enable.idempotence", "acks"])
def test_properties_the_writer_owns_are_refused(key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        KafkaExactlyOnceWriter("b:9092", name="w", topic="t", properties={key: "x"})


def test_a_name_with_a_slash_is_refused() -> None:
    with pytest.raises(ConfigError, match="name"):
        KafkaExactlyOnceWriter("b:9092", name="a/b", topic="t")


def test_secrets_never_show_in_the_repr() -> None:
    writer = KafkaExactlyOnceWriter("b:9092", name="w", topic="t", properties={
        "sasl.password": "hunter2-secret", "sasl.username": "me"})
    text = repr(writer)
    assert "hunter2-secret" not in text
    assert "me" in text and "***" in text


@pytest.mark.parametrize("marker", [
    Marker("q", 3, 5, 4, 10, "10:d:d"),       # rows in no partition now
    Marker("q", 1, 5, 2, 11, "11:b:b"),       # the same slot, other rows
    Marker("q", 6, 5, 8, 20, "20:a:b"),       # the rows of two partitions now, in one
])
def test_a_batch_committed_with_other_partitions_is_refused(marker: Marker) -> None:
    with pytest.raises(SparkError, match="another slot layout"):
        match_slots([(0, 10, "10:a:a"), (1, 10, "10:b:b")], {marker.slot: marker}, 5)


def test_each_marker_takes_its_own_partition() -> None:
    """Two markers of the batch with one content, and one partition with it: refused
    (the re-run has fewer copies of those rows than were committed)."""
    twice = {0: Marker("q", 0, 5, 0, 10, "10:a:a"), 1: Marker("q", 1, 5, 0, 10, "10:a:a")}
    with pytest.raises(SparkError, match="another slot layout"):
        match_slots([(0, 10, "10:a:a"), (1, 10, "10:b:b")], twice, 5)


@pytest.mark.parametrize("prop", ["transaction.timeout.ms", "bootstrap.servers"])
def test_properties_the_writer_sets_from_its_arguments_are_refused(prop: str) -> None:
    with pytest.raises(ConfigError, match=f"sets {prop} itself"):
        KafkaExactlyOnceWriter("b:9092", name="w", topic="t", properties={prop: "1"})


class _NoBrokerAdmin:
    """An admin client whose cluster cannot be reached."""

    def list_topics(self, timeout: float) -> object:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))


def test_a_broker_maximum_that_cannot_be_read_is_an_error() -> None:
    with pytest.raises(KafkaClientError, match=r"check_broker_timeout=False"):
        broker_max(_NoBrokerAdmin(), 1.0)  # type: ignore[arg-type]


def test_a_failed_task_is_told_by_its_own_error_line() -> None:
    from gridstream.spark.kafka_writer import _task_error

    wrapped = Exception("[PYTHON_EXCEPTION] An exception was thrown from the Python worker: "
                        "Traceback (most recent call last):\n  File \"x.py\", line 3, in f\n"
                        "    raise RuntimeError(\"task lost\")\nRuntimeError: task lost\n"
                        " SQLSTATE: 38000\n\tat org.apache.spark.api.python.Runner")
    assert _task_error(wrapped) == "RuntimeError: task lost"
    ours = Exception("Traceback:\ngridstream.errors.SparkError: refused\nValueError: x")
    assert _task_error(ours) == "gridstream.errors.SparkError: refused"
    assert _task_error(Exception("plain\nsecond")) == "plain"


def test_a_one_pass_retry_fences_the_earlier_attempt_before_it_reads_the_marker(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An earlier attempt still alive could commit between the retry's marker read and
    its producer's init: the init (which fences it, completing or aborting its commit)
    comes first, then the marker is read."""
    import pyarrow as pa

    from gridstream.kafka import KafkaProperties
    from gridstream.spark import _kafka_slots as slots

    calls: list[str] = []

    class _Txn:
        producer = None
        content = ""

        def fail(self) -> None:
            calls.append("abort")

        def failing(self) -> object:
            import contextlib
            return contextlib.nullcontext()

    class _Reader:
        def get(self, key: bytes, wait_s: float) -> Marker:
            calls.append("read marker")
            return Marker("q", 0, 5, 0, 2, "2:0:0")

    def open_slot(*args: object, **kwargs: object) -> _Txn:
        calls.append("init")
        return _Txn()

    monkeypatch.setattr(slots, "open_slot", open_slot)
    monkeypatch.setattr(slots, "_reader", lambda plan, slot: _Reader())
    monkeypatch.setattr(slots, "_is_retry", lambda: True)
    monkeypatch.setattr(slots, "_sums", lambda rows, producer, plan: (list(rows), "2:0:0")[1])
    plan = slots.SlotPlan(KafkaProperties({"bootstrap.servers": "b:9092"}), "t", "m", 1, "q",
                          "p", 5, {}, 1.0, 1.0, {}, False, partitioned=True)
    batch = pa.RecordBatch.from_pydict({"value": [b"a", b"b"]})
    out = list(slots._run_partitioned(plan, 0, iter([batch])))
    assert calls == ["init", "read marker", "abort"]
    assert out[0].to_pylist() == [{"slot": 0, "records": 2, "skipped": True, "dropped": 0}]


class _Recorder:
    """A producer that records what it is given."""

    def __init__(self) -> None:
        self.sent: list[tuple[object, ...]] = []

    def produce(self, topic: str, value: object, key: object, **kwargs: object) -> None:
        self.sent.append((topic, value, key, tuple(sorted(kwargs.items()))))

    def poll(self, timeout: float) -> int:
        return 0


def _plan(topic: str | None = "t") -> object:
    from gridstream.kafka import KafkaProperties
    from gridstream.spark._kafka_slots import SlotPlan

    return SlotPlan(KafkaProperties({}), topic, "m", 1, "q", "p", 0, {}, 1.0, 1.0)


def _rows(**columns: object) -> object:
    import pyarrow as pa

    from gridstream.spark._kafka_slots import H1, H2

    n = len(columns["value"])  # type: ignore[arg-type]
    big = 2**63 - 1
    return pa.RecordBatch.from_pydict({**columns, H1: pa.array([big] * n, pa.int64()),
                                       H2: pa.array([-3] * n, pa.int64())})


def test_a_batch_of_one_topic_is_produced_as_the_rows_of_its_topic_column() -> None:
    """The pipeline's batches name their topic per row (one value): each row goes to it,
    with no partition or headers; the hash sums are exact (no int64 overflow)."""
    import pyarrow as pa

    from gridstream.spark._kafka_slots import _sums

    producer = _Recorder()
    batch = _rows(key=pa.array([b"a", None], pa.binary()), value=[b"1", b"2"],
                  topic=["out", "out"])
    content = _sums(iter([batch, batch]), producer, None)  # type: ignore[arg-type]
    assert content == f"4:{4 * (2**63 - 1):x}:{-12:x}"
    assert producer.sent == [("out", b"1", b"a", ()), ("out", b"2", None, ())] * 2


def test_rows_of_several_topics_partitions_or_headers_are_produced_one_by_one() -> None:
    import pyarrow as pa

    from gridstream.spark._kafka_slots import _sums

    producer = _Recorder()
    headers = pa.array([[{"key": "h", "value": b"x"}], []],
                       pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
    batch = _rows(key=[b"a", b"b"], value=[b"1", b"2"], topic=["dead", None],
                  partition=pa.array([None, 3], pa.int32()), headers=headers)
    _sums(iter([batch]), producer, "t")  # type: ignore[arg-type]
    assert producer.sent == [
        ("dead", b"1", b"a", (("headers", [("h", b"x")]), ("partition", -1))),
        ("t", b"2", b"b", (("partition", 3),))]
    with pytest.raises(SparkError, match="have no topic and the writer no topic"):
        _sums(iter([_rows(value=[b"1"], topic=pa.array([None], pa.string()))]), producer,
              None)  # type: ignore[arg-type]
    producer.sent.clear()
    empty = _rows(value=pa.array([], pa.binary()), topic=pa.array([], pa.string()))
    assert _sums(iter([empty]), producer, None) == "0:0:0"  # type: ignore[arg-type]
    _sums(iter([_rows(value=[b"1"], topic=[""])]), producer, "t")  # type: ignore[arg-type]
    assert producer.sent == [("t", b"1", None, ())]  # an empty topic: the writer's
