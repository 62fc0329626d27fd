"""The demo's Hazelcast half: orders in a Hazelcast map → the source connector (exactly
once) → Kafka → two API pipelines (a map/filter, a windowed aggregation) → Kafka → the
sink connector → two Hazelcast maps; every one read back and compared with what it must
hold.

The flows run in one ``gridstream run`` (``gridstream.run.config.run_flows``), beside the
demo's store feeds, with the status page served. ``Orders`` writes the workload
while they run and ``Watch`` says when they are done:

1. once the source connector has run a batch, the workload's changes are written;
2. once the topic holds the map's content (every change is in Kafka, per key in order)
   and the window pipeline has read every record, one last order far later in event
   time moves the watermark past every window of the workload;
3. once every map holds what it must (or ``timeout_s`` has passed), the run stops.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Consumer

from gridstream.demo import flows
from gridstream.grid.contract import Write
from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig
from gridstream.reconcile import Holding, compare
from gridstream.reconcile.compare import Entity

__all__ = ["HzNames", "Orders", "TopicReader", "Watch", "expectations", "expected_windows",
           "flows_config", "holding", "hz_config", "paid", "read_map"]

START_MS = 1_767_225_600_000
"""The first order's event time (2026-01-01T00:00:00Z); each next one 0.5 s later."""
STEP_MS = 500
WINDOW = "10 seconds"
WINDOW_MS = 10_000
WATERMARK = "1 hour"
WATERMARK_MS = 3_600_000
CLOSING = "o-closing"


@dataclass(frozen=True)
class HzNames:
    """The run's maps; each topic is named as its map."""

    orders: str
    paid: str
    windows: str

    @classmethod
    def of(cls, run_id: str) -> HzNames:
        return cls(f"demo-{run_id}-orders", f"demo-{run_id}-paid-orders",
                   f"demo-{run_id}-order-windows")


def hz_config() -> HazelcastGridConfig:
    """The stack's Hazelcast member."""
    from gridstream import stack
    from gridstream.stack.hazelcast import HazelcastService

    service = stack.services(["hazelcast"])[0]
    assert isinstance(service, HazelcastService)
    return HazelcastGridConfig(service.settings.cluster_name, (service.address,))


