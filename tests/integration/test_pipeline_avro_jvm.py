"""Confluent Avro decoded and encoded in the JVM (``from_avro`` / ``to_avro``): the same
values as the Python path for every Avro type the pipelines map, a pipeline with no
Python step that runs no Python, the error policy for bad records, and a schema
registered while a query runs (the query re-plans and nothing is lost or doubled)."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.errors import StreamingQueryException

from gridstream.pipeline import Guarantee, KafkaSinks, KafkaSources, Pipeline
from gridstream.pipeline.serde import decode_columns, deserializer
from tests.integration.support.pipeline_helpers import produce, read

V1 = {"type": "record", "name": "Log", "namespace": "gs.avro.jvm", "fields": [
    {"name": "service", "type": "string"}, {"name": "n", "type": "long"}]}
V2 = {**V1, "fields": [*V1["fields"],
                       {"name": "level", "type": ["null", "string"], "default": None}]}
V3 = {**V2, "fields": [*V2["fields"], {"name": "host", "type": "string", "default": "?"}]}


def _avro(client: SchemaRegistryClient, schema: dict[str, Any], topic: str
          ) -> Callable[[dict[str, Any]], bytes]:
    serialize = AvroSerializer(client, orjson.dumps(schema).decode())
    ctx = SerializationContext(topic, MessageField.VALUE)
    return lambda value: bytes(serialize(value, ctx))


# ----------------------------------------------------------- the same values as Python

ALL = {"type": "record", "name": "All", "namespace": "gs.avro.jvm", "fields": [
    {"name": "s", "type": "string"}, {"name": "i", "type": "int"},
    {"name": "l", "type": "long"}, {"name": "f", "type": "float"},
    {"name": "d", "type": "double"}, {"name": "b", "type": "boolean"},
    {"name": "by", "type": "bytes"},
    {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
    {"name": "fx", "type": {"type": "fixed", "name": "F4", "size": 4}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10,
                             "scale": 2}},
    {"name": "arr", "type": {"type": "array", "items": "long"}},
    {"name": "m", "type": {"type": "map", "values": "string"}},
    {"name": "sub", "type": {"type": "record", "name": "Sub", "fields": [
        {"name": "x", "type": ["null", "double"], "default": None}]}},
    {"name": "opt", "type": ["null", "string"], "default": None}]}
# the writer: ``l`` an int (promoted to long), no ``opt`` (the reader's default)
ALL_WRITER = {**ALL, "fields": [{"name": "l", "type": "int"} if f["name"] == "l" else f
                                for f in ALL["fields"] if f["name"] != "opt"]}


def _all_value(n: int) -> dict[str, Any]:
    return {"s": f"ünï-{n}", "i": -n, "l": n * 1000, "f": n + 0.5, "d": n / 3, "b": n % 2 == 0,
            "by": bytes([n, 0, 255]), "e": "GREEN" if n % 2 else "RED",
            "fx": struct.pack(">i", n), "day": dt.date(2026, 1, 1) + dt.timedelta(days=n),
            "ts": dt.datetime(2026, 11, 26, 10, n % 60, 5, 123000, tzinfo=dt.UTC),
            "tsu": dt.datetime(2026, 11, 26, 10, n % 60, 5, 123456, tzinfo=dt.UTC),
            "dec": decimal.Decimal(f"{n}.25"), "arr": list(range(n % 4)),
            "m": {f"k{j}": str(j) for j in range(n % 3)},
            "sub": {"x": None if n % 2 else n * 1.5}}


def test_jvm_decoding_equals_the_python_decoding_for_every_avro_type(
        spark: Any, registry_url: str, client: SchemaRegistryClient,
        topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(1)
    encode = _avro(client, ALL_WRITER, topic)
    rows = [(None, encode(_all_value(n)), topic) for n in range(40)]
    df = spark.createDataFrame(rows, "key binary, value binary, topic string")
    props = {"schema.registry.url": registry_url, "value.deserializer": "Avro",
             "value.schema": orjson.dumps(ALL).decode(), "unknown.fields": "drop"}
    jvm = decode_columns(df, deserializer(props, is_key=True),
                         deserializer(props, is_key=False), topics=[topic])
    python = decode_columns(df, deserializer(props, is_key=True),
                            deserializer(props, is_key=False), topics=None)
    assert jvm.decode is None and jvm.notes[1] == "value: Avro in the JVM"
    assert python.decode is not None and python.notes[1] == (
        "value: Avro in Python (topics by pattern: the subjects are not known before the "
        "query)")
    got = [r["value"] for r in jvm.df.orderBy("value.i", ascending=False).collect()]
    values = [python.decode.value.python(topic, v) for _, v, _ in rows]  # type: ignore[union-attr]
    ddl = jvm.df.schema["value"].dataType.simpleString()
    expected = [r["value"] for r in spark.createDataFrame(
        [(v,) for v in values], f"value {ddl}").collect()]
    assert len(got) == 40 and got == expected
    assert got[3]["opt"] is None and got[3]["l"] == 3000  # the reader's default, promoted
    assert got[3]["ts"] == dt.datetime(2026, 11, 26, 10, 3, 5, 123000)
    assert jvm.df.filter("_gs_error is not null").count() == 0


# ------------------------------------------------------- a pipeline with no Python step


def _pipeline(name: str, bootstrap: str, registry_url: str, source: str, sink: str
              ) -> Pipeline:
    source_props = {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                    "schema.registry.url": registry_url, "key.deserializer": "String",
                    "value.deserializer": "KafkaAvroDeserializer",
                    "value.schema": orjson.dumps(V2).decode(), "unknown.fields": "drop"}
    sink_props = {"bootstrap.servers": bootstrap, "schema.registry.url": registry_url,
                  "key.serializer": "String", "value.serializer": "KafkaAvroSerializer",
                  "value.schema": orjson.dumps(V2).decode()}
    p = Pipeline.create(name=name)
    (p.read_from(KafkaSources.kafka(source_props, source))
      .write_to(KafkaSinks.kafka(sink_props, sink)))
    return p


def _decoded(client: SchemaRegistryClient, bootstrap: str, topic: str
             ) -> list[tuple[bytes, dict[str, Any]]]:
    reader = AvroDeserializer(client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    return sorted((k, reader(v, ctx)) for k, v, _ in read(bootstrap, topic))


@pytest.mark.parametrize("guarantee", [Guarantee.AT_LEAST_ONCE, Guarantee.EXACTLY_ONCE])
def test_an_avro_pipeline_with_no_python_step_runs_no_python(
        spark: Any, kafka_bootstrap: str, registry_url: str, client: SchemaRegistryClient,
        topic_factory: Callable[..., str], tmp_path: Path, guarantee: Guarantee,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Old and new writer schemas decode in the JVM, the sink encodes in the JVM (what
    confluent-kafka's deserializer reads back equals what was written); a bad body, a
    wrong magic byte and a null where the schema has none go to the dead letters."""
    source, sink, dead = topic_factory(2), topic_factory(1), topic_factory(1)
    old, new = _avro(client, V1, source), _avro(client, V2, source)
    good = old({"service": "a", "n": 1})
    records = [(f"o{i}".encode(), old({"service": f"s{i}", "n": i})) for i in range(150)]
    records += [(f"n{i}".encode(), new({"service": f"s{i}", "n": -i, "level": f"L{i}"}))
                for i in range(150)]
    records += [(b"bad-body", good[:5] + b"\x02"), (b"bad-magic", b"\x01" + good[1:])]
    produce(kafka_bootstrap, source, records)
    p = _pipeline(f"avro-{guarantee.lower()}", kafka_bootstrap, registry_url, source, sink)
    job = p.job(guarantee, str(tmp_path / "ck"), "available_now", errors="dead_letter",
                dead_letter_topic=dead)
    try:
        query = job.start(spark)
        query.awaitTermination(300)
        assert job.failure is None
        described = job.describe()
        assert "value: Avro in the JVM" in described and "jvm: encode" in described
        assert "python pass" not in described, described
        if guarantee == Guarantee.AT_LEAST_ONCE:  # the exactly-once writer is Python's
            capsys.readouterr()
            query.explain()
            plan = capsys.readouterr().out
            assert "from_avro" in plan and "to_avro" in plan, plan
            assert "Python" not in plan and "Arrow" not in plan, plan
    finally:
        job.close()
    expected = sorted(
        [(f"o{i}".encode(), {"service": f"s{i}", "n": i, "level": None}) for i in range(150)]
        + [(f"n{i}".encode(), {"service": f"s{i}", "n": -i, "level": f"L{i}"})
           for i in range(150)])
    assert _decoded(client, kafka_bootstrap, sink) == expected
    letters = {k: (v, h) for k, v, h in read(kafka_bootstrap, dead)}
    assert set(letters) == {b"bad-body", b"bad-magic"}
    assert letters[b"bad-body"][0] == good[:5] + b"\x02"
    body_id = struct.unpack(">I", good[1:5])[0]
    assert letters[b"bad-body"][1]["gs.error.reason"].decode().startswith(
        f"value: Avro body does not match schema id {body_id}")
    assert letters[b"bad-magic"][1]["gs.error.reason"] == (
        b"value is not Confluent-framed Avro: magic byte 1, 0 expected")
    assert {h["gs.error.stage"] for _, h in letters.values()} == {b"value.deserializer"}


