"""``gridstream demo``: the quickstart, end to end, on embedded defaults."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.table import Table

from gridstream import stack

__all__ = ["run_demo"]

console = Console()


@contextmanager
def _step(title: str) -> Iterator[None]:
    started = time.monotonic()
    console.print(f"[bold cyan]>[/] {title} ...")
    yield
    console.print(f"  [green]done[/] in {time.monotonic() - started:.1f}s")


def _round_trip(bootstrap: str, records: int) -> Table:
    """confluent-kafka produces -> Spark reads and counts per key -> Spark writes to Kafka
    -> confluent-kafka reads the counts back."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    from gridstream.spark import get_spark

    source, target = f"demo-in-{uuid.uuid4().hex[:8]}", f"demo-out-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(t, 3, 1) for t in (source, target)]).values():
        fut.result(30)
    sent: Counter[str] = Counter()
    with _step(f"producing {records} keyed records to {source}"):
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        for i in range(records):
            key = f"sensor-{i % 8}"
            producer.produce(source, key=key, value=f'{{"reading": {i}}}')
            sent[key] += 1
        producer.flush(30)
    with _step("starting Spark (local[2]) and counting per key"):
        spark = get_spark(app_name="gridstream-demo")
        counts = (
            spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source).option("startingOffsets", "earliest").load()
            .selectExpr("CAST(key AS STRING) AS key").groupBy("key").count()
            .selectExpr("key", "CAST(count AS STRING) AS value")
        )
        counts.write.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
            .option("topic", target).save()
    received: dict[str, int] = {}
    with _step(f"reading the counts back from {target}"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([target])
        deadline = time.monotonic() + 60
        while len(received) < len(sent) and time.monotonic() < deadline:
            for msg in consumer.consume(100, timeout=1.0):
                raw_key, raw_value = msg.key(), msg.value()
                if msg.error() is None and raw_key is not None and raw_value is not None:
                    received[raw_key.decode()] = int(raw_value)
        consumer.close()
    table = Table(title="Kafka -> Spark -> Kafka round trip")
    for column in ("key", "produced", "counted by Spark", "match"):
        table.add_column(column)
    for key in sorted(sent):
        ok = received.get(key) == sent[key]
        table.add_row(key, str(sent[key]), str(received.get(key, "-")),
                      "[green]yes[/]" if ok else "[red]NO[/]")
    return table


def run_demo(*, keep_stack: bool = False, operations: int = 2000) -> int:
    """Run the quickstart; return the process exit code."""
    with _step("starting the local stack (Kafka)"):
        (kafka,) = stack.services(["kafka"])
        was_up = kafka.status().state == "up"
        kafka.up()
    try:
        table = _round_trip(kafka.address, operations)
        console.print(table)
    finally:
        if not was_up and not keep_stack:
            kafka.down()
    return 0