def flows_config(names: HzNames, hz: HazelcastGridConfig, checkpoints: Path
                 ) -> dict[str, list[dict[str, Any]]]:
    """The connectors and API pipelines, as a run file's ``[[connector]]`` and
    ``[[pipeline]]`` tables."""
    grid = {"kind": "hazelcast", "cluster_name": hz.cluster_name, "members": list(hz.members)}
    read = {"kind": "kafka", "topics": [names.orders], "properties": {
        "key.deserializer": "JsonDeserializer", "value.deserializer": "JsonDeserializer",
        "auto.offset.reset": "earliest"}}

    def write(topic: str) -> dict[str, Any]:
        return {"kind": "kafka", "topic": topic, "properties": {
            "key.serializer": "JsonSerializer", "value.serializer": "JsonSerializer"}}

    def step(kind: str, function: str, **more: Any) -> dict[str, Any]:
        return {kind: f"gridstream.demo.flows:{function}", **more}

    def pipeline(name: str, sink: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
        return {"name": name, "guarantee": "EXACTLY_ONCE", "trigger": "1 second",
                "checkpoint": str(checkpoints / name), "source": read, "steps": steps,
                "sink": write(sink)}

    window = {"size": WINDOW, "key": "status", "timestamp": "at", "watermark": WATERMARK,
              "aggregate": {"changes": "count", "amount": ["sum", "amount"]}}
    return {
        "connector": [
            {"name": "orders-to-kafka", "kind": "source", "grid": grid,
             "checkpoint": str(checkpoints / "orders-to-kafka"),
             "cacheWhitelist": [names.orders], "failoverPolicy": "BACKLOG",
             "shallProcessRemovals": True, "pollInterval": "200 milliseconds",
             "idlePollInterval": "500 milliseconds"},
            {"name": "results-to-hazelcast", "kind": "sink", "grid": grid,
             "checkpoint": str(checkpoints / "results-to-hazelcast"),
             "topics": [names.paid, names.windows], "pushInterval": "1 second",
             "shallProcessUpdates": True},
        ],
        "pipeline": [
            pipeline("paid-orders", names.paid, [step("filter", "paid_or_removed"),
                                                 step("map", "paid_entry")]),
            pipeline("order-windows", names.windows, [
                step("filter", "live"), step("map", "order_row", schema=flows.ORDER_ROW),
                {"window": window}, step("map", "window_entry")]),
        ],
    }


class Orders:
    """The orders workload, written to the map while the flows run: new orders, orders
    paid and shipped (a status only moves forward), amounts amended, orders removed."""

    def __init__(self, adapter: HazelcastAdapter, cache: str, operations: int,
                 seed: int = 11) -> None:
        self.adapter, self.cache, self.operations = adapter, cache, operations
        self._rng = random.Random(seed)  # noqa: S311 - a reproducible workload
        self._live: dict[str, dict[str, Any]] = {}
        self._at = START_MS
        self._next_id = 0

    def _put(self, order: dict[str, Any]) -> None:
        order["at"] = self._at
        self._at += STEP_MS
        self._live[order["id"]] = order
        self.adapter.apply(self.cache, [Write(order["id"], order)])

    def _new(self) -> None:
        oid = f"o-{self._next_id}"
        self._next_id += 1
        self._put({"id": oid, "customer": f"c-{self._rng.randrange(40)}",
                   "amount": self._rng.randrange(1, 10_000), "status": "NEW"})

    def first(self) -> None:
        """One order before the flows start: the map exists for the connector's
        snapshot."""
        self._new()

    def run(self) -> int:
        """The workload; the changes written."""
        for _ in range(self.operations):
            roll = self._rng.random()
            if roll < 0.35 or len(self._live) < 5:
                self._new()
                continue
            oid = self._rng.choice(sorted(self._live))
            order = dict(self._live[oid])
            if roll < 0.85 and order["status"] != "SHIPPED":
                order["status"] = "PAID" if order["status"] == "NEW" else "SHIPPED"
                self._put(order)
            elif roll < 0.93:
                order["amount"] = self._rng.randrange(1, 10_000)
                self._put(order)
            else:
                del self._live[oid]
                self.adapter.apply(self.cache, [Write(oid, None)])
        return self.operations

    def close(self) -> None:
        """The order that moves the watermark past every window of the workload."""
        self._at += 2 * WATERMARK_MS
        self._put({"id": CLOSING, "customer": "c-0", "amount": 1, "status": "NEW"})


class TopicReader:
    """A topic's committed records, ``(key, value)`` decoded from JSON, read as they
    come (``read``) until ``read_to_end``."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.records: list[tuple[Any, Any]] = []
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"demo-read-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest", "isolation.level": "read_committed",
            "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
        self._consumer.subscribe([topic])

    def read(self, timeout_s: float = 0.2) -> int:
        """What has come since the last read; the number of records."""
        got = 0
        while True:
            batch = self._consumer.consume(10_000, timeout=timeout_s)
            for message in batch:
                if message.error() is not None:
                    continue  # the topic not there yet: read again later
                key, value = message.key(), message.value()
                self.records.append((None if key is None else orjson.loads(key),
                                     None if value is None else orjson.loads(value)))
            got += len(batch)
            if not batch:
                return got

    def read_to_end(self, quiet_s: float = 2.0) -> None:
        """Read until nothing came for ``quiet_s`` (nothing is written any more)."""
        while self.read(quiet_s):
            pass

    def current(self) -> dict[Any, Any]:
        """Each key's last value; a key whose last record is a tombstone is gone."""
        state: dict[Any, Any] = {}
        for key, value in self.records:
            if value is None:
                state.pop(key, None)
            else:
                state[key] = value
        return state

    def close(self) -> None:
        self._consumer.close()


def read_map(adapter: HazelcastAdapter, cache: str) -> dict[Any, Any]:
    return {e.key: e.value for batch in adapter.snapshot(cache, 1000) for e in batch}


def paid(orders: Mapping[Any, Any]) -> dict[Any, Any]:
    """What the paid-orders map must hold for the grid's orders."""
    return dict(flows.paid_entry((k, v)) for k, v in orders.items() if v["status"] in flows.PAID)


def expected_windows(records: Iterable[tuple[Any, Any]]) -> dict[str, Any]:
    """The windows the aggregation must have emitted for ``records``, computed here:
    each live record (an order's change) counted in its status's 10-second window of
    ``at``, with its amount; a window is
    emitted once the watermark (the newest ``at`` less an hour) has passed its end."""
    windows: dict[str, dict[str, Any]] = {}
    newest = None
    for _, order in records:
        if order is None:
            continue
        at = order["at"]
        newest = at if newest is None else max(newest, at)
        start = at - at % WINDOW_MS
        key = flows.window_key(order["status"], start)
        window = windows.setdefault(key, {"status": order["status"], "start": start,
                                          "end": start + WINDOW_MS, "changes": 0, "amount": 0})
        window["changes"] += 1
        window["amount"] += order["amount"]
    if newest is None:
        return {}
    return {k: w for k, w in windows.items() if w["end"] <= newest - WATERMARK_MS}


def holding(place: str, cache: str, content: Mapping[Any, Any]) -> Holding:
    """A map's (or a topic's) entries as a place of the reconciliation: no versions."""
    return Holding(place, {(cache, str(k)): Entity(0, v) for k, v in content.items()}, {})


def expectations(adapter: HazelcastAdapter, names: HzNames, topic: TopicReader
                 ) -> list[tuple[str, Holding, Holding]]:
    """Each place of the Hazelcast half: (what it is compared with, what it must hold,
    what it holds). The topic must hold the orders map's content; ``paid-orders`` the
    map's orders paid or shipped; ``order-windows`` the windows computed here from the
    topic's records."""
    orders = read_map(adapter, names.orders)
    return [
        ("the orders map", holding("hz orders", names.orders, orders),
         holding("kafka orders", names.orders, topic.current())),
        ("its paid orders", holding("expected", names.paid, paid(orders)),
         holding("hz paid-orders", names.paid, read_map(adapter, names.paid))),
        ("the topic's windows",
         holding("expected", names.windows, expected_windows(topic.records)),
         holding("hz order-windows", names.windows, read_map(adapter, names.windows))),
    ]


class Watch:
    """``until`` of the demo's run (see the module's docstring); ``outcome`` says how it
    ended, ``caught_up`` whether every place got what it must hold in time. Asked from
    the run's watcher thread only."""

    def __init__(self, orders: Orders, names: HzNames, adapter: HazelcastAdapter,
                 topic: TopicReader, store_flows: Iterable[str], timeout_s: float) -> None:
        self.orders, self.names, self.adapter, self.topic = orders, names, adapter, topic
        self.store_flows = list(store_flows)
        self.deadline: float | None = None
        """From the first question (the run has started its flows by then)."""
        self.timeout_s = timeout_s
        self.phase = 0
        self.outcome = "running"
        self.caught_up = False

    def __call__(self, monitor: Any) -> bool:
        failed = monitor.status()["failed"]
        if failed:
            self.outcome = f"stopped: {', '.join(failed)} failed"
            return True
        if self.deadline is None:
            self.deadline = time.monotonic() + self.timeout_s
        if time.monotonic() > self.deadline:
            self.outcome = (f"stopped after {self.timeout_s:g}s without every place "
                            f"caught up (phase {self.phase} of 2)")
            return True
        if self.phase == 0 and monitor.flow("orders-to-kafka").batches:
            self.orders.run()
            self.phase = 1
        self.topic.read()
        if self.phase == 1:
            grid = read_map(self.adapter, self.names.orders)
            if (self.topic.current() == grid
                    and monitor.flow("order-windows").read >= len(self.topic.records)):
                self.orders.close()
                self.phase = 2
            return False  # judged once the closing order is in the topic
        if self.phase == 2 and self._caught_up() and all(
                monitor.flow(n).state == "finished" for n in self.store_flows):
            self.outcome, self.caught_up = "every flow caught up", True
            return True
        return False

    def _caught_up(self) -> bool:
        if CLOSING not in self.topic.current():
            return False
        places = expectations(self.adapter, self.names, self.topic)
        return bool(places[2][1].entities) and all(
            compare(want, got).matches for _, want, got in places)
