"""The runner's lag (from a query's progress) for every kind of source a run file holds:
Kafka offsets, and a source connector's offsets, which are not Kafka offsets."""

from __future__ import annotations

from typing import Any

from gridstream.ops.lag import kafka_lag as _lag


def _progress(end: Any, latest: Any) -> dict[str, Any]:
    return {"sources": [{"endOffset": end, "latestOffset": latest}]}


def test_kafka_lag_sums_every_partition() -> None:
    end = {"a": {"0": 10, "1": 5}}
    latest = '{"a": {"0": 12, "1": 9}, "b": {"0": 3}}'
    assert _lag(_progress(end, latest)) == 6
    assert _lag(None) is None


def test_offsets_of_a_grid_source_do_not_break_the_runner() -> None:
    """A source connector's offsets hold positions (a lineage text, per-stream sequence
    objects, snapshot progress): no Kafka lag is read from them, and the runner's report
    loop must not fail on them (int('abc') raised and stopped every query)."""
    end = ('{"people": {"lineage": "log-1", "next": {"0": 5}}, '
           '"orders": {"snapshot": "s-1", "rows": 20, "position": {"lineage": "x"}}}')
    latest = ('{"people": {"lineage": "log-1", "next": {"0": 9}}, '
              '"orders": {"snapshot": "s-1", "rows": 40, "position": {"lineage": "x"}}}')
    assert _lag(_progress(end, latest)) is None
    assert _lag(_progress({"c": {"p": [1, 2]}}, {"c": {"p": [3]}})) is None
    assert _lag(_progress({"c": {"p": True}}, {"c": {"p": 3}})) is None


def test_a_source_connector_s_offsets_give_no_lag_and_no_error() -> None:
    """The offsets the source connector keeps (nested per-cache positions, snapshot
    progress, events): int() of a dict raised TypeError and stopped every run."""
    import json

    position = {"lineage": "5c1d", "next": {"log": 120}}
    offset = {"v": 1, "t": 1700000000000,
              "caches": {"Orders": {"stream": position},
                         "Users": {"snapshot": {"file": "s-1", "rows": 0, "done": 0},
                                   "stream": position}},
              "events": {"0": {"kind": "discovered", "cache": "Users"}}}
    progress = {"sources": [{"endOffset": json.dumps(offset), "latestOffset": offset}]}
    assert _lag(progress) is None


def test_the_runner_hands_each_connector_its_query_progress() -> None:
    """A sink commits its positions to its consumer group from the progress the runner
    reads (a flow without ``progressed``, a store feed, is left alone)."""
    from collections import deque

    from gridstream.spark.runnable import Runnable
    from gridstream.spark.runner import PipelineRunner

    class _Query:
        lastProgress = _progress({"t": {"0": 4}}, {"t": {"0": 9}})  # noqa: N815 - Spark's

    class _Flow(Runnable):
        kind = "fake"
        name = ""

        def __init__(self, name: str) -> None:
            self.name = name
            self.reports: deque[Any] = deque()
            self.seen: list[Any] = []

        def describe(self) -> str:
            return self.name

        def start(self, spark: Any) -> Any:
            raise AssertionError("not started here")

    class _Connector(_Flow):
        def progressed(self, progress: Any) -> None:
            self.seen.append(progress)

    connector, store = _Connector("sink"), _Flow("store")
    runner = PipelineRunner([connector, store], lambda: None)  # type: ignore[list-item]
    for flow in runner._flows.values():
        flow.query = _Query()  # type: ignore[assignment]
    runner._report()
    assert connector.seen == [_Query.lastProgress]
