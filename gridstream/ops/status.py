"""What every flow of a run is doing: the runner tells a ``Monitor``, which keeps each
flow's status (served as JSON, ``/status``) and the run's metrics (``/metrics``).

The runner's thread writes, the HTTP server's threads read: every method takes the
monitor's lock, and ``status()`` returns a copy. History is bounded (one point per
report, the last ``HISTORY`` of them).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from gridstream.ops.counts import BatchCounts
from gridstream.ops.metrics import STATES, RunMetrics

__all__ = ["HISTORY", "FlowStatus", "Monitor", "lag_by_source", "snapshot_rows"]

HISTORY = 600
"""Points of rate and lag history kept per flow (one a report: 10 minutes at 1 s)."""


@dataclass
class FlowStatus:
    name: str
    kind: str
    description: str
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    """The places it reads and writes (``kafka:topic``, ``hazelcast:map``, ...)."""
    state: str = "starting"
    since: float = field(default_factory=time.time)
    batches: int = 0
    read: int = 0
    written: int = 0
    filtered: int = 0
    skipped: int = 0
    dead_lettered: int = 0
    busy_s: float = 0.0
    """The seconds its batches took, summed (``read / busy_s``: its records/s)."""
    last_batch_at: float | None = None
    last_batch_seconds: float | None = None
    lag_records: int | None = None
    lag_by_source: dict[str, int] = field(default_factory=dict)
    lag_seconds: float | None = None
    snapshot_rows: dict[str, int] = field(default_factory=dict)
    restarts: int = 0
    error: str | None = None
    next_restart_at: float | None = None
    caught_up_at: float | None = None
    history: deque[tuple[float, int, int | None]] = field(
        default_factory=lambda: deque(maxlen=HISTORY))
    """(time, records read so far, lag) at each report."""

    def as_json(self, now: float) -> dict[str, Any]:
        data = asdict(self)
        data.pop("caught_up_at")
        data["history"] = [list(point) for point in self.history]
        data["rate_per_s"] = _rate(self.history, now)
        return data


def _rate(history: deque[tuple[float, int, int | None]], now: float,
          window_s: float = 60.0) -> float:
    """Records read a second over the last minute (or since the first point)."""
    points = [p for p in history if p[0] >= now - window_s]
    if len(points) < 2 or points[-1][0] <= points[0][0]:
        return 0.0
    return round((points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0]), 1)


def lag_by_source(progress: Mapping[str, Any] | None) -> dict[str, int]:
    """``topic/partition`` → records behind, from a query's progress (Kafka sources)."""
    from gridstream.ops.lag import kafka_lags

    return {f"{topic}/{part}": lag for (topic, part), lag in kafka_lags(progress).items()}


def snapshot_rows(progress: Mapping[str, Any] | None) -> dict[str, int]:
    """cache → snapshot rows emitted so far, from a source connector's end offset."""
    import orjson

    rows: dict[str, int] = {}
    for source in (progress or {}).get("sources", []):
        end = source.get("endOffset")
        try:
            offset = orjson.loads(end) if isinstance(end, str) else end
        except orjson.JSONDecodeError:
            continue
        caches = offset.get("caches") if isinstance(offset, dict) else None
        for cache, state in (caches or {}).items():
            if isinstance(state, dict) and isinstance(state.get("row"), int):
                rows[cache] = state["row"]
    return rows


class Monitor:
    """Flow status and metrics of one run."""

    def __init__(self, metrics: RunMetrics | None = None) -> None:
        self.metrics = metrics or RunMetrics()
        self.started = time.time()
        self.log_file: str | None = None
        self._flows: dict[str, FlowStatus] = {}
        self._lock = threading.Lock()

    def add(self, name: str, kind: str, description: str,
            endpoints: tuple[list[str], list[str]] = ([], [])) -> None:
        with self._lock:
            self._flows[name] = FlowStatus(name, kind, description, list(endpoints[0]),
                                           list(endpoints[1]))
            self.metrics.add_flow(name)

    def state(self, name: str, state: str, error: str | None = None,
              next_restart_at: float | None = None) -> None:
        assert state in STATES, state
        with self._lock:
            flow = self._flows[name]
            if flow.state != state:
                flow.state, flow.since = state, time.time()
            flow.error = error if state in ("failed", "restarting", "waiting") else None
            flow.next_restart_at = next_restart_at
            self.metrics.state(name, state)

    def batch(self, name: str, counts: BatchCounts) -> None:
        now = time.time()
        with self._lock:
            flow = self._flows[name]
            flow.batches += 1
            flow.read += counts.read
            flow.written += counts.written
            flow.filtered += counts.filtered
            flow.skipped += counts.skipped
            flow.dead_lettered += counts.dead_lettered
            flow.busy_s += counts.seconds
            flow.last_batch_at, flow.last_batch_seconds = now, counts.seconds
            self.metrics.batch(name, counts, now)

    def progress(self, name: str, progress: Mapping[str, Any] | None,
                 lags: dict[str, int] | None = None) -> None:
        """A report of the flow's query progress (every runner poll): lag (``lags``, when
        the caller has read them from ``progress`` already), snapshots, the history
        point."""
        lags = lag_by_source(progress) if lags is None else lags
        rows = snapshot_rows(progress)
        with self._lock:
            self._lagged(name, lags)
            self._flows[name].snapshot_rows.update(rows)
            self.metrics.snapshot_rows(name, rows)

    def _lagged(self, name: str, lags: dict[str, int]) -> None:
        """The flow's lag now, its lag in seconds and a history point (lock held)."""
        now = time.time()
        flow = self._flows[name]
        if lags:
            flow.lag_by_source = lags
            flow.lag_records = sum(lags.values())
        if flow.lag_records == 0 or flow.caught_up_at is None:
            flow.caught_up_at = now  # "since it last had no lag, or since its start"
        flow.lag_seconds = round(now - flow.caught_up_at, 1) if flow.lag_records else 0.0
        flow.history.append((round(now, 3), flow.read, flow.lag_records))
        self.metrics.lag(name, lags, flow.lag_seconds)

    def totals(self, name: str, *, read: int, written: int, batches: int,
               lag: dict[str, int]) -> None:
        """A flow that counts for itself (the mirror): its running totals now; the
        metrics grow by the difference since the last call."""
        now = time.time()
        with self._lock:
            flow = self._flows[name]
            grew = BatchCounts(max(0, read - flow.read), max(0, written - flow.written))
            more = max(0, batches - flow.batches)
            flow.read, flow.written, flow.batches = read, written, batches
            if more:
                flow.last_batch_at = now
            self.metrics.grew(name, grew, more, now if more else None)
            self._lagged(name, lag)

    def restarted(self, name: str) -> None:
        with self._lock:
            self._flows[name].restarts += 1
            self.metrics.restarted(name)

    def flow(self, name: str) -> FlowStatus:
        with self._lock:
            return self._flows[name]

    def status(self) -> dict[str, Any]:
        """The JSON status: the run and each flow (a copy, safe to serialise)."""
        now = time.time()
        with self._lock:
            flows = [f.as_json(now) for f in self._flows.values()]
        failed = [f["name"] for f in flows if f["state"] == "failed"]
        return {"started": self.started, "now": now, "log_file": self.log_file,
                "healthy": not failed, "failed": failed, "flows": flows}
