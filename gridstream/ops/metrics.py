"""The metrics a run serves (Prometheus text format), declared once.

``METRICS`` is the one list of what is served: its name, kind, labels and meaning; the
metrics reference in ``docs/operating.md`` is generated from it (``python -m
gridstream.ops.metrics --write docs/operating.md``). ``RunMetrics`` holds them in a
registry of its own (two runs in one process never share a series).

Every flow of a run file (a store feed, an API pipeline, a connector) and the
mirror are a ``flow`` label; ``source`` names a Kafka topic-partition (``topic/3``) or a
grid cache.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from gridstream.ops.counts import BatchCounts

__all__ = ["METRICS", "STATES", "MetricSpec", "RunMetrics", "reference_markdown"]

STATES = ("starting", "running", "idle", "waiting", "restarting", "failed", "finished",
          "stopped")
"""A flow's states; ``gridstream_flow_state`` is 1 for the current one, 0 for the others."""

BATCH_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass(frozen=True)
class MetricSpec:
    name: str
    kind: str  # counter | gauge | histogram
    labels: tuple[str, ...]
    help: str


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("gridstream_flow_records_read", "counter", ("flow",),
               "Records the flow read (every one is exactly one of written, filtered, "
               "skipped or dead-lettered)."),
    MetricSpec("gridstream_flow_records_written", "counter", ("flow",),
               "Records the flow wrote to its target (topic, store, grid)."),
    MetricSpec("gridstream_flow_records_filtered", "counter", ("flow",),
               "Records dropped on purpose: a filter or step said no, or the store held "
               "a newer version."),
    MetricSpec("gridstream_flow_records_skipped", "counter", ("flow",),
               "Bad records skipped by the flow's error policy (logged)."),
    MetricSpec("gridstream_flow_records_dead_lettered", "counter", ("flow",),
               "Bad records sent to the flow's dead-letter topic."),
    MetricSpec("gridstream_flow_batches", "counter", ("flow",),
               "Micro-batches the flow completed."),
    MetricSpec("gridstream_flow_batch_duration_seconds", "histogram", ("flow",),
               "Time from a batch's start to its commit."),
    MetricSpec("gridstream_flow_lag_records", "gauge", ("flow", "source"),
               "Records behind the latest position the flow's source reported, per "
               "Kafka topic-partition (topic/partition); a source connector's: changes "
               "not read yet per Hazelcast map (source = the map) or of the Space's log "
               "(source log), measured every 2 s (0.1 s per cache when more); the "
               "mirror's: operations of the log not yet in Kafka (source log)."),
    MetricSpec("gridstream_flow_lag_seconds", "gauge", ("flow",),
               "Seconds since the flow last had no lag (0 while it keeps up)."),
    MetricSpec("gridstream_flow_snapshot_rows", "gauge", ("flow", "source"),
               "Rows of a cache's initial snapshot emitted so far (source connector)."),
    MetricSpec("gridstream_flow_last_batch_timestamp_seconds", "gauge", ("flow",),
               "Unix time of the flow's last completed batch."),
    MetricSpec("gridstream_flow_restarts", "counter", ("flow",),
               "Times the flow was started again after a failure."),
    MetricSpec("gridstream_flow_state", "gauge", ("flow", "state"),
               "1 for the flow's current state, 0 for the others (" + ", ".join(STATES)
               + ")."),
)


class RunMetrics:
    """The metrics of one run, in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._m: dict[str, Any] = {}
        for spec in METRICS:
            name = spec.name
            if spec.kind == "counter":
                self._m[name] = Counter(name, spec.help, spec.labels,
                                        registry=self.registry)
            elif spec.kind == "gauge":
                self._m[name] = Gauge(name, spec.help, spec.labels, registry=self.registry)
            else:
                self._m[name] = Histogram(name, spec.help, spec.labels, buckets=BATCH_BUCKETS,
                                          registry=self.registry)

    def add_flow(self, flow: str) -> None:
        """Every series of a flow exists (at 0) from its start, so a scrape sees it."""
        for spec in METRICS:
            if spec.labels == ("flow",):
                self._m[spec.name].labels(flow)
        self.state(flow, "starting")

    def batch(self, flow: str, counts: BatchCounts, at: float) -> None:
        """One batch: its counts and its duration."""
        self.grew(flow, counts, 1, at)
        self._m["gridstream_flow_batch_duration_seconds"].labels(flow).observe(counts.seconds)

    def grew(self, flow: str, counts: BatchCounts, batches: int, at: float | None) -> None:
        """Counters grow by ``counts`` over ``batches`` batches (the last one at ``at``)."""
        m = self._m
        m["gridstream_flow_records_read"].labels(flow).inc(counts.read)
        m["gridstream_flow_records_written"].labels(flow).inc(counts.written)
        m["gridstream_flow_records_filtered"].labels(flow).inc(counts.filtered)
        m["gridstream_flow_records_skipped"].labels(flow).inc(counts.skipped)
        m["gridstream_flow_records_dead_lettered"].labels(flow).inc(counts.dead_lettered)
        m["gridstream_flow_batches"].labels(flow).inc(batches)
        if at is not None:
            m["gridstream_flow_last_batch_timestamp_seconds"].labels(flow).set(at)

    def lag(self, flow: str, by_source: dict[str, int], seconds: float | None) -> None:
        gauge = self._m["gridstream_flow_lag_records"]
        for source, records in by_source.items():
            gauge.labels(flow, source).set(records)
        if seconds is not None:
            self._m["gridstream_flow_lag_seconds"].labels(flow).set(seconds)

    def snapshot_rows(self, flow: str, by_cache: dict[str, int]) -> None:
        for cache, rows in by_cache.items():
            self._m["gridstream_flow_snapshot_rows"].labels(flow, cache).set(rows)

    def restarted(self, flow: str) -> None:
        self._m["gridstream_flow_restarts"].labels(flow).inc()

    def state(self, flow: str, state: str) -> None:
        gauge = self._m["gridstream_flow_state"]
        for each in STATES:
            gauge.labels(flow, each).set(1 if each == state else 0)

    def text(self) -> bytes:
        """The Prometheus text exposition of every series."""
        return generate_latest(self.registry)


def reference_markdown() -> str:
    """The metrics reference table of ``docs/operating.md``."""
    rows = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for spec in METRICS:
        name = spec.name + ("_total" if spec.kind == "counter" else "")
        rows.append(f"| `{name}` | {spec.kind} | {', '.join(spec.labels)} | {spec.help} |")
    return "\n".join(rows) + "\n"


_BEGIN = "<!-- metrics reference: generated by python -m gridstream.ops.metrics -->"
_END = "<!-- end of metrics reference -->"


def main(argv: list[str]) -> int:
    """``--write FILE``: replace the generated block of FILE; ``--check FILE``: exit 1
    when it differs; neither: print the table."""
    table = reference_markdown()
    if len(argv) != 2 or argv[0] not in ("--write", "--check"):
        print(table, end="")
        return 0
    from pathlib import Path

    path = Path(argv[1])
    text = path.read_text(encoding="utf-8")
    head, _, rest = text.partition(_BEGIN)
    _, _, tail = rest.partition(_END)
    if not rest or not tail and _END not in rest:
        print(f"{path}: no generated block ({_BEGIN})", file=sys.stderr)
        return 1
    new = f"{head}{_BEGIN}\n{table}{_END}{tail}"
    if argv[0] == "--check":
        return 0 if new == text else 1
    path.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
