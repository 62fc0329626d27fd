"""The pipelines' serializers against the stack's registry, Kafka and Spark: Kafka's byte
layouts in the JVM, Confluent Avro both ways with confluent-kafka's own serializers, a
schema added while a streaming query runs, refusals, and heterogeneous JSON."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from gridstream.errors import CodecError
from gridstream.pipeline.serde import Decoded, decode_columns, deserializer, serializer
from gridstream.pipeline.serde._columns import DecodeError

V1 = {"type": "record", "name": "Log", "namespace": "gs.pipeline.test", "fields": [
    {"name": "service", "type": "string"}, {"name": "n", "type": "long"}]}
V2 = {**V1, "fields": [*V1["fields"],
                       {"name": "level", "type": ["null", "string"], "default": None}]}
OUT = "offset long, key string, value string, error string, stage string"


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]]
             ) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(30) == 0


def _text(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value, default=str).decode()


def _python_pass(decoded: Decoded) -> Callable[[Iterator[pa.RecordBatch]],
                                               Iterator[pa.RecordBatch]]:
    """What the pipeline's Python pass does with ``Decoded.decode``: a row that does not
    decode becomes an error row (reason and stage)."""
    decode = decoded.decode
    schema = pa.schema([("offset", pa.int64()), ("key", pa.string()), ("value", pa.string()),
                        ("error", pa.string()), ("stage", pa.string())])

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out = []
            for row in batch.to_pylist():
                error, stage = row["_gs_error"], row["_gs_stage"]
                if decode is not None:
                    try:
                        row = decode(row)
                    except DecodeError as exc:
                        error, stage = str(exc), exc.stage
                out.append({"offset": row["offset"], "error": error, "stage": stage,
                            "key": None if error else _text(row["key"]),
                            "value": None if error else _text(row["value"])})
            yield pa.RecordBatch.from_pylist(out, schema=schema)

    return run


class Query:
    """A streaming query reading a topic through ``decode_columns`` into a list."""

    def __init__(self, spark: Any, bootstrap: str, topic: str, props: dict[str, Any],
                 checkpoint: Path) -> None:
        raw = (spark.readStream.format("kafka")
               .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
               .option("startingOffsets", "earliest").load())
        self.decoded = decode_columns(raw, deserializer(props, is_key=True),
                                      deserializer(props, is_key=False))
        columns = self.decoded.df.select("offset", "topic", "key", "value", "_gs_error",
                                         "_gs_stage", "_gs_raw_key", "_gs_raw_value")
        self.rows: dict[int, dict[str, Any]] = {}

        def collect(df: Any, batch_id: int) -> None:
            for row in df.collect():
                self.rows[row["offset"]] = row.asDict()

        self.query = (columns.mapInArrow(_python_pass(self.decoded), OUT)
                      .writeStream.foreachBatch(collect)
                      .option("checkpointLocation", str(checkpoint))
                      .start())

    def drain(self) -> dict[int, dict[str, Any]]:
        self.query.processAllAvailable()
        return self.rows

    def stop(self) -> None:
        self.query.stop()


@pytest.fixture()
def query(spark: Any, kafka_bootstrap: str,
          tmp_path: Path) -> Iterator[Callable[..., Query]]:
    started: list[Query] = []

    def start(topic: str, props: dict[str, Any]) -> Query:
        checkpoint = tmp_path / f"checkpoint-{len(started)}"
        started.append(Query(spark, kafka_bootstrap, topic, props, checkpoint))
        return started[-1]

    yield start
    for q in started:
        q.stop()


# ------------------------------------------------------------------ Kafka's layouts


def test_jvm_forms_equal_kafkas_byte_layouts(spark: Any) -> None:
    """Long/Integer/Short/String decoded and encoded in the JVM give exactly what the
    Python forms (Kafka's layouts) give, negatives and extremes included; bad lengths and
    bytes that are not UTF-8 are error rows with the reason."""
    from pyspark.sql import functions as F  # noqa: N812

    cases: dict[str, list[Any]] = {"Long": [0, -1, 1, -(2**63), 2**63 - 1, -123456789012],
             "Integer": [0, -1, 2**31 - 1, -(2**31), 65536], "Short": [0, -1, 32767, -32768],
             "String": ["", "héllo", "日本"]}
    for name, values in cases.items():
        ser = serializer({"value.serializer": name}, is_key=False)
        de = deserializer({"value.deserializer": name}, is_key=False)
        assert de.jvm(F.col("value")) is not None and ser.jvm(F.col("v")) is not None
        rows = [(ser.python("t", v), v) for v in values]
        df = spark.createDataFrame(rows, f"value binary, v {ser.jvm_type}")
        df = df.withColumn("key", F.lit(None).cast("binary")).withColumn(
            "encoded", ser.jvm(F.col("v")))
        got = decode_columns(df, deserializer({}, is_key=True), de)
        assert got.decode is None and got.notes == ("key: ByteArray in the JVM",
                                                     f"value: {name} in the JVM")
        out = got.df.select("value", "_gs_error", "encoded", "_gs_raw_value").collect()
        assert [r["value"] for r in out] == values, name
        assert [r["_gs_error"] for r in out] == [None] * len(values)
        assert [bytes(r["encoded"]) for r in out] == [bytes(r["_gs_raw_value"]) for r in out]

    bad = spark.createDataFrame([(b"\x00\x01\x02", b"\xff\xfe", b"1234", None)],
                                "value binary, key binary, s binary, n binary")
    long_de = deserializer({"value.deserializer": "Long"}, is_key=False)
    string_de = deserializer({"key.deserializer": "String"}, is_key=True)
    row = decode_columns(bad, string_de, long_de).df.collect()[0]
    assert (row["_gs_error"], row["_gs_stage"]) == ("key is not valid UTF-8 (String)",
                                                    "key.deserializer")
    assert row["key"] is None and row["value"] is None
    assert bytes(row["_gs_raw_key"]) == b"\xff\xfe"
    row = decode_columns(bad.withColumn("key", F.col("s")), string_de, long_de).df.collect()[0]
    assert (row["_gs_error"], row["_gs_stage"]) == (
        "value: Long needs 8 bytes, not 3", "value.deserializer")
    assert bytes(row["_gs_raw_value"]) == b"\x00\x01\x02"


# ------------------------------------------------------------------------------ Avro


def test_confluent_reads_what_gridstream_writes(registry_url: str,
                                                client: SchemaRegistryClient) -> None:
    topic = f"gs-serde-{uuid.uuid4().hex[:12]}"
    props = {"schema.registry.url": registry_url, "key.serializer": "KafkaAvroSerializer",
             "value.serializer": "io.confluent.kafka.serializers.KafkaAvroSerializer",
             "value.schema": orjson.dumps(V2).decode()}
    value = {"service": "api", "n": -42, "level": None}
    data = serializer(props, is_key=False).python(topic, value)
    key = serializer(props, is_key=True).python(topic, "k-1")
    reader = AvroDeserializer(client)
    assert reader(data, SerializationContext(topic, MessageField.VALUE)) == value
    assert reader(key, SerializationContext(topic, MessageField.KEY)) == "k-1"
    assert sorted(client.get_subjects()).count(f"{topic}-value") == 1
    assert f"{topic}-key" in client.get_subjects()


def test_a_running_query_reads_confluent_avro_across_a_schema_change(
        registry_url: str, client: SchemaRegistryClient, kafka_bootstrap: str,
        topic_factory: Callable[..., str], query: Callable[..., Query]) -> None:
    """Records written by confluent-kafka's ``AvroSerializer`` decode in a running
    query; a field added after the query started (a new schema id) decodes without a
    restart; wrong magic byte, unknown id and a bad body are error rows with reasons."""
    topic = topic_factory(partitions=1)
    subject = f"{topic}-value"
    v1 = AvroSerializer(client, orjson.dumps(V1).decode())
    ctx = SerializationContext(topic, MessageField.VALUE)
    _produce(kafka_bootstrap, topic, [(b"a", v1({"service": "a", "n": 1}, ctx)),
                                      (b"b", v1({"service": "b", "n": -2}, ctx))])
    client.set_compatibility(subject, "BACKWARD")
    q = query(topic, {"schema.registry.url": registry_url, "key.deserializer": "String",
                      "value.deserializer": "KafkaAvroDeserializer"})
    assert q.decoded.notes == ("key: String in the JVM",
                               "value: Avro in Python (no declared value.schema)")
    rows = q.drain()
    assert [orjson.loads(rows[o]["value"]) for o in (0, 1)] == [
        {"service": "a", "n": 1}, {"service": "b", "n": -2}]
    assert rows[0]["key"] == '"a"'

    v2 = AvroSerializer(client, orjson.dumps(V2).decode())
    new = v2({"service": "c", "n": 3, "level": "WARN"}, ctx)
    assert struct.unpack(">I", new[1:5])[0] == client.get_latest_version(subject).schema_id
    assert client.get_versions(subject) == [1, 2]  # registered after the query started
    good = v1({"service": "d", "n": 4}, ctx)
    _produce(kafka_bootstrap, topic, [
        (b"c", new), (b"d", b"\x01" + good[1:]), (b"e", struct.pack(">bI", 0, 987654321)),
        (b"f", good[:5] + b"\x02"), (b"g", good)])
    rows = q.drain()
    assert orjson.loads(rows[2]["value"]) == {"service": "c", "n": 3, "level": "WARN"}
    assert (rows[3]["error"], rows[3]["stage"]) == (
        "value is not Confluent-framed Avro: magic byte 1, 0 expected", "value.deserializer")
    assert rows[4]["error"] == "value: schema id 987654321 is unknown to the registry"
    assert rows[5]["error"].startswith(f"value: Avro body does not match schema id "
                                       f"{struct.unpack('>I', good[1:5])[0]}")
    assert orjson.loads(rows[6]["value"]) == {"service": "d", "n": 4}
    assert len(rows) == 7


def test_a_declared_reader_schema_reads_old_and_new_records(
        registry_url: str, client: SchemaRegistryClient, kafka_bootstrap: str,
        topic_factory: Callable[..., str], query: Callable[..., Query]) -> None:
    topic = topic_factory(partitions=1)
    ctx = SerializationContext(topic, MessageField.VALUE)
    newer = {**V2, "fields": [*V2["fields"], {"name": "host", "type": "string",
                                              "default": "?"}]}
    _produce(kafka_bootstrap, topic, [
        (None, AvroSerializer(client, orjson.dumps(V1).decode())({"service": "a", "n": 1},
                                                                 ctx)),
        (None, AvroSerializer(client, orjson.dumps(newer).decode())(
            {"service": "b", "n": 2, "level": "E", "host": "h1"}, ctx))])
    q = query(topic, {"schema.registry.url": registry_url,
                      "value.deserializer": "KafkaAvroDeserializer",
                      "value.schema": orjson.dumps(V2).decode()})
    rows = q.drain()
    assert orjson.loads(rows[0]["value"]) == {"service": "a", "n": 1, "level": None,
                                              "_extra": {}}
    assert orjson.loads(rows[1]["value"]) == {"service": "b", "n": 2, "level": "E",
                                              "_extra": {"host": '"h1"'}}


def test_an_incompatible_schema_is_refused_naming_subject_and_rule(
        registry_url: str, client: SchemaRegistryClient) -> None:
    topic = f"gs-serde-{uuid.uuid4().hex[:12]}"
    props = {"schema.registry.url": registry_url, "value.serializer": "Avro",
             "value.schema": orjson.dumps(V1).decode()}
    serializer(props, is_key=False).python(topic, {"service": "a", "n": 1})
    client.set_compatibility(f"{topic}-value", "BACKWARD")
    breaking = {**V1, "fields": [{"name": "service", "type": "long"}]}
    bad = serializer({**props, "value.schema": orjson.dumps(breaking).decode()}, is_key=False)
    with pytest.raises(CodecError, match=f"subject '{topic}-value' as incompatible "
                                         r"\(compatibility rule BACKWARD\)"):
        bad.python(topic, {"service": 7})
    assert client.get_versions(f"{topic}-value") == [1]


# ---------------------------------------------------------------------- JSON shapes


@pytest.mark.parametrize("unknown", ["extra", "drop"])
def test_heterogeneous_json_in_a_query(kafka_bootstrap: str, topic_factory: Callable[..., str],
                                       query: Callable[..., Query], unknown: str) -> None:
    topic = topic_factory(partitions=1)
    _produce(kafka_bootstrap, topic, [
        (None, b'{"id": 1, "name": "a"}'), (None, b'{"id": 2}'),
        (None, b'{"id": 3, "name": "c", "level": "W", "tags": [1]}'),
        (None, b'{"id": "four"}'), (None, b'[5]'), (None, b'{"id": 6')])
    q = query(topic, {"value.deserializer": "Json", "value.schema": "id bigint, name string",
                      "unknown.fields": unknown})
    rows = q.drain()
    extra = unknown == "extra"
    values = [orjson.loads(rows[o]["value"]) for o in (0, 1, 2)]
    assert values == [{"id": 1, "name": "a", **({"_extra": {}} if extra else {})},
                      {"id": 2, "name": None, **({"_extra": {}} if extra else {})},
                      {"id": 3, "name": "c", **({"_extra": {"level": '"W"', "tags": "[1]"}}
                                                if extra else {})}]
    assert [rows[o]["error"] for o in (3, 4, 5)] == [
        "value does not fit value.schema: field 'id': text, not a whole number",
        "value does not fit value.schema: value is a list, not an object",
        rows[5]["error"]]
    assert rows[5]["error"].startswith("value is not JSON")
    assert {rows[o]["stage"] for o in (3, 4, 5)} == {"value.deserializer"}
