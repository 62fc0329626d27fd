"""The exactly-once Kafka writer against the real broker and Spark: a re-run batch is
skipped, a batch re-run with other rows is refused, an older writer is fenced and its
open transaction aborted, the broker's timeout limit and speculation are refused."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer

from gridstream.errors import ConfigError, SparkError
from gridstream.spark.kafka_writer import KafkaExactlyOnceWriter
from tests.integration.test_spark_kafka_writer_crash import read_all

ROOT = Path(__file__).resolve().parents[2]


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
    with pytest.raises(SparkError, match="not deterministic"):
        writer(_rows(spark, range(100, 200)), 0)
    assert _values(kafka_bootstrap, topic) == list(range(100))


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


SPECULATION = """
import sys
from gridstream.errors import ConfigError
from gridstream.spark import get_spark
from gridstream.spark.kafka_writer import KafkaExactlyOnceWriter
spark = get_spark(conf={"spark.speculation": "true"})
rows = spark.createDataFrame([(b"k", b"v")], "key binary, value binary")
writer = KafkaExactlyOnceWriter(sys.argv[1], name="spec", topic=sys.argv[2], query_id="q")
try:
    writer(rows, 0)
except ConfigError as exc:
    print("refused:", exc)
"""


def test_speculation_is_refused(kafka_bootstrap: str,
                                topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(1)
    done = subprocess.run([sys.executable, "-c", SPECULATION, kafka_bootstrap, topic],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "refused: spark.speculation=true" in done.stdout
    assert _values(kafka_bootstrap, topic) == []
