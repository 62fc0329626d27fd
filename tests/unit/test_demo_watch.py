"""The demo's ``Watch``: when the Hazelcast half's flows count as caught up."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from gridstream.demo import flows
from gridstream.demo.hazelcast import (
    CLOSING,
    START_MS,
    HzNames,
    TopicReader,
    Watch,
    expected_windows,
    paid,
)
from gridstream.grid.contract import Entry

NAMES = HzNames.of("t")


class Maps:
    """A grid adapter's ``snapshot`` over plain dicts."""

    def __init__(self) -> None:
        self.maps: dict[str, dict[Any, Any]] = {}

    def snapshot(self, cache: str, batch_size: int) -> Iterator[list[Entry]]:
        yield [Entry(k, v) for k, v in self.maps.get(cache, {}).items()]


class Topic(TopicReader):
    """What the connector wrote reaches ``records`` at the next ``read``."""

    def __init__(self) -> None:  # no consumer
        self.records = []
        self.pending: list[tuple[Any, Any]] = []

    def read(self, timeout_s: float = 0.2) -> int:
        got, self.pending = self.pending, []
        self.records += got
        return len(got)


class Orders:
    """Writes the orders map and the topic the connector would fill."""

    def __init__(self, maps: Maps, topic: Topic) -> None:
        self.maps, self.topic = maps, topic

    def _put(self, order: dict[str, Any]) -> None:
        self.maps.maps.setdefault(NAMES.orders, {})[order["id"]] = order
        self.topic.pending.append((order["id"], order))

    def run(self) -> int:
        for i in range(3):
            self._put({"id": f"o-{i}", "customer": "c", "amount": i, "status": "PAID",
                       "at": START_MS + i * 500})
        return 3

    def close(self) -> None:
        self._put({"id": CLOSING, "customer": "c", "amount": 1, "status": "NEW",
                   "at": START_MS + 10_000_000})


class Monitor:
    def __init__(self) -> None:
        self.failed: list[str] = []
        self.flows = {n: SimpleNamespace(batches=1, read=0, state="running")
                      for n in ("orders-to-kafka", "order-windows", "to-lake")}

    def status(self) -> dict[str, Any]:
        return {"failed": self.failed}

    def flow(self, name: str) -> Any:
        return self.flows[name]


def _watch(timeout_s: float = 600) -> tuple[Watch, Maps, Topic, Monitor]:
    maps, topic = Maps(), Topic()
    watch = Watch(Orders(maps, topic), NAMES, maps, topic,  # type: ignore[arg-type]
                  ["to-lake"], timeout_s)
    return watch, maps, topic, Monitor()


def _deliver(maps: Maps, topic: Topic) -> None:
    """What the pipelines and the sink would write for the topic's records."""
    maps.maps[NAMES.paid] = paid(maps.maps[NAMES.orders])
    maps.maps[NAMES.windows] = expected_windows(topic.records)


def test_caught_up_only_once_the_closing_order_moved_the_watermark() -> None:
    watch, maps, topic, monitor = _watch()
    assert watch(monitor) is False and watch.phase == 1  # the workload written
    monitor.flows["order-windows"].read = len(topic.records)
    maps.maps[NAMES.paid] = paid(maps.maps[NAMES.orders])
    monitor.flows["to-lake"].state = "finished"
    # everything matches now, but no window can have been emitted yet: not done
    assert watch(monitor) is False and watch.phase == 2
    topic.read()
    assert CLOSING in topic.current()
    assert watch(monitor) is False  # windows expected, none delivered
    _deliver(maps, topic)  # (the topic was read: the closing order is in it)
    assert expected_windows(topic.records)  # the workload's windows, not the closing one's
    assert watch(monitor) is True and watch.caught_up and "caught up" in watch.outcome


def test_the_closing_order_waits_for_the_window_pipeline_to_read_every_record() -> None:
    watch, maps, topic, monitor = _watch()
    watch(monitor)
    monitor.flows["order-windows"].read = len(topic.records) - 1
    assert watch(monitor) is False and watch.phase == 1
    topic.read()
    assert CLOSING not in topic.current()


def test_a_store_flow_still_running_or_a_place_that_differs_is_not_caught_up() -> None:
    watch, maps, topic, monitor = _watch()
    watch(monitor)
    monitor.flows["order-windows"].read = len(topic.records)
    watch(monitor)
    topic.read()
    _deliver(maps, topic)
    assert watch(monitor) is False  # to-lake not finished
    monitor.flows["to-lake"].state = "finished"
    maps.maps[NAMES.paid]["o-1"] = {**maps.maps[NAMES.paid]["o-1"], "amount": -1}
    assert watch(monitor) is False
    maps.maps[NAMES.paid] = paid(maps.maps[NAMES.orders])
    assert watch(monitor) is True


def test_a_failed_flow_or_the_deadline_stops_the_run_not_caught_up() -> None:
    watch, _, _, monitor = _watch()
    monitor.failed = ["paid-orders"]
    assert watch(monitor) is True and not watch.caught_up
    assert watch.outcome == "stopped: paid-orders failed"
    late, _, _, monitor = _watch(timeout_s=0)
    late.deadline = 0.0  # the clock starts at the first question: here, long ago
    assert late(monitor) is True and not late.caught_up and "phase 0 of 2" in late.outcome
    fresh, _, _, monitor = _watch(timeout_s=0.5)
    assert fresh(monitor) is False and fresh.deadline is not None  # started now
    assert flows.window_key("PAID", 0) == "PAID@0"
