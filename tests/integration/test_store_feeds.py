"""Kafka → Cassandra / SQL / Delta / Parquet store feeds on real Kafka, Spark, Cassandra
and PostgreSQL (the SQL sink runs on SQLite and on PostgreSQL).

The mirror-style workload (transactions, nested objects, dynamic properties,
collections, partial updates, changes, removes and re-creates, two topics and two
types) runs through all four sinks; each store must equal the expected final state
(Cassandra and Delta: every property of every live entity, through the reconciliation).
Then the whole topic range is applied a second time, as Spark does with a re-run
batch: nothing changes and no deleted entity comes back.
"""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pyspark.sql.functions as F
import pytest

from gridstream.errors import StoreError
from gridstream.feeds import FeedConfig, StoreFeed
from gridstream.spark import TypeRegistry
from gridstream.stores.cassandra import CassandraConfig, CassandraReader, mapping_from_config
from tests.integration.support.spark_checks import check_cassandra, check_delta, check_sql
from tests.integration.support.spark_workload import ORDER, PERSON, Workload, produce

OPS = 500


def _config(name: str, topics: list[str], tmp: Path, sink: dict[str, Any],
            **extra: Any) -> FeedConfig:
    return FeedConfig.model_validate({
        "name": name, "topics": topics, "checkpoint": str(tmp / f"ckpt-{name}"),
        "trigger": "available_now", "maxOffsetsPerTrigger": 300, "sink": sink, **extra,
    })


def _run(spark: Any, pipelines: list[StoreFeed]) -> None:
    queries = [p.start(spark) for p in pipelines]
    for pipeline, query in zip(pipelines, queries, strict=True):
        query.awaitTermination(600)
        assert query.exception() is None, (pipeline.name, pipeline.failure)
        assert not query.isActive


def _kafka_batch(spark: Any, bootstrap: str, topics: list[str]) -> Any:
    return (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", ",".join(topics)).option("startingOffsets", "earliest")
            .option("includeHeaders", "true").option("kafka.isolation.level", "read_committed")
            .load())


@pytest.mark.parametrize("sql_url", ["postgres"], indirect=True)  # SQLite runs as well
def test_store_pipelines_reach_the_final_state_and_replays_change_nothing(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], keyspace: str,
        cassandra_session: Any, sql_url: str, tmp_path: Path) -> None:
    postgres = sql_url
    people, orders = topic_factory(3), topic_factory(2)
    workload = Workload(seed=11)
    ops = workload.run(OPS)
    produce(kafka_bootstrap, {PERSON.name: people, ORDER: orders}, ops,
            transactional_id=f"gs-test-{uuid.uuid4().hex[:8]}")
    types = TypeRegistry.of([PERSON])
    sqlite, lake, log = f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "current", \
        tmp_path / "changes"
    topics = [people, orders]
    sinks = {
        "cassandra": {"kind": "cassandra", "keyspace": keyspace, "concurrency": 32},
        "sql": {"kind": "sql", "url": sqlite},
        "sql-postgres": {"kind": "sql", "url": postgres},
        "delta": {"kind": "delta", "path": str(lake)},
        "parquet": {"kind": "parquet", "path": str(log)},
    }
    pipelines = [StoreFeed(_config(n, topics, tmp_path, s), types,
                               bootstrap_servers=kafka_bootstrap) for n, s in sinks.items()]
    _run(spark, pipelines)
    for pipeline in pipelines:
        assert sum(r.records for r in pipeline.reports) == OPS
        assert len(pipeline.reports) >= 2  # several batches: state carried across batches

    assert check_cassandra(cassandra_session, keyspace, workload) > 0
    assert check_sql(sqlite, workload) > 0
    assert check_sql(postgres, workload) > 0
    assert check_delta(spark, str(lake), workload) > 0
    changes = spark.read.parquet(str(log))
    assert changes.count() == OPS
    assert changes.select("topic", "kafka_partition", "offset").distinct().count() == OPS
    assert {r["version"] for r in changes.select("version").collect()} == \
        {op.version for op in ops}
    assert changes.where(F.col("type") == PERSON.name).select("date").distinct().count() >= 1

    # The whole range again, as a re-run batch would deliver it: every op is stale now.
    replay = _kafka_batch(spark, kafka_bootstrap, topics)
    for pipeline in pipelines[:-1]:  # all but the change log
        report = pipeline.process_batch(replay, batch_id=10_000)
        assert report.records == OPS
        if pipeline.sink.kind != "cassandra":
            assert report.result.applied == 0 and report.result.stale == OPS
    check_cassandra(cassandra_session, keyspace, workload)
    check_sql(sqlite, workload)
    check_sql(postgres, workload)
    check_delta(spark, str(lake), workload)

    # One value changed behind the sinks' back: the checks fail and name it.
    _tamper_and_check(spark, cassandra_session, keyspace, str(lake), workload)


