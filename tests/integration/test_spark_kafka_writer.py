"""The exactly-once Kafka writer against the real broker and Spark: a re-run batch is
skipped, a batch re-run with other rows is refused, an older writer is fenced and its
open transaction aborted, the broker's timeout limit and speculation are refused."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer

from gridstream.errors import ConfigError, SparkError
from gridstream.spark.kafka_writer import KafkaExactlyOnceWriter
from tests.integration.test_spark_kafka_writer_crash import read_all


def _rows(spark: Any, numbers: range, partitions: int = 3) -> Any:
    data = [(str(i).encode(), str(i).encode()) for i in numbers]
    return spark.createDataFrame(spark.sparkContext.parallelize(data, partitions),
                                 "key binary, value binary")


def _writer(bootstrap: str, topic: str, **kwargs: Any) -> KafkaExactlyOnceWriter:
    return KafkaExactlyOnceWriter(bootstrap, name="test", topic=topic,
                                  query_id=uuid.uuid4().hex, **kwargs)


def _values(bootstrap: str, topic: str) -> list[int]:
    seen, _ = read_all(bootstrap, topic)
    return sorted(int(v) for v, n in seen.items() for _ in range(n))


def test_a_rerun_of_a_committed_batch_is_skipped(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(3)
    writer = _writer(kafka_bootstrap, topic)
    first = writer(_rows(spark, range(300)), 0)
    again = writer(_rows(spark, range(300)), 0)       # Spark re-runs batch 0
    then = writer(_rows(spark, range(300, 500)), 1)
    assert (first.written, first.skipped, first.slots) == (300, 0, 3)
    assert (again.written, again.skipped) == (0, 300)
    assert (then.written, then.skipped) == (200, 0)
    assert _values(kafka_bootstrap, topic) == list(range(500))


def test_a_rerun_whose_partitions_come_in_another_order_is_skipped(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    """Spark's Kafka source may order a re-run batch's partitions differently: the same
    rows in other partition indexes are still recognised as committed."""
    topic = topic_factory(3)
    writer = _writer(kafka_bootstrap, topic)
    chunks = [list(range(0, 100)), list(range(100, 200)), list(range(200, 300))]

    def rows(order: list[int]) -> Any:
        data = [(str(i).encode(), str(i).encode()) for c in order for i in chunks[c]]
        return spark.createDataFrame(spark.sparkContext.parallelize(data, 3),
                                     "key binary, value binary")

    first = writer(rows([0, 1, 2]), 0)
    again = writer(rows([2, 0, 1]), 0)
    assert (first.written, first.skipped) == (300, 0)
    assert (again.written, again.skipped) == (0, 300)
    assert _values(kafka_bootstrap, topic) == list(range(300))


def test_a_rerun_with_other_rows_is_refused(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(3)
    writer = _writer(kafka_bootstrap, topic)
    writer(_rows(spark, range(100)), 0)
    with pytest.raises(SparkError, match="another slot layout.*not deterministic"):
        writer(_rows(spark, range(100, 200)), 0)
    assert _values(kafka_bootstrap, topic) == list(range(100))


class _Run:
    """Spark's run id of a streaming query (``spark.jobGroup.id``), set for the calls in
    the block as a query run sets it for its batches."""

    def __init__(self, spark: Any, run: str) -> None:
        self.context, self.run = spark.sparkContext, run

    def __enter__(self) -> _Run:
        self.context.setLocalProperty("spark.jobGroup.id", self.run)
        return self

    def __exit__(self, *exc: object) -> None:
        self.context.setLocalProperty("spark.jobGroup.id", None)

    def jobs(self) -> int:
        return len(self.context.statusTracker().getJobIdsForGroup(self.run))


def _reordered(spark: Any, chunks: list[range], order: list[int]) -> Any:
    data = [(str(i).encode(), str(i).encode()) for c in order for i in chunks[c]]
    return spark.createDataFrame(spark.sparkContext.parallelize(data, len(order)),
                                 "key binary, value binary")


def test_a_batch_after_one_completed_in_the_same_run_is_written_in_one_pass(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    """Batch 1 follows batch 0 in one run: one Spark job, no ranking pass. Batch 0, the
    query's first, has no marker of its own yet: one job too, after the driver's marker
    scan. A restarted query (another run) re-running batch 1 with its partitions in
    another order finds every slot committed (markers written by partition index, known
    by content: the ranking pass runs for it)."""
    topic = topic_factory(3)
    writer = _writer(kafka_bootstrap, topic)
    chunks = [range(300, 400), range(400, 500), range(500, 600)]
    with _Run(spark, f"r1-{uuid.uuid4().hex}") as run:
        first = writer(_rows(spark, range(300)), 0)
        jobs = run.jobs()
        assert jobs == 1
        second = writer(_reordered(spark, chunks, [0, 1, 2]), 1)
        assert run.jobs() - jobs == 1
    assert first.counting_s == 0 and second.counting_s == 0
    assert (first.written, first.slots) == (300, 3)
    assert (second.written, second.skipped, second.slots) == (300, 0, 3)
    with _Run(spark, f"r2-{uuid.uuid4().hex}"):
        again = writer(_reordered(spark, chunks, [2, 0, 1]), 1)
    assert again.counting_s > 0 and (again.written, again.skipped) == (0, 300)
    with _Run(spark, f"r3-{uuid.uuid4().hex}") as run:  # restarted: no marker of batch 2
        then = writer(_rows(spark, range(600, 700)), 2)
        assert run.jobs() == 1
    assert then.counting_s == 0 and (then.written, then.skipped) == (100, 0)
    assert _values(kafka_bootstrap, topic) == list(range(700))


def test_a_partly_committed_one_pass_batch_is_completed_by_its_rerun(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    """Batch 1 (one pass) fails after two of its three slots committed; the restarted
    query's re-run, partitions in another order, skips those two and writes the third."""
    import pyspark.sql.functions as F

    topic = topic_factory(3)
    writer = _writer(kafka_bootstrap, topic)
    chunks = [range(300, 400), range(400, 500), range(500, 600)]

    def fails_last(value: bytes) -> bool:
        if value == b"599":  # the last row of the last partition, after the others ended
            time.sleep(3)
            raise RuntimeError("task lost")
        return True

    failing = F.udf(fails_last, "boolean")
    with _Run(spark, f"r1-{uuid.uuid4().hex}"):
        writer(_rows(spark, range(300)), 0)
        broken = _reordered(spark, chunks, [0, 1, 2])
        with pytest.raises(SparkError, match="batch 1 failed: RuntimeError: task lost"):
            writer(broken.filter(failing("value")), 1)
    assert _values(kafka_bootstrap, topic) == list(range(500))
    with _Run(spark, f"r2-{uuid.uuid4().hex}"):
        again = writer(_reordered(spark, chunks, [2, 1, 0]), 1)
    assert (again.written, again.skipped) == (100, 200)
    assert _values(kafka_bootstrap, topic) == list(range(600))


