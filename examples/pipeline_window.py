"""A windowed aggregation, Kafka → Kafka: requests per service and 10-second window.

    gridstream stack up --services kafka
    python examples/pipeline_window.py [--bootstrap 127.0.0.1:9092] [--services 3]

Writes request records (``{"service": ..., "bytes": ...}``) with chosen timestamps over a
minute of event time, then runs the pipeline

    read (value: JSON) → map (parse, schema "service string, bytes long")
    → window("10 seconds", key="service", aggregate={"requests": "count",
             "bytes": ("sum", "bytes"), "largest": ("max", "bytes")})
    → map (a text line per window) → write (Kafka)

until every window of that minute is emitted (append mode: a window is written once,
when the watermark — the newest event time read minus 5 seconds — passes its end; the
last record, 20 seconds after the minute, moves the watermark past it). The aggregation
runs in the JVM; the two maps run in Python (one mapInArrow pass each side of it).
Prints the output topic, and the batch reports (``late`` counts records the watermark
dropped: the example sends one).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from typing import Any

import orjson
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gridstream.pipeline import Guarantee, KafkaSinks, KafkaSources, Pipeline, entry
from gridstream.spark import get_spark

START = 1_700_000_000_000  # event time of the first request (ms), on a 10 s boundary


def parse(value: str) -> dict[str, Any]:
    return orjson.loads(value)  # type: ignore[no-any-return]


def line(w: dict[str, Any]) -> tuple[str, str]:
    return entry(w["key"], f"{w['window_start']:%H:%M:%S}-{w['window_end']:%H:%M:%S} "
                           f"{w['requests']} requests, {w['bytes']} bytes, "
                           f"largest {w['largest']}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--services", type=int, default=3)
    args = parser.parse_args()
    source, target = f"example-req-{uuid.uuid4().hex[:8]}", f"example-win-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    for topic in (source, target):
        # the records' event times are of 2023: a topic with the broker's retention (7
        # days) would lose them at its next retention check, while the query reads
        admin.create_topics([NewTopic(topic, num_partitions=1,
                                      config={"retention.ms": "-1"})])[topic].result(30)

    producer = Producer({"bootstrap.servers": args.bootstrap})
    records = [(START + i * 250, f"svc-{i % args.services}", 100 + i) for i in range(240)]
    records.append((START + 80_000, "svc-0", 1))  # moves the watermark past the minute
    for at, service, size in records:
        producer.produce(source, orjson.dumps({"service": service, "bytes": size}),
                         timestamp=at)
    producer.flush(30)

    windows = -(-60_000 // 10_000) * args.services  # every window of the minute
    props = {"bootstrap.servers": args.bootstrap, "value.deserializer": "StringDeserializer",
             "auto.offset.reset": "earliest"}
    out = {"bootstrap.servers": args.bootstrap, "key.serializer": "StringSerializer",
           "value.serializer": "StringSerializer"}
    p = Pipeline.create(name="requests-per-window")
    (p.read_from(KafkaSources.kafka(props, source, projection="value"))
      .map(parse, schema="service string, bytes long")
      .window("10 seconds", key="service", watermark="5 seconds",
              aggregate={"requests": "count", "bytes": ("sum", "bytes"),
                         "largest": ("max", "bytes")})
      .map(line)
      .write_to(KafkaSinks.kafka(out, target)))

    spark = get_spark(app_name="pipeline-window")
    with tempfile.TemporaryDirectory() as checkpoint:
        job = p.job(guarantee=Guarantee.AT_LEAST_ONCE, checkpoint=checkpoint,
                    trigger="1 second")
        print(job.describe())
        query = job.start(spark)
        try:
            lines = _read(args.bootstrap, target, windows, query)
            if not query.isActive and query.exception() is not None:
                raise SystemExit(f"the query stopped: {query.exception()}")
            late_at = START + 1_000  # its window ended long ago: dropped and counted
            producer.produce(source, orjson.dumps({"service": "svc-0", "bytes": 5}),
                             timestamp=late_at)
            producer.flush(30)
            late, deadline = 0, time.monotonic() + 120
            while late == 0 and time.monotonic() < deadline and query.isActive:
                time.sleep(1)
                while job.reports:
                    report = job.reports.popleft()
                    late += report.extra.get("late", 0)
                    print(report.line())
        finally:
            job.close()
    for key, value in lines:
        print(f"{key}: {value}")
    print(f"{len(lines)} windows ({windows} expected)")


def _read(bootstrap: str, topic: str, count: int, query: Any) -> list[tuple[str, str]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out: list[tuple[str, str]] = []
    deadline = time.monotonic() + 300
    try:
        while len(out) < count and time.monotonic() < deadline and query.isActive:
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                out.append(((msg.key() or b"").decode(), (msg.value() or b"").decode()))
    finally:
        consumer.close()
    return sorted(out, key=lambda kv: (kv[1], kv[0]))


if __name__ == "__main__":
    main()
