"""StoreSinks through the pipeline API on real Kafka, Spark, the schema registry, SQLite
and Delta: the same store content as the store feeds, replays change nothing, error
rows go to the policy."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from gridstream.feeds import FeedConfig, StoreFeed
from gridstream.pipeline import Guarantee, KafkaSources, Pipeline, StoreSinks
from gridstream.protocol import OperationEncoder
from gridstream.protocol.avro import AvroCodec
from gridstream.spark import TypeRegistry
from gridstream.spark.dead_letter import H_REASON, H_STAGE
from tests.integration.support.pipeline_helpers import read
from tests.integration.support.spark_checks import check_delta, check_sql
from tests.integration.support.spark_workload import ORDER, PERSON, Workload, produce
from tests.integration.test_spark_store_codecs import assert_same_content, sqlite_content

OPS = 300


def _props(bootstrap: str, value: str = "ByteArrayDeserializer") -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "key.deserializer": "ByteArrayDeserializer",
            "value.deserializer": value, "auto.offset.reset": "earliest",
            "max.poll.records": 100}


RUNS: list[str] = []
"""What ran where, per run (``describe``'s last line)."""


def _run(pipeline: Pipeline, spark: Any, **options: Any) -> tuple[Any, list[Any]]:
    from pyspark.errors import StreamingQueryException

    job = pipeline.job(trigger="available_now", **options)
    try:
        query = job.start(spark)
        with contextlib.suppress(StreamingQueryException):  # the job's failure says it
            query.awaitTermination(600)
        assert not query.isActive
        reports = []
        while job.reports:
            reports.append(job.reports.popleft())
        RUNS.append(job.describe().splitlines()[-1])
        return job.failure, reports
    finally:
        job.close()


def test_store_sinks_hold_what_the_store_pipelines_hold(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        registry_url: str, tmp_path: Path) -> None:
    workload = Workload(seed=17)
    ops = workload.run(OPS)
    json_people, json_orders = topic_factory(2), topic_factory(2)
    produce(kafka_bootstrap, {PERSON.name: json_people, ORDER: json_orders}, ops)
    avro_people, avro_orders = topic_factory(2), topic_factory(2)
    produce(kafka_bootstrap, {PERSON.name: avro_people, ORDER: avro_orders}, ops,
            encoder=OperationEncoder(AvroCodec(schema_registry_url=registry_url,
                                               subject_strategy="topic")))
    reference = tmp_path / "reference.db"
    store = StoreFeed(FeedConfig.model_validate({
        "name": "reference", "topics": [json_people, json_orders], "trigger": "available_now",
        "checkpoint": str(tmp_path / "ck-reference"),
        "sink": {"kind": "sql", "url": f"sqlite:///{reference}"}}),
        TypeRegistry.of([PERSON]), bootstrap_servers=kafka_bootstrap)
    query = store.start(spark)
    query.awaitTermination(600)
    assert query.exception() is None, store.failure
    assert check_sql(f"sqlite:///{reference}", workload) > 20
    expected = sqlite_content(reference)

    runs: dict[str, tuple[list[str], str, Callable[[Any], Any] | None, dict[str, Any]]] = {
        "bytes": ([json_people, json_orders], "ByteArrayDeserializer", None, {}),
        "json-dicts": ([json_people, json_orders], "Json", lambda kv: kv[1], {}),
        "avro-bytes": ([avro_people, avro_orders], "ByteArrayDeserializer", None,
                       {"codec": "avro", "schema_registry_url": registry_url}),
    }
    for name, (topics, deserializer, step, options) in runs.items():
        db = tmp_path / f"{name}.db"
        p = Pipeline.create(name=f"store-{name}")
        stage = p.read_from(KafkaSources.kafka(_props(kafka_bootstrap, deserializer), topics))
        if step is not None:
            stage = stage.map(step)
        stage.write_to(StoreSinks.sql(f"sqlite:///{db}", [PERSON], **options))
        failure, reports = _run(p, spark, guarantee=Guarantee.EXACTLY_ONCE,
                                checkpoint=str(tmp_path / f"ck-{name}"))
        assert failure is None, (name, failure)
        assert sum(r.rows_in for r in reports) == OPS
        assert sum(r.extra.get("applied", 0) + r.extra.get("stale", 0)
                   + r.extra.get("skipped", 0) for r in reports) == OPS
        assert_same_content(expected, sqlite_content(db))
        # JSON bytes decode in the JVM, with no Python pass; the others run one
        assert ("python pass" in RUNS[-1]) == (name != "bytes"), RUNS[-1]

    # Delta, then the whole range again with a new checkpoint: nothing changes
    lake = tmp_path / "lake"
    for attempt in range(2):
        p = Pipeline.create(name="store-delta")
        (p.read_from(KafkaSources.kafka(_props(kafka_bootstrap), [avro_people, avro_orders]))
          .write_to(StoreSinks.delta(str(lake), [PERSON], codec="avro",
                                     schema_registry_url=registry_url)))
        failure, reports = _run(p, spark, guarantee=Guarantee.EXACTLY_ONCE,
                                checkpoint=str(tmp_path / f"ck-delta-{attempt}"))
        assert failure is None, failure
        if attempt == 1:
            assert sum(r.extra.get("applied", 0) for r in reports) == 0
        assert check_delta(spark, str(lake), workload) > 20


def test_error_rows_go_to_the_pipelines_policy(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        tmp_path: Path) -> None:
    topic, dlq = topic_factory(1), topic_factory(1)
    workload = Workload(seed=3)
    produce(kafka_bootstrap, {PERSON.name: topic, ORDER: topic}, workload.run(30))
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, b'{"op": "EXPLODE"}', b"bad-op")
    producer.produce(topic, b"\x00\x00\x00\x00\x01avro?", b"not-json")
    producer.flush(30)
    produce(kafka_bootstrap, {PERSON.name: topic, ORDER: topic}, workload.run(30))
    db = tmp_path / "store.db"

    def pipeline() -> Pipeline:
        p = Pipeline.create(name=f"store-errors-{uuid.uuid4().hex[:6]}")
        (p.read_from(KafkaSources.kafka(_props(kafka_bootstrap), topic))
          .write_to(StoreSinks.sql(f"sqlite:///{db}", [PERSON])))
        return p

    failure, _ = _run(pipeline(), spark, guarantee=Guarantee.AT_LEAST_ONCE,
                      checkpoint=str(tmp_path / "ck-fail"))
    assert failure is not None and f"{topic}[0]@30" in str(
        failure)
    failure, reports = _run(pipeline(), spark, guarantee=Guarantee.AT_LEAST_ONCE,
                            checkpoint=str(tmp_path / "ck-dead"), errors="dead_letter",
                            dead_letter_topic=dlq)
    assert failure is None, failure
    assert sum(r.errors for r in reports) == 2
    letters = {key: (value, headers) for key, value, headers in read(kafka_bootstrap, dlq)}
    assert sorted(letters) == [b"bad-op", b"not-json"]
    assert letters[b"not-json"][0] == b"\x00\x00\x00\x00\x01avro?"
    assert letters[b"not-json"][1][H_REASON] == b"value is not a JSON envelope"
    assert letters[b"bad-op"][1][H_REASON] == b"envelope field 'op' is not an operation type"
    assert {headers[H_STAGE] for _, headers in letters.values()} == {b"encode"}
    assert check_sql(f"sqlite:///{db}", workload) > 5
