"""Kafka → Hazelcast map with the pipeline API, EXACTLY_ONCE.

    gridstream stack up --services kafka,hazelcast
    python examples/pipeline_kafka_to_hazelcast.py [--records 5000] [--keys 500]

Fills a topic with order events as JSON text (``{"order": "o-12", "status": "paid",
"qty": 3}``; one in ten a ``"cancelled"`` status), runs a pipeline that parses each
event, turns it into a map entry (order id → the order; a cancelled order is removed)
and writes it to a Hazelcast map with ``EXACTLY_ONCE`` (versioned writes: a batch run
again after a crash writes nothing twice), then checks the map against the last event
of each order and prints what it found. The topic, the checkpoint and the map are the
example's own (removed at the end).
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import uuid
from typing import Any

import orjson
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig
from gridstream.grid.hazelcast._writes import versions_map
from gridstream.pipeline import GridSinks, Guarantee, KafkaSources, Pipeline, entry
from gridstream.spark import get_spark


def _stack_hazelcast() -> tuple[str, str]:
    """The stack's Hazelcast cluster name and member address."""
    from gridstream import stack
    from gridstream.stack.hazelcast import HazelcastService

    service = stack.services(["hazelcast"])[0]
    assert isinstance(service, HazelcastService)
    return service.settings.cluster_name, service.address


def produce(bootstrap: str, topic: str, records: int, keys: int) -> dict[str, Any]:
    """``records`` order events over ``keys`` orders; each order's expected entry."""
    rng = random.Random(7)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 20})
    expected: dict[str, Any] = {}
    for n in range(records):
        order = f"o-{rng.randrange(keys)}"
        status = "cancelled" if rng.random() < 0.1 else rng.choice(["new", "paid", "sent"])
        event = {"order": order, "status": status, "qty": rng.randrange(1, 10), "n": n}
        producer.produce(topic, key=order.encode(), value=orjson.dumps(event))
        producer.poll(0)
        if status == "cancelled":
            expected.pop(order, None)
        else:
            expected[order] = {"status": status, "qty": event["qty"], "n": n}
    assert producer.flush(60) == 0
    return expected


def parse(kv: tuple[str, str]) -> dict[str, Any]:
    return orjson.loads(kv[1])  # type: ignore[no-any-return]


def to_entry(event: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """Order id → the order; a cancelled order is removed (value None)."""
    if event["status"] == "cancelled":
        return entry(event["order"], None)
    return entry(event["order"], {"status": event["status"], "qty": event["qty"],
                                  "n": event["n"]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--keys", type=int, default=500)
    args = parser.parse_args()
    cluster, member = _stack_hazelcast()
    run = uuid.uuid4().hex[:8]
    topic, cache = f"orders-{run}", f"orders-{run}"
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(30)
    checkpoint = tempfile.mkdtemp(prefix="gs-orders-")
    grid = {"kind": "hazelcast", "cluster_name": cluster, "members": [member]}
    config = HazelcastGridConfig(cluster_name=cluster, members=(member,))
    try:
        expected = produce(args.bootstrap, topic, args.records, args.keys)
        props = {"bootstrap.servers": args.bootstrap, "key.deserializer": "StringDeserializer",
                 "value.deserializer": "StringDeserializer", "auto.offset.reset": "earliest"}
        p = Pipeline.create(name="orders-to-hazelcast")
        (p.read_from(KafkaSources.kafka(props, topic, max_offsets_per_trigger=2000))
          .map(parse)
          .map(to_entry)
          .write_to(GridSinks.map(grid, cache)))
        spark = get_spark(app_name="pipeline-kafka-to-hazelcast")
        job = p.job(guarantee=Guarantee.EXACTLY_ONCE, checkpoint=checkpoint,
                    trigger="available_now")
        print(job.describe())
        try:
            job.start(spark).awaitTermination()
        finally:
            job.close()
        if job.failure is not None:
            raise SystemExit(f"the pipeline failed: {job.failure}")
        for batch_id, counts in sorted(job.batches.items()):
            print(f"batch {batch_id}: {counts}")
        with HazelcastAdapter(config) as adapter:
            held = {e.key: e.value for b in adapter.snapshot(cache, 5000) for e in b}
        wrong = sorted(k for k in expected.keys() | held.keys()
                       if expected.get(k) != held.get(k))
        print(f"map {cache!r}: {len(held)} entries, {len(expected)} expected, "
              f"{len(wrong)} differ{': ' + ', '.join(map(str, wrong[:5])) if wrong else ''}")
        if wrong:
            raise SystemExit(1)
    finally:
        with HazelcastAdapter(config) as adapter:
            for name in (cache, versions_map(cache)):
                adapter.client.get_map(name).blocking().destroy()
        admin.delete_topics([topic])[topic].result(30)
        shutil.rmtree(checkpoint, ignore_errors=True)


if __name__ == "__main__":
    main()
