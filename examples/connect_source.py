"""The source connector, end to end: grid caches → Kafka topics, exactly once.

Fills a few caches (the Space, owned by this process, or the stack's Hazelcast), starts a
BACKLOG source connector on Spark, stops it, changes every entry while it is stopped,
starts it again and reads the topics back ``read_committed``: every change is there
once, per key in order. Prints the connector's progress lines (records/s per batch).

    python examples/connect_source.py --grid space --caches 4 --keys 5000 --rounds 5
    python examples/connect_source.py --grid hazelcast

Needs the stack (``gridstream stack up``): Kafka, and Hazelcast for ``--grid hazelcast``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Consumer

from gridstream.connect.config import SourceConnectorConfig
from gridstream.connect.source import SourceConnector
from gridstream.spark import get_spark

BOOTSTRAP = "127.0.0.1:9092"


class Writer:
    """Puts entries into the chosen grid."""

    def __init__(self, grid: str, data_dir: Path) -> None:
        self.grid = grid
        if grid == "space":
            from gridstream.space import Space

            self.space = Space.embedded("example", data_dir=data_dir, fsync="never")
            self.settings: dict[str, Any] = {"kind": "space", "data_dir": str(data_dir),
                                             "space_name": "example"}
        else:
            from hazelcast.client import HazelcastClient
            from hazelcast.config import IntType

            from gridstream import stack

            service: Any = stack.services(["hazelcast"])[0]
            self.client = HazelcastClient(cluster_name=service.settings.cluster_name,
                                          cluster_members=[service.address],
                                          default_int_type=IntType.LONG)
            self.settings = {"kind": "hazelcast", "cluster_name": service.settings.cluster_name,
                             "members": [service.address]}

    def put_all(self, cache: str, entries: dict[str, dict[str, Any]]) -> None:
        if self.grid == "space":
            from gridstream.model import SpaceDocument

            with self.space.transaction() as tx:
                for key, value in entries.items():
                    tx.write(SpaceDocument(cache, {**value, "id": key}))
        else:
            from hazelcast.core import HazelcastJsonValue

            values: dict[Any, Any] = {k: HazelcastJsonValue(orjson.dumps(v).decode())
                                      for k, v in entries.items()}
            self.client.get_map(cache).blocking().put_all(values)

    def close(self) -> None:
        if self.grid == "space":
            self.space.close()
        else:
            self.client.shutdown()


def run_until(connector: SourceConnector, spark: Any, records: int) -> float:
    """Start the connector, wait until it has read ``records`` records, stop it; the
    seconds its batches took."""
    query = connector.start(spark)
    seen, seconds = 0, 0.0
    try:
        while seen < records:
            if not query.isActive:
                raise SystemExit(f"the connector failed: {query.exception()}")
            while connector.reports:
                report = connector.reports.popleft()
                print(report.line(), flush=True)
                seen += report.records
                seconds += report.seconds
            time.sleep(0.1)
    finally:
        query.stop()
        connector.close()
    return seconds


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--grid", choices=("space", "hazelcast"), default="space")
    parser.add_argument("--caches", type=int, default=4)
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="gridstream-source-"))
    writer = Writer(args.grid, work / "space")
    tag = uuid.uuid4().hex[:8]
    caches = [f"example{tag}c{i}" for i in range(args.caches)]
    keys = [f"k{k}" for k in range(args.keys)]
    try:
        for cache in caches:
            writer.put_all(cache, {k: {"key": k, "n": 0} for k in keys})
        config = SourceConnectorConfig.model_validate({
            "name": f"example-{tag}", "grid": writer.settings,
            "checkpoint": str(work / "checkpoint"), "topicPrefix": f"example-{tag}.",
            "cacheWhitelist": [f"example{tag}.*"], "failoverPolicy": "BACKLOG",
            "pollInterval": "1 second"})
        spark = get_spark(app_name="connect-source-example")
        # 1. the initial load (a snapshot of every cache)
        run_until(SourceConnector(config, bootstrap_servers=BOOTSTRAP), spark,
                  len(caches) * len(keys))
        # 2. changes while the connector is stopped ...
        for n in range(1, args.rounds + 1):
            for cache in caches:
                writer.put_all(cache, {k: {"key": k, "n": n} for k in keys})
        changes = args.rounds * len(caches) * len(keys)
        # 3. ... are read from the checkpointed positions (BACKLOG)
        seconds = run_until(SourceConnector(config, bootstrap_servers=BOOTSTRAP), spark,
                            changes)
        print(f"backlog: {changes:,} changes in {seconds:.2f}s of batches "
              f"({changes / seconds:,.0f} records/s)")
        spark.stop()
        return check(config.topic_prefix, caches, keys, args.rounds)
    finally:
        writer.close()


def check(prefix: str, caches: list[str], keys: list[str], rounds: int) -> int:
    """Every key's counters 0..rounds once each, in order, read ``read_committed``."""
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([prefix + c for c in caches])
    found: dict[tuple[str, str], list[int]] = {}
    expected = len(caches) * len(keys) * (rounds + 1)
    deadline = time.monotonic() + 120
    total = 0
    while total < expected and time.monotonic() < deadline:
        for message in consumer.consume(10_000, timeout=1):
            data, topic = message.value(), message.topic()
            if message.error() is None and data is not None and topic is not None:
                value = orjson.loads(data)
                found.setdefault((topic, value["key"]), []).append(value["n"])
                total += 1
    consumer.close()
    wrong = [k for k, ns in found.items() if ns != list(range(rounds + 1))]
    print(f"read {total:,} records of {expected:,}; keys with a counter missing, "
          f"repeated or out of order: {len(wrong)}")
    return 0 if total == expected and not wrong else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