def _tamper_and_check(spark: Any, session: Any, keyspace: str, lake: str,
                      workload: Workload) -> None:
    from delta.tables import DeltaTable

    victim = min(workload.live(PERSON.name))
    mapping = mapping_from_config(CassandraConfig(keyspace=keyspace))
    table = CassandraReader(session, keyspace, mapping).tables.lookup(PERSON.name)
    session.execute(f'UPDATE "{keyspace}"."{table}" SET "name" = %s WHERE "id" = %s',
                    ("tampered", victim))
    with pytest.raises(AssertionError, match=re.escape(
            f'1 different; first difference: {PERSON.name} {victim} name: grid "')):
        check_cassandra(session, keyspace, workload)
    data = copy.deepcopy(workload.live(PERSON.name)[victim])
    city = data["address"]["city"]
    data["address"]["city"] = "Atlantis"
    DeltaTable.forPath(spark, lake).update(
        f"type = '{PERSON.name}' AND id = '{victim}'",
        {"data": F.lit(orjson.dumps(data).decode())})
    with pytest.raises(AssertionError, match=re.escape(
            f'{PERSON.name} {victim} address.city: grid "{city}", place "Atlantis"')):
        check_delta(spark, lake, workload)


def test_parquet_change_log_batch_rerun_replaces_its_own_files(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    topic = topic_factory(2)
    workload = Workload(seed=3)
    ops = workload.run(80, people=10, orders=1)
    produce(kafka_bootstrap, {PERSON.name: topic, ORDER: topic}, ops)
    log = tmp_path / "changes"
    pipeline = StoreFeed(_config("log", [topic], tmp_path, {"kind": "parquet",
                                                                "path": str(log)}))
    batch = _kafka_batch(spark, kafka_bootstrap, [topic])
    for _ in range(3):
        report = pipeline.process_batch(batch, batch_id=5, query_id="replay-a")
        assert report.records == len(ops)
    changes = spark.read.parquet(str(log))
    assert changes.count() == len(ops)
    assert [r["topic"] for r in changes.select("topic").distinct().collect()] == [topic]
    pattern = f"type=*/date=*/topic={topic}/batch-000000000005-replay-a-*.parquet"
    files = sorted(log.glob(pattern))
    assert files and not list((log / "_staging").glob("*/*"))
    # Hive-style directories: readers other than Spark see the topic as a column too
    import pyarrow.dataset as ds

    table = ds.dataset(str(log), format="parquet", partitioning="hive",
                       exclude_invalid_files=True).to_table(columns=["topic", "offset"])
    assert table.num_rows == len(ops) and set(table.column("topic").to_pylist()) == {topic}
    # the same batch id under another query id is another run: it adds its own files
    pipeline.process_batch(batch, batch_id=5, query_id="replay-b")
    assert sorted(log.glob(pattern)) == files
    assert spark.read.parquet(str(log)).count() == 2 * len(ops)
    # a query id that the others' extend ("replay" and "replay-a") is yet another run:
    # re-running its batch replaces only its own files, never theirs
    for _ in range(2):
        pipeline.process_batch(batch, batch_id=5, query_id="replay")
    assert sorted(log.glob(pattern)) == files
    assert spark.read.parquet(str(log)).count() == 3 * len(ops)
    with pytest.raises(StoreError, match="no query id"):  # by hand, a query id is needed
        pipeline.process_batch(batch, batch_id=5)


def _rows_by_query(spark: Any, log: Path) -> dict[str, tuple[int, int]]:
    """Query id (from the file names) → (rows, distinct Kafka positions)."""
    frame = spark.read.parquet(str(log)).withColumn(
        "query", F.regexp_extract(F.input_file_name(), r"batch-[0-9]+-(.+)-[0-9]+\.parquet$", 1))
    return {r["query"]: (int(r["rows"]), int(r["positions"])) for r in frame.groupBy("query").agg(
        F.count(F.lit(1)).alias("rows"),
        F.countDistinct("topic", "kafka_partition", "offset").alias("positions")).collect()}


def test_parquet_change_log_runs_sharing_a_path_keep_each_others_files(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    """Batch ids restart at 0 for every query: a second pipeline on the same path and a
    run on a reset checkpoint write batch 0 again, and must not delete the first one's
    files; a batch the same query runs again still replaces its own files."""
    import shutil

    topic = topic_factory(2)
    ops = Workload(seed=4).run(60, people=8, orders=1)
    produce(kafka_bootstrap, {PERSON.name: topic, ORDER: topic}, ops)
    log = tmp_path / "changes"
    sink = {"kind": "parquet", "path": str(log)}

    def pipeline(name: str) -> StoreFeed:
        return StoreFeed(_config(name, [topic], tmp_path, sink),
                             bootstrap_servers=kafka_bootstrap)

    first = pipeline("first")
    _run(spark, [first])
    first_id = spark.read.text(str(tmp_path / "ckpt-first" / "metadata")).first()[0]
    (only,) = _rows_by_query(spark, log).items()
    assert only[1] == (len(ops), len(ops)) and only[0] in first_id

    # Spark runs the last batch again when its commit is missing: same query, same files
    commits = sorted((tmp_path / "ckpt-first" / "commits").glob("[0-9]*"),
                     key=lambda f: int(f.name))
    commits[-1].unlink()
    commits[-1].with_name(f".{commits[-1].name}.crc").unlink(missing_ok=True)
    rerun = pipeline("first")
    _run(spark, [rerun])
    assert [r.batch_id for r in rerun.reports] == [int(commits[-1].name)]
    assert _rows_by_query(spark, log) == dict([only])

    _run(spark, [pipeline("second")])  # another pipeline, same path, batch ids from 0
    shutil.rmtree(tmp_path / "ckpt-first")  # a reset checkpoint: a new query, from 0 again
    _run(spark, [pipeline("first")])
    assert spark.read.parquet(str(log)).count() == 3 * len(ops)  # nothing deleted
    runs = _rows_by_query(spark, log)
    assert len(runs) == 3 and only[0] in runs
    assert all(counts == (len(ops), len(ops)) for counts in runs.values()), runs


def test_parquet_sink_refuses_a_change_log_of_the_earlier_layout(
        spark: Any, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    log = tmp_path / "changes"
    old = log / "type=T" / "date=2026-01-01"
    old.mkdir(parents=True)
    earlier = old / "batch-000000000000-00000.parquet"
    pq.write_table(pa.table({"topic": ["t"], "offset": [0]}), earlier)
    pipeline = StoreFeed(_config("log", ["t"], tmp_path, {"kind": "parquet", "path": str(log)}))
    with pytest.raises(StoreError, match="earlier layout"):
        pipeline.start(spark)
    earlier.unlink()
    pipeline.sink.open(spark)  # without the earlier layout's file, the path is accepted


def test_many_topics_to_many_cassandra_tables_with_a_pattern(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str], keyspace: str,
        cassandra_session: Any, tmp_path: Path) -> None:
    prefix = f"gs-pat-{uuid.uuid4().hex[:6]}"
    people = topic_factory(1, name=f"{prefix}.people")
    orders = topic_factory(1, name=f"{prefix}.orders")
    workload = Workload(seed=5)
    ops = workload.run(120, people=15, orders=10)
    produce(kafka_bootstrap, {PERSON.name: people, ORDER: orders}, ops)
    config = FeedConfig.model_validate({
        "name": "pattern", "subscribePattern": f"{prefix}\\..*",
        "checkpoint": str(tmp_path / "ckpt"), "trigger": "available_now",
        "sink": {"kind": "cassandra", "keyspace": keyspace},
    })
    pipeline = StoreFeed(config, TypeRegistry.of([PERSON]), bootstrap_servers=kafka_bootstrap)
    _run(spark, [pipeline])
    tables = {r.table_name for r in cassandra_session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,))}
    assert {"com_example_Person", "Order"} <= tables
    assert check_cassandra(cassandra_session, keyspace, workload) > 0
