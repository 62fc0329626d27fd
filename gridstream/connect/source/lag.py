"""How far a source connector is behind its grid, in changes: the run's lag for a flow
that reads a grid (a Kafka-reading flow's lag comes from its query's progress).

Read on the driver from the position of the last batch (the query's ``endOffset``) and
the grid's end now, at most every ``every_s`` (2 s; 0.1 s per cache when that is more:
a map costs one journal subscription, an invocation per partition, no event read):
Hazelcast, per map, the journal events after the position, plus the rows of a snapshot
not yet emitted; the Space, one figure ``log``: the operations of its log
after the oldest cache position (the connector reads the log once for every cache).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import orjson

from gridstream.connect.source.offsets import SourceOffset
from gridstream.errors import GridstreamError
from gridstream.grid.contract import GridAdapter
from gridstream.grid.settings import GridSettings, grid_adapter

__all__ = ["LAG_EVERY_S", "GridLag", "end_offset"]

log = logging.getLogger(__name__)

LAG_EVERY_S = 2.0
PER_CACHE_S = 0.1


def end_offset(progress: Mapping[str, Any] | None) -> SourceOffset | None:
    """The last batch's end offset of a source connector's progress, if it has one."""
    for source in (progress or {}).get("sources", []):
        raw = source.get("endOffset")
        try:
            data = orjson.loads(raw) if isinstance(raw, str) else raw
            if isinstance(data, dict) and "caches" in data:
                return SourceOffset.from_dict(data)
        except (orjson.JSONDecodeError, GridstreamError):
            continue
    return None


class GridLag:
    """``measure(progress)``: the last lag figures by cache (or ``log``) at once; a new
    measurement starts on a thread of its own every ``every_s`` (or ``PER_CACHE_S`` per
    cache), so a grid slow to answer never holds up the caller (the run's supervising
    loop). A grid that cannot be reached is no lag figure (the flow's own failure says
    why), never an error of the run."""

    def __init__(self, settings: GridSettings, every_s: float = LAG_EVERY_S) -> None:
        self.settings, self.every_s = settings, every_s
        self._adapter: GridAdapter | None = None
        self._at = float("-inf")
        self._last: dict[str, int] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def measure(self, progress: Mapping[str, Any] | None) -> dict[str, int]:
        now = time.monotonic()
        with self._lock:
            last = dict(self._last)
            busy = self._thread is not None and self._thread.is_alive()
            if busy or self._closed or now - self._at < self.every_s:
                return last
            offset = end_offset(progress)
            if offset is None or now - self._at < PER_CACHE_S * len(offset.caches):
                return last
            self._at = now
            self._thread = threading.Thread(target=self._refresh, args=(offset,),
                                            name="gridstream-grid-lag", daemon=True)
            self._thread.start()
            return last

    def settle(self, timeout_s: float = 30.0) -> None:
        """Wait for a measurement under way (tests; ``close``)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    def _refresh(self, offset: SourceOffset) -> None:
        try:
            lags = self._lags(offset)
        except Exception as exc:  # noqa: BLE001 - a lag figure is never the run's failure
            log.info("%s: no lag figure now: %s", self.settings.kind, exc)
            self._let_go()
            return
        with self._lock:
            self._last = lags

    def _lags(self, offset: SourceOffset) -> dict[str, int]:
        if self._adapter is None:
            adapter = grid_adapter(self.settings)
            adapter.open()
            self._adapter = adapter
        behind: dict[str, int] = {}
        unsent: dict[str, int] = {}  # snapshot rows not yet emitted
        for cache, state in sorted(offset.caches.items()):
            changes = self._adapter.behind(cache, state.pos)
            if changes is None:
                continue  # the grid is another one now: the next batch says so
            behind[cache] = changes
            if state.rows is not None and state.row is not None:
                unsent[cache] = state.rows - state.row
        if self.settings.kind == "space" and behind:  # one log, read once for every cache
            return {"log": max(behind.values()) + sum(unsent.values())}
        return {cache: n + unsent.get(cache, 0) for cache, n in behind.items()}

    def _let_go(self) -> None:
        adapter, self._adapter = self._adapter, None
        if adapter is not None:
            adapter.close()

    def close(self) -> None:
        """No measurement after this; the grid's client is closed once the one under
        way (if any) is over."""
        with self._lock:
            self._closed = True
        self.settle()
        self._let_go()