def test_a_schema_id_the_plan_lacks_re_plans_the_query(
        spark: Any, kafka_bootstrap: str, registry_url: str, client: SchemaRegistryClient,
        topic_factory: Callable[..., str], tmp_path: Path) -> None:
    """A record of a schema id the plan lacks (not a version of the topic's subject
    when the query started: registered since, or another subject's) stops the query with
    ``NewSchemaError``; ``replan`` learns the id and the next start reads on from the
    checkpoint: every record once (exactly-once), an id the registry does not know an
    error row."""
    source, sink, dead = topic_factory(1), topic_factory(1), topic_factory(1)
    produce(kafka_bootstrap, source, [(f"a{i}".encode(), _avro(client, V1, source)(
        {"service": "a", "n": i})) for i in range(20)])
    p = _pipeline("avro-replan", kafka_bootstrap, registry_url, source, sink)
    job = p.job(Guarantee.EXACTLY_ONCE, str(tmp_path / "ck"), "available_now",
                errors="dead_letter", dead_letter_topic=dead)
    try:
        query = job.start(spark)
        query.awaitTermination(300)
        assert job.failure is None
        # an id the plan cannot know: registered under another topic's subject
        newer = _avro(client, V3, f"{source}-elsewhere")
        unknown = struct.pack(">bI", 0, 987654321) + b"\x02"
        produce(kafka_bootstrap, source, [
            (b"b0", _avro(client, V1, source)({"service": "b", "n": 0})),
            (b"b1", newer({"service": "b", "n": 1, "level": "W", "host": "h"})),
            (b"b2", unknown)])
        replans = 0
        while True:
            query = job.start(spark)
            with contextlib.suppress(StreamingQueryException):
                query.awaitTermination(300)
            failure = job.failure
            if failure is None or replans == 3:
                break
            assert str(failure).startswith(
                "pipeline 'avro-replan' failed: gridstream.errors.NewSchemaError: value: "
                "schema id "), failure
            assert job.replan(str(failure))
            replans += 1
        assert failure is None and replans == 2  # the other subject's id, the unknown one
        assert not job.replan(str(failure or "NewSchemaError: value: schema id 987654321"))
    finally:
        job.close()
    got = _decoded(client, kafka_bootstrap, sink)
    assert got == sorted([(f"a{i}".encode(), {"service": "a", "n": i, "level": None})
                          for i in range(20)] + [
        (b"b0", {"service": "b", "n": 0, "level": None}),
        (b"b1", {"service": "b", "n": 1, "level": "W"})])
    letters = read(kafka_bootstrap, dead)
    assert [(k, v) for k, v, _ in letters] == [(b"b2", unknown)]
    assert letters[0][2]["gs.error.reason"] == (
        b"value: schema id 987654321 is unknown to the registry")


