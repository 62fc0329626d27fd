"""Kafka topics → grid caches with the sink connector, on the Space or on Hazelcast.

    gridstream stack up --services kafka,hazelcast
    python examples/connect_sink.py [--grid space|hazelcast] [--records 20000] [--tasks 4]

Fills three topics with JSON entities (keys reused, so later records update earlier
ones), runs a ``SinkConnector`` until it has consumed them (one cache per topic,
``cachePrefix`` + topic), prints its progress lines and the records/s of its batches,
then checks each cache against the last value sent per key. On the Space the connector's
driver owns the Space (a fresh one in a temporary directory); on Hazelcast the example's
maps are destroyed at the end.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from gridstream.connect.config import SinkConnectorConfig
from gridstream.connect.sink import SinkConnector
from gridstream.grid.hazelcast import HazelcastAdapter
from gridstream.grid.settings import grid_adapter
from gridstream.spark import get_spark


def _stack_cluster() -> str:
    from gridstream import stack
    from gridstream.stack.hazelcast import HazelcastService

    service = stack.services(["hazelcast"])[0]
    assert isinstance(service, HazelcastService)
    return service.settings.cluster_name


def produce(bootstrap: str, topic: str, records: int, keys: int,
            seed: int) -> dict[Any, dict[str, Any]]:
    """``records`` puts over ``keys`` keys; the last value sent per key."""
    rng = random.Random(seed)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 20})
    last: dict[Any, dict[str, Any]] = {}
    for n in range(records):
        key = f"k{rng.randrange(keys)}"
        value = {"id": key, "n": n, "name": f"entity {n}", "tags": ["a", "b"],
                 "address": {"city": f"c{n % 11}", "zip": None}}
        last[key] = value
        while True:
            try:
                producer.produce(topic, key=orjson.dumps(key), value=orjson.dumps(value))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    producer.flush(60)
    return last


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--grid", choices=("space", "hazelcast"), default="space")
    parser.add_argument("--cluster-name", default=None,
                        help="Hazelcast cluster name (default: the stack's)")
    parser.add_argument("--member", default="127.0.0.1:5701")
    parser.add_argument("--records", type=int, default=20_000, help="per topic")
    parser.add_argument("--keys", type=int, default=5_000, help="per topic")
    parser.add_argument("--tasks", type=int, default=4, help="tasks.max (Hazelcast)")
    args = parser.parse_args()

    run = uuid.uuid4().hex[:8]
    topics = [f"example-sink-{run}-{i}" for i in range(3)]
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    for topic in topics:
        admin.create_topics([NewTopic(topic, num_partitions=3)])[topic].result(30)
    expected = {t: produce(args.bootstrap, t, args.records, args.keys, i)
                for i, t in enumerate(topics)}

    with tempfile.TemporaryDirectory() as tmp:
        if args.grid == "space":
            grid: dict[str, Any] = {"kind": "space", "data_dir": str(Path(tmp) / "space"),
                                    "space_name": "example"}
        else:
            cluster = args.cluster_name or _stack_cluster()
            grid = {"kind": "hazelcast", "cluster_name": cluster, "members": [args.member]}
        config = SinkConnectorConfig.model_validate({
            "name": "example-sink", "grid": grid, "checkpoint": str(Path(tmp) / "checkpoint"),
            "topics": topics, "cachePrefix": f"example-{run}-", "tasks.max": args.tasks,
            "shallProcessUpdates": True, "pushInterval": "1 second"})
        connector = SinkConnector(config, bootstrap_servers=args.bootstrap)
        print(f"starting {connector.describe()}")
        spark = get_spark(app_name="connect-sink-example")
        started = time.monotonic()
        query = connector.start(spark)
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        wall = time.monotonic() - started
        reports = list(connector.reports)
        for report in reports:
            print(report.line())
        records = sum(r.records for r in reports)
        busy = sum(r.seconds for r in reports)
        print(f"{records} records in {busy:.1f}s of batches ({records / busy:,.0f} rec/s), "
              f"{wall:.1f}s from start to caught up")
        connector.close()  # the Space is closed by its owner; read it back from its log
        spark.stop()
        differ = []
        with grid_adapter(config.grid) as check:
            for topic in topics:
                cache = config.cache_prefix + topic
                held = {e.key: e.value for b in check.snapshot(cache, 10_000) for e in b}
                print(f"{cache}: {len(held)} entries, equal to the last value sent per key: "
                      f"{held == expected[topic]}")
                if held != expected[topic]:
                    differ.append(cache)
                if isinstance(check, HazelcastAdapter):
                    check.client.get_map(cache).blocking().destroy()
        for topic in topics:
            admin.delete_topics([topic])[topic].result(30)
        if differ:
            raise SystemExit(f"caches that differ from the last value sent: {differ}")


if __name__ == "__main__":
    main()
