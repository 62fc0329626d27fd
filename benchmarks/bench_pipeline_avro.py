"""Avro decode against JSON decode in the pipeline API, in ONE warm Spark session (not a
whole-process timing).

The same records (``service``, ``n``, ``level``, ``msg``: about 100 bytes of JSON) are in
two topics, as JSON and as Confluent-framed Avro (the stack's schema registry). Each side
is a pipeline read to the topic's end (``available_now``, ``AT_LEAST_ONCE``) into a fresh
topic with a fresh checkpoint:

- ``json``: ``Json`` with ``value.schema`` (decoded in the Python pass), a map to
  ``(key, "service:n")``, String sink;
- ``avro-python``: ``KafkaAvroDeserializer`` with ``value.schema`` in Python (fastavro; the
  topic given as a pattern, so the subjects are not known before the query), same map;
- ``avro-jvm``: the same in the JVM (``from_avro``), same map;
- ``avro-no-python``: Avro in, Avro out (``to_avro``), no step: a plan with no Python.

Every side's output is read back and checked record by record. Each side runs once to
warm up, then ``--repeat`` times in rotating order; medians, and each side against
``json``.

Usage: python benchmarks/bench_pipeline_avro.py [--records 500000] [--repeat 3]
[--partitions 2] [--smoke]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fastavro
import orjson
from confluent_kafka import Producer

from benchmarks import _smoke
from benchmarks._pipeline_bench import (
    BOOTSTRAP,
    create_topics,
    delete_topics,
    fresh_topic,
    send,
    summary,
    warm_rounds,
)
from benchmarks._spark_bench import read_to_end

REGISTRY = "http://127.0.0.1:8081/apis/ccompat/v7"
SCHEMA = {"type": "record", "name": "Event", "namespace": "gs.bench", "fields": [
    {"name": "service", "type": "string"}, {"name": "n", "type": "long"},
    {"name": "level", "type": ["null", "string"], "default": None},
    {"name": "msg", "type": "string"}]}
DDL = "service string, n bigint, level string, msg string"
MSG = "the quick brown fox jumps over the lazy dog, 0123456789"


def event(i: int) -> dict[str, Any]:
    return {"service": f"svc-{i % 50}", "n": i, "level": None if i % 3 else "WARN",
            "msg": MSG}


def service_entry(kv: tuple[Any, Any]) -> tuple[Any, Any]:
    """The map of the decoding sides: the key, ``service:n``."""
    return kv[0], f"{kv[1]['service']}:{kv[1]['n']}"


def _fill(json_topic: str, avro_topic: str, records: int) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": REGISTRY})
    header = AvroSerializer(client, orjson.dumps(SCHEMA).decode())(
        event(0), SerializationContext(avro_topic, MessageField.VALUE))[:5]
    parsed = fastavro.parse_schema(SCHEMA)
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 20,
                         "enable.idempotence": True, "compression.type": "lz4"})
    for i in range(records):
        value = event(i)
        body = io.BytesIO()
        body.write(header)
        fastavro.schemaless_writer(body, parsed, value)
        for topic, data in ((json_topic, orjson.dumps(value)), (avro_topic, body.getvalue())):
            send(producer, topic, data, b"%d" % i)
    if producer.flush(60):
        raise AssertionError("records undelivered after 60 s")


def _check(topic: str, records: int, avro: bool) -> None:
    """Every input record once or more (at-least-once), each output its input's."""
    seen = bytearray(records)
    wrong = 0
    for m in read_to_end(topic, BOOTSTRAP):
        i = int(m.key())
        value = m.value() or b""
        if avro:
            got = fastavro.schemaless_reader(io.BytesIO(value[5:]), SCHEMA, None)
            good = got == event(i)
        else:
            good = value == f"svc-{i % 50}:{i}".encode()
        if not good or not 0 <= i < records:
            wrong += 1
            continue
        seen[i] = 1
    if wrong or seen.count(0):
        raise AssertionError(f"{topic}: {wrong} wrong, {seen.count(0)} missing")


def _pipeline(side: str, source: str, target: str, checkpoint: str) -> Any:
    from gridstream.pipeline import Guarantee, KafkaSinks, KafkaSources, Pipeline

    avro = side.startswith("avro")
    props: dict[str, Any] = {
        "bootstrap.servers": BOOTSTRAP, "auto.offset.reset": "earliest",
        "key.deserializer": "String", "unknown.fields": "drop",
        "value.deserializer": "KafkaAvroDeserializer" if avro else "Json",
        "value.schema": orjson.dumps(SCHEMA).decode() if avro else DDL}
    if avro:
        props["schema.registry.url"] = REGISTRY
    out: dict[str, Any] = {"bootstrap.servers": BOOTSTRAP, "key.serializer": "String",
                           "value.serializer": "String"}
    by_pattern = side == "avro-python"
    read = KafkaSources.kafka(props, None if by_pattern else source,
                              pattern=f"^{source}$" if by_pattern else None)
    p = Pipeline.create(name=f"bench-{side}")
    if side == "avro-no-python":
        out.update({"value.serializer": "KafkaAvroSerializer", "schema.registry.url": REGISTRY,
                    "value.schema": orjson.dumps(SCHEMA).decode()})
        p.read_from(read).write_to(KafkaSinks.kafka(out, target))
    else:
        p.read_from(read).map(service_entry).write_to(KafkaSinks.kafka(out, target))
    return p.job(Guarantee.AT_LEAST_ONCE, checkpoint, "available_now")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = _smoke.parse_args(parser, argv, records=200, repeat=1)
    from gridstream.spark import get_spark

    spark = get_spark(app_name="bench-pipeline-avro")
    json_topic, avro_topic = fresh_topic("gs-bench-json"), fresh_topic("gs-bench-avro")
    topics = [json_topic, avro_topic]
    sides = ["json", "avro-python", "avro-jvm", "avro-no-python"]
    described: dict[str, str] = {}

    def run(side: str, target: str, checkpoint: str) -> Callable[[], Any]:
        job = _pipeline(side, json_topic if side == "json" else avro_topic, target,
                        checkpoint)
        job.start(spark).awaitTermination()
        if job.failure is not None:
            raise AssertionError(f"{side}: {job.failure}")
        described[side] = job.describe().splitlines()[-1].strip()
        return job.close

    def after(side: str, target: str, r: int, seconds: float) -> None:
        _check(target, args.records, side == "avro-no-python")
        print(json.dumps({"round": r, "side": side, "s": round(seconds, 2)}),
              file=sys.stderr, flush=True)

    try:
        create_topics(topics, args.partitions)
        _fill(json_topic, avro_topic, args.records)
        times = warm_rounds(sides, run, repeat=args.repeat, partitions=args.partitions,
                            topics=topics, after=after)
    finally:
        spark.stop()
        delete_topics(topics)
    print(json.dumps({"records": args.records, "partitions": args.partitions,
                      **summary(times, args.records, "json"), "runs": described}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
