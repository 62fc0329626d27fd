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
import time
from collections.abc import Mapping
from typing import Any

import orjson

from gridstream.connect.config import GridSettings
from gridstream.connect.grids import grid_adapter
from gridstream.connect.source.offsets import SourceOffset
from gridstream.errors import GridstreamError
from gridstream.grid.contract import GridAdapter

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
    """``measure(progress)``: the lag by cache (or ``log``), measured again every
    ``every_s`` (or ``PER_CACHE_S`` per cache); the last figures in between. A grid
    that cannot be reached is no lag figure (the flow's own failure says why), never an
    error of the run."""

    def __init__(self, settings: GridSettings, every_s: float = LAG_EVERY_S) -> None:
        self.settings, self.every_s = settings, every_s
        self._adapter: GridAdapter | None = None
        self._at = float("-inf")
        self._last: dict[str, int] = {}

    def measure(self, progress: Mapping[str, Any] | None) -> dict[str, int]:
        now = time.monotonic()
        if now - self._at < self.every_s:
            return self._last
        offset = end_offset(progress)
        if offset is None or now - self._at < PER_CACHE_S * len(offset.caches):
            return self._last
        self._at = now
        try:
            self._last = self._lags(offset)
        except (GridstreamError, OSError) as exc:
            log.info("%s: no lag figure now: %s", self.settings.kind, exc)
            self.close()
        return self._last

    def _lags(self, offset: SourceOffset) -> dict[str, int]:
        if self._adapter is None:
            adapter = grid_adapter(self.settings)
            adapter.open()
            self._adapter = adapter
        lags: dict[str, int] = {}
        for cache, state in sorted(offset.caches.items()):
            behind = self._adapter.behind(cache, state.pos)
            if behind is None:
                continue  # the grid is another one now: the next batch says so
            lags[cache] = behind + (state.rows - state.row if state.snapshotting
                                    and state.rows is not None and state.row is not None
                                    else 0)
        if self.settings.kind == "space" and lags:
            return {"log": max(lags.values())}
        return lags

    def close(self) -> None:
        if self._adapter is not None:
            adapter, self._adapter = self._adapter, None
            adapter.close()