def test_a_rerun_fences_every_slot_an_earlier_run_may_have_used(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    """A restarted run re-runs batch 1 (every slot of it committed, so its tasks open
    slots 0-2 only). An earlier run also used slot 5 (its marker is in the marker topic)
    and left a zombie there with a transaction open: the driver fences it before it
    reads the markers — the same writer object too, so not as its first batch."""
    from gridstream.spark._kafka_slots import Marker, marker_key, marker_partition

    topic = topic_factory(3)
    writer = _writer(kafka_bootstrap, topic)
    query = writer.query_id
    assert query is not None
    chunks = [range(300, 400), range(400, 500), range(500, 600)]
    with _Run(spark, f"r1-{uuid.uuid4().hex}"):
        writer(_rows(spark, range(300)), 0)
        writer(_reordered(spark, chunks, [0, 1, 2]), 1)
    zombie = Producer({"bootstrap.servers": kafka_bootstrap,
                       "transactional.id": writer.transactional_id(query, 5)})
    zombie.init_transactions(30)
    zombie.begin_transaction()   # what the earlier run's slot 5 committed at batch 0
    zombie.produce(writer.marker_topic, Marker(query, 5, 0, 0, 1, "1:0:0").encode(),
                   marker_key(query, 5), partition=marker_partition(query, 5,
                                                                   writer._partitions))
    zombie.commit_transaction(30)
    zombie.begin_transaction()   # and left open
    zombie.produce(topic, b"9999", b"9999")
    assert zombie.flush(30) == 0
    with _Run(spark, f"r2-{uuid.uuid4().hex}"):
        again = writer(_reordered(spark, chunks, [1, 2, 0]), 1)
    assert (again.written, again.skipped) == (0, 300)
    with pytest.raises(KafkaException) as caught:
        zombie.commit_transaction(30)
    assert caught.value.args[0].name() == "_FENCED"
    assert _values(kafka_bootstrap, topic) == list(range(600))


def _commit_by_hand(bootstrap: str, writer: KafkaExactlyOnceWriter, topic: str, batch: Any,
                    batch_id: int, marker_partitions: int) -> None:
    """Commit ``batch`` (one partition) with its slot's producer and marker, as a task of
    an earlier attempt or run would have."""
    from gridstream.spark._batch_content import content, hashes
    from gridstream.spark._kafka_slots import Marker, marker_key, marker_partition

    query = writer.query_id
    assert query is not None
    [(part, rows, found)] = content(hashes(writer._rows(batch)))
    producer = Producer({"bootstrap.servers": bootstrap,
                         "transactional.id": writer.transactional_id(query, part)})
    producer.init_transactions(30)
    producer.begin_transaction()
    for row in batch.collect():
        producer.produce(topic, bytes(row.value), bytes(row.key))
    marker = Marker(query, part, batch_id, 0, rows, found)
    producer.produce(writer.marker_topic, marker.encode(), marker_key(query, part),
                     partition=marker_partition(query, part, marker_partitions))
    producer.commit_transaction(30)


def test_a_one_pass_batch_that_reads_a_shuffle_checks_its_markers(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    """A lost shuffle makes Spark run the writer's stage again with attempts from 0 (no
    retry to be seen): a one-pass batch whose plan reads a shuffle still reads its
    markers, so the slot an earlier stage attempt committed (here: by hand, as that
    attempt's task would) is skipped, not written twice."""
    topic = topic_factory(3)
    writer = _writer(kafka_bootstrap, topic)
    batch = _rows(spark, range(300, 600)).repartition(1)
    with _Run(spark, f"r1-{uuid.uuid4().hex}"):
        writer(_rows(spark, range(300)), 0)
        _commit_by_hand(kafka_bootstrap, writer, topic, batch, 1, writer._partitions)
        again = writer(batch, 1)   # one pass: follows batch 0 in the same run
    assert again.counting_s == 0 and (again.written, again.skipped) == (0, 300)
    assert _values(kafka_bootstrap, topic) == list(range(600))


def test_an_older_writer_is_fenced_and_its_open_transaction_aborted(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(1)
    writer = _writer(kafka_bootstrap, topic)
    assert writer.query_id is not None
    writer(_rows(spark, range(10), partitions=1), 0)
    older = Producer({"bootstrap.servers": kafka_bootstrap,
                      "transactional.id": writer.transactional_id(writer.query_id, 0)})
    older.init_transactions(30)       # fences the producer task 0 used for batch 0
    older.begin_transaction()
    older.produce(topic, b"zombie", b"zombie")
    assert older.flush(30) == 0       # written, left open
    writer(_rows(spark, range(10, 20), partitions=1), 1)
    with pytest.raises(KafkaException) as caught:
        older.commit_transaction(30)
    assert caught.value.args[0].name() == "_FENCED"
    assert _values(kafka_bootstrap, topic) == list(range(20))


def test_a_transaction_timeout_above_the_broker_maximum_is_refused(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(1)
    writer = _writer(kafka_bootstrap, topic, transaction_timeout_ms=3_600_000)
    with pytest.raises(ConfigError, match=r"transaction\.max\.timeout\.ms \(900000\)"):
        writer(_rows(spark, range(5)), 0)
    assert _values(kafka_bootstrap, topic) == []


def _commit_slots(spark: Any, bootstrap: str, writer: KafkaExactlyOnceWriter, df: Any,
                  first_slot: int) -> int:
    """What a failed run of batch 0 leaves: slots ``first_slot``.. committed (rows and
    marker in one transaction, as a task does), the others not; returns the rows."""
    from gridstream.spark._batch_content import content as content_of_parts
    from gridstream.spark._batch_content import hashes
    from gridstream.spark._kafka_slots import Marker, marker_key, marker_partition
    from gridstream.spark.kafka_writer import match_slots

    query = writer.query_id
    assert query is not None and writer.topic is not None
    slots = match_slots(content_of_parts(hashes(writer._rows(df))), {}, 0)
    rows_of = dict(df.rdd.mapPartitionsWithIndex(lambda p, it: [(p, list(it))]).collect())
    writer._prepare(df, query, len(slots))
    written = 0
    for part, (slot, content) in slots.items():
        if slot < first_slot:
            continue
        producer = Producer({"bootstrap.servers": bootstrap,
                             "transactional.id": writer.transactional_id(query, slot)})
        producer.init_transactions(30)
        producer.begin_transaction()
        for row in rows_of[part]:
            producer.produce(writer.topic, bytes(row.value), bytes(row.key))
        marker = Marker(query, slot, 0, len(slots), len(rows_of[part]), content)
        producer.produce(writer.marker_topic, marker.encode(), marker_key(query, slot),
                         partition=marker_partition(query, slot, writer._partitions))
        producer.commit_transaction(30)
        written += len(rows_of[part])
    return written


@pytest.mark.parametrize(("before", "after", "first_committed"), [(8, 4, 4), (4, 8, 3)])
def test_a_rerun_with_another_slot_layout_is_refused_before_any_task_writes(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        before: int, after: int, first_committed: int) -> None:
    """A failed run committed some slots of batch 0; the re-run splits the same rows
    into another number of partitions: refused, and not one row written again."""
    topic = topic_factory(3)
    marker_topic = f"gs-test-markers-{uuid.uuid4().hex[:12]}"
    topic_factory(8, name=marker_topic, cleanup_policy="compact")
    writer = _writer(kafka_bootstrap, topic, marker_topic=marker_topic)
    committed = _commit_slots(spark, kafka_bootstrap, writer,
                              _rows(spark, range(800), before), first_committed)
    assert 0 < committed < 800
    again = KafkaExactlyOnceWriter(kafka_bootstrap, name="test", topic=topic,
                                   query_id=writer.query_id, marker_topic=marker_topic)
    with pytest.raises(SparkError) as refused:
        again(_rows(spark, range(800), after), 0)
    seen, records = read_all(kafka_bootstrap, topic)
    assert records == committed == len(seen)
    assert "another slot layout" in str(refused.value)


def test_an_open_transaction_of_another_writer_on_the_marker_partition_is_waited_for(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    """Another writer sharing the marker partition holds a transaction open there for
    longer than ``timeout_s`` (a healthy one, about to commit): this writer waits."""
    timeout_s = 3
    topic = topic_factory(1)
    marker_topic = topic_factory(1, cleanup_policy="compact")
    writer = _writer(kafka_bootstrap, topic, marker_topic=marker_topic, marker_partitions=1,
                     timeout_s=timeout_s)
    other = Producer({"bootstrap.servers": kafka_bootstrap,
                      "transactional.id": f"other-{uuid.uuid4().hex}"})
    other.init_transactions(30)
    other.begin_transaction()
    other.produce(marker_topic, b"{}", b"other-query/0", partition=0)
    assert other.flush(30) == 0
    committed: list[float] = []

    def commit() -> None:
        other.commit_transaction(30)
        committed.append(time.monotonic())

    timer = threading.Timer(timeout_s + 4, commit)
    started = time.monotonic()
    timer.start()
    try:
        result = writer(_rows(spark, range(20), partitions=2), 0)
    finally:
        ended = time.monotonic()
        timer.join()
    # it waited: it ended after the other transaction's commit, over timeout_s into its call
    assert committed and started + timeout_s < committed[0] <= ended, (started, committed, ended)
    assert (result.written, result.skipped) == (20, 0)
    assert _values(kafka_bootstrap, topic) == list(range(20))


def test_markers_are_found_after_partitions_were_added_to_the_marker_topic(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    """Batch 0 committed, partitions added to the marker topic, the batch re-run by a
    restarted query: skipped (its markers are still found), not written twice."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    from gridstream.spark._kafka_slots import marker_partition

    topic = topic_factory(3)
    marker_topic = topic_factory(2, cleanup_policy="compact")
    query = next(q for q in (uuid.uuid4().hex for _ in range(1000))
                 if all(marker_partition(q, s, 2) != marker_partition(q, s, 5)
                        for s in range(3)))
    first = KafkaExactlyOnceWriter(kafka_bootstrap, name="test", topic=topic, query_id=query,
                                   marker_topic=marker_topic, marker_partitions=2)
    assert first(_rows(spark, range(300)), 0).written == 300
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_partitions([NewPartitions(marker_topic, 5)])[marker_topic].result(30)
    again = KafkaExactlyOnceWriter(kafka_bootstrap, name="test", topic=topic, query_id=query,
                                   marker_topic=marker_topic, marker_partitions=2)
    deadline = time.monotonic() + 30
    while len(admin.list_topics(marker_topic, timeout=30).topics[marker_topic].partitions) < 5:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    result = again(_rows(spark, range(300)), 0)
    assert (result.written, result.skipped) == (0, 300)
    assert _values(kafka_bootstrap, topic) == list(range(300))
    then = again(_rows(spark, range(300, 400)), 1)
    assert then.written == 100
    assert _values(kafka_bootstrap, topic) == list(range(400))



def test_an_existing_marker_topic_with_fewer_partitions_is_used_as_it_is(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(1)
    marker_topic = topic_factory(1, cleanup_policy="compact")
    writer = _writer(kafka_bootstrap, topic, marker_topic=marker_topic, timeout_s=10)
    assert writer.marker_partitions == 8
    assert writer(_rows(spark, range(30)), 0).written == 30
    assert writer(_rows(spark, range(30)), 0).skipped == 30
    assert _values(kafka_bootstrap, topic) == list(range(30))


def test_speculation_is_refused(spark: Any, kafka_bootstrap: str,
                                topic_factory: Callable[..., str]) -> None:
    """A session whose conf says ``spark.speculation=true`` is refused before any task
    writes. The running context's conf is the one ``getConf`` copies: set there for the
    test (a session started so took a driver process of its own, 11 s), then restored."""
    topic = topic_factory(1)
    rows = _rows(spark, range(3))
    conf = spark.sparkContext._conf
    before = conf.get("spark.speculation")
    conf.set("spark.speculation", "true")
    try:
        with pytest.raises(ConfigError, match=r"spark\.speculation=true would run a task twice"):
            _writer(kafka_bootstrap, topic)(rows, 0)
    finally:
        if before is None:
            conf._jconf.remove("spark.speculation")
        else:
            conf.set("spark.speculation", before)
    assert spark.sparkContext.getConf().get("spark.speculation") == before
    assert _values(kafka_bootstrap, topic) == []


def test_a_slot_committed_after_the_drivers_marker_scan_is_found_by_its_task(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch of which the driver's scan found no marker is written in one pass, but
    each task reads its slot's marker after its own producer's init: a zombie of an
    earlier run that committed the slot after the scan (here: the scan is made to see
    nothing) is found, and its rows are not written twice."""
    topic = topic_factory(3)
    writer = _writer(kafka_bootstrap, topic, marker_topic=topic_factory(8))
    batch = _rows(spark, range(300), partitions=1)
    _commit_by_hand(kafka_bootstrap, writer, topic, batch, 0, 8)  # the zombie's commit
    monkeypatch.setattr(writer, "_committed", lambda batch_id: {})  # the scan came first
    with _Run(spark, f"r1-{uuid.uuid4().hex}"):
        result = writer(batch, 0)
    assert result.counting_s == 0 and (result.written, result.skipped) == (0, 300)
    assert _values(kafka_bootstrap, topic) == list(range(300))


def test_a_foreach_batch_whose_query_shuffles_is_seen_to_read_a_shuffle(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    """Inside ``foreachBatch`` the batch's plan is a scan of the query's RDD, with no
    Exchange in it: a query that repartitions (or aggregates) is still told to read a
    shuffle (from the RDD's lineage), so its one-pass tasks read their markers, and a
    query that does not is not."""
    from gridstream.spark._batch_content import reads_shuffle
    from tests.integration.support.pipeline_helpers import produce

    topic = topic_factory(2)
    produce(kafka_bootstrap, topic, [(b"k", str(i).encode()) for i in range(20)])
    seen: dict[str, list[bool]] = {"plain": [], "shuffled": []}
    for name in seen:
        df = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka_bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest").load()
              .select("key", "value"))
        if name == "shuffled":
            df = df.repartition(3)
        query = (df.writeStream.foreachBatch(
            lambda batch, _, name=name: seen[name].append(reads_shuffle(batch)))
            .option("checkpointLocation", str(tmp_path / name))
            .trigger(availableNow=True).start())
        query.awaitTermination(120)
    assert seen == {"plain": [False], "shuffled": [True]}