def test_a_null_the_sinks_schema_does_not_allow_is_an_encode_error_row(
        spark: Any, kafka_bootstrap: str, registry_url: str, client: SchemaRegistryClient,
        topic_factory: Callable[..., str], tmp_path: Path) -> None:
    """The JVM encode (``to_avro``) would fail the query on a null in a non-null field:
    the row goes to the error policy instead, stage ``encode``, as in Python."""
    source, sink, dead = topic_factory(1), topic_factory(1), topic_factory(1)
    loose = {**V2, "fields": [{"name": "service", "type": "string"},
                              {"name": "n", "type": ["null", "long"], "default": None},
                              V2["fields"][2]]}
    write = _avro(client, loose, source)
    produce(kafka_bootstrap, source, [(b"a", write({"service": "a", "n": 1, "level": None})),
                                      (b"b", write({"service": "b", "n": None, "level": "E"})),
                                      (b"c", write({"service": "c", "n": 3, "level": "I"}))])
    source_props = {"bootstrap.servers": kafka_bootstrap, "auto.offset.reset": "earliest",
                    "schema.registry.url": registry_url, "key.deserializer": "String",
                    "value.deserializer": "Avro", "value.schema": orjson.dumps(loose).decode(),
                    "unknown.fields": "drop"}
    sink_props = {"bootstrap.servers": kafka_bootstrap, "schema.registry.url": registry_url,
                  "key.serializer": "String", "value.serializer": "Avro",
                  "value.schema": orjson.dumps(V2).decode()}  # n: a long, never null
    p = Pipeline.create(name="avro-null")
    p.read_from(KafkaSources.kafka(source_props, source)).write_to(
        KafkaSinks.kafka(sink_props, sink))
    job = p.job(Guarantee.AT_LEAST_ONCE, str(tmp_path / "ck"), "available_now",
                errors="dead_letter", dead_letter_topic=dead)
    try:
        query = job.start(spark)
        query.awaitTermination(300)
        assert job.failure is None
        assert "jvm: encode" in job.describe() and "python pass" not in job.describe()
    finally:
        job.close()
    assert _decoded(client, kafka_bootstrap, sink) == [
        (b"a", {"service": "a", "n": 1, "level": None}),
        (b"c", {"service": "c", "n": 3, "level": "I"})]
    letters = read(kafka_bootstrap, dead)
    assert [k for k, _, _ in letters] == [b"b"]
    assert letters[0][2]["gs.error.stage"] == b"encode"
    assert letters[0][2]["gs.error.reason"] == (
        b"value does not fit its Avro schema: field 'n' is null")
