"""Store feeds over the mirror's MessagePack and Avro topics (real Kafka, the stack's
schema registry, Spark, SQLite, Delta): the same store content as over JSON, and values
that do not decode go to the error policy."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from gridstream.feeds import FeedConfig, StoreFeed
from gridstream.protocol import OperationEncoder
from gridstream.protocol.avro import AvroCodec, LocalSchemaRegistry
from gridstream.spark import MalformedEnvelopeError, TypeRegistry
from gridstream.spark.dead_letter import H_OFFSET, H_REASON
from tests.integration.support.spark_checks import check_delta, check_sql
from tests.integration.support.spark_workload import ORDER, PERSON, Workload, produce

OPS = 400


def _pipeline(name: str, topics: list[str], tmp: Path, sink: dict[str, Any],
              bootstrap: str, **extra: Any) -> StoreFeed:
    config = FeedConfig.model_validate({
        "name": name, "topics": topics, "checkpoint": str(tmp / f"ckpt-{name}"),
        "trigger": "available_now", "maxOffsetsPerTrigger": 250, "sink": sink, **extra})
    return StoreFeed(config, TypeRegistry.of([PERSON]), bootstrap_servers=bootstrap)


def _run(spark: Any, pipeline: StoreFeed) -> BaseException | None:
    from pyspark.errors import StreamingQueryException

    query = pipeline.start(spark)
    with contextlib.suppress(StreamingQueryException):
        query.awaitTermination(600)
    assert not query.isActive
    return query.exception()


def sqlite_content(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row and column of every table, sorted."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        tables = [r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: sorted(db.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr)
                for t in tables}


def assert_same_content(expected: dict[str, list[tuple[Any, ...]]],
                        got: dict[str, list[tuple[Any, ...]]]) -> None:
    assert sorted(expected) == sorted(got), "tables differ"
    for table, rows in expected.items():
        assert len(rows) == len(got[table]), f"{table}: row counts differ"
        for want, have in zip(rows, got[table], strict=True):
            assert want == have, f"{table}: {want!r} != {have!r}"


def test_avro_and_msgpack_topics_give_the_same_stores_as_json(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        registry_url: str, tmp_path: Path) -> None:
    workload = Workload(seed=5)
    ops = workload.run(OPS)
    schema_dir = tmp_path / "schemas"
    encoders = {
        "json": OperationEncoder(),
        "msgpack": OperationEncoder("msgpack"),
        "avro": OperationEncoder(AvroCodec(schema_registry_url=registry_url,
                                           subject_strategy="topic_record")),
        "avro-local": OperationEncoder(AvroCodec(LocalSchemaRegistry(schema_dir))),
    }
    options: dict[str, dict[str, Any]] = {
        "json": {}, "msgpack": {"codec": "msgpack"},
        "avro": {"codec": "avro", "schema.registry.url": registry_url},
        "avro-local": {"codec": "avro", "avro_schema_dir": str(schema_dir)},
    }
    stores: dict[str, Path] = {}
    for name, encoder in encoders.items():
        people, orders = topic_factory(2), topic_factory(2)
        produce(kafka_bootstrap, {PERSON.name: people, ORDER: orders}, ops,
                transactional_id=f"gs-test-{uuid.uuid4().hex[:8]}", encoder=encoder)
        stores[name] = tmp_path / f"{name}.db"
        sinks = [("sql", {"kind": "sql", "url": f"sqlite:///{stores[name]}"})]
        if name == "avro":  # the lake against the reference model (JSON's: test_store_feeds)
            sinks.append(("delta", {"kind": "delta", "path": str(tmp_path / f"{name}-lake")}))
        if name in ("json", "avro"):
            # one pass: a new schema id fails the write job, which runs again once learned
            sinks.append(("parquet", {"kind": "parquet", "path": str(tmp_path / f"{name}-log")}))
        for kind, sink in sinks:
            pipeline = _pipeline(f"{name}-{kind}", [people, orders], tmp_path, sink,
                                 kafka_bootstrap, **options[name])
            assert _run(spark, pipeline) is None, pipeline.failure
            report = list(pipeline.reports)
            assert sum(r.records for r in report) == OPS
            assert sum(r.malformed for r in report) == 0
    assert check_sql(f"sqlite:///{stores['json']}", workload) > 20
    assert check_delta(spark, str(tmp_path / "avro-lake"), workload) > 20
    json_content = sqlite_content(stores["json"])
    assert sum(len(rows) for rows in json_content.values()) > 20
    for name in ("msgpack", "avro", "avro-local"):
        assert_same_content(json_content, sqlite_content(stores[name]))
    # the change logs: every operation, data as the same text
    logs = {name: sorted(spark.read.parquet(str(tmp_path / f"{name}-log")).selectExpr(
        "type", "id", "version", "op", "txn", "ts", "`partition`", "data",
        "removed").collect()) for name in ("json", "avro")}
    assert len(logs["json"]) == OPS
    assert logs["json"] == logs["avro"]

    # the comparison sees one changed value in one column
    tampered = tmp_path / "tampered.db"
    shutil.copy(stores["avro"], tampered)
    with contextlib.closing(sqlite3.connect(tampered)) as db:
        table = next(t for t, rows in json_content.items() if rows)
        columns = [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]
        column = columns[-1]
        db.execute(f'UPDATE "{table}" SET "{column}" = \'changed\' '
                   f'WHERE rowid = (SELECT min(rowid) FROM "{table}")')
        db.commit()
    with pytest.raises(AssertionError, match=table):
        assert_same_content(json_content, sqlite_content(tampered))


def _dead_letters(bootstrap: str, topic: str, expected: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    found: list[Any] = []
    for _ in range(30):
        found += [m for m in consumer.consume(100, timeout=1.0) if m.error() is None]
        if len(found) >= expected:
            break
    consumer.close()
    return found


def test_a_wrong_magic_byte_and_an_unknown_schema_id_go_to_the_error_policy(
        spark: Any, kafka_bootstrap: str, topic_factory: Callable[..., str],
        registry_url: str, tmp_path: Path) -> None:
    topic, dlq = topic_factory(1), topic_factory(1)
    workload = Workload(seed=9)
    encoder = OperationEncoder(AvroCodec(schema_registry_url=registry_url,
                                         subject_strategy="topic_record"))
    produce(kafka_bootstrap, {PERSON.name: topic, ORDER: topic}, workload.run(20),
            encoder=encoder)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, b"\x01\x00\x00\x00\x01rest", b"bad-magic")
    producer.produce(topic, b"\x00\x7f\xff\xff\xf0body", b"bad-id")
    producer.produce(topic, b"{}", b"json-in-avro", headers=[("gs.codec", b"json")])
    producer.flush(30)
    produce(kafka_bootstrap, {PERSON.name: topic, ORDER: topic}, workload.run(20),
            encoder=encoder)
    db = tmp_path / "store.db"
    sink = {"kind": "sql", "url": f"sqlite:///{db}"}
    avro = {"codec": "avro", "schema.registry.url": registry_url}

    failing = _pipeline("failing", [topic], tmp_path, sink, kafka_bootstrap, **avro)
    assert _run(spark, failing) is not None
    assert isinstance(failing.failure, MalformedEnvelopeError)
    assert failing.failure.offset == 20
    assert "magic byte" in str(failing.failure)

    dead = _pipeline("dead", [topic], tmp_path, sink, kafka_bootstrap, **avro,
                     error_handling_policy="dead_letter", dead_letter_topic=dlq)
    assert _run(spark, dead) is None, dead.failure
    letters = sorted(_dead_letters(kafka_bootstrap, dlq, 3), key=lambda m: m.key())
    assert [m.key() for m in letters] == [b"bad-id", b"bad-magic", b"json-in-avro"]
    reasons = {m.key(): dict(m.headers())[H_REASON].decode() for m in letters}
    assert "unknown avro schema id 2147483632" in reasons[b"bad-id"]
    assert "magic byte 0 expected" in reasons[b"bad-magic"]
    assert "record codec is not avro" in reasons[b"json-in-avro"]
    assert [dict(m.headers())[H_OFFSET] for m in letters] == [b"21", b"20", b"22"]
    assert letters[1].value() == b"\x01\x00\x00\x00\x01rest"
    assert check_sql(f"sqlite:///{db}", workload) > 5
