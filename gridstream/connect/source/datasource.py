"""The source connector as a PySpark Python streaming data source (``gridstream-grid``).

The driver-side reader (``GridStreamReader``, run by Spark in a Python process of its
own for the life of the query) plans offsets with ``offsets.Planner`` over a grid
adapter, materialises snapshots under the checkpoint and, on ``commit``, acknowledges
the committed positions to the grid (the Space's log retention) and deletes snapshot
files no offset needs. ``read`` (on executors) reads one cache's part of the batch
(``read.read_work``) into Arrow record batches; adapters and record makers are kept per
worker process, so a reused worker does not reconnect or rebuild its state.

Options: ``config`` (the ``SourceConnectorConfig`` as JSON, without Kafka properties:
the reader needs no secret) and ``allowed`` (the allowed filter modules, comma-separated).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from gridstream.connect.config import SourceConnectorConfig
from gridstream.connect.converters import build_converter
from gridstream.connect.filters import load_filter
from gridstream.connect.grids import grid_adapter
from gridstream.connect.source import snapshots
from gridstream.connect.source.offsets import (
    Planner,
    SnapshotMade,
    SourceOffset,
    Work,
    batch_work,
    initial_offset,
    position_dict,
    position_from,
)
from gridstream.connect.source.read import SCHEMA_DDL, RecordMaker, RowBuffer, read_work
from gridstream.connect.transforms import build_chain
from gridstream.errors import GridError, PositionLostError
from gridstream.grid.contract import GridAdapter, Position

__all__ = ["FORMAT", "GridSourceDataSource", "GridStreamReader", "consumer_name",
           "source_options"]

log = logging.getLogger(__name__)

FORMAT = "gridstream-grid"
_ATTEMPTS, _RETRY_S = 3, 2.0
"""How often planning is tried when the grid fails (not a lost position), and the pause."""


def consumer_name(connector: str) -> str:
    """The name the connector acknowledges its positions under (the Space's log)."""
    return f"gridstream-source-{connector}"


class GridSourceDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA_DDL

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return GridStreamReader(dict(self.options))


class CachePartition(InputPartition):
    """One cache's part of a batch (JSON: picklable, small)."""

    def __init__(self, payload: str) -> None:
        super().__init__(payload)
        self.payload = payload


def _work_json(work: Work, time_ms: int) -> str:
    raw = asdict(work)
    for name in ("start", "end", "until"):
        value = getattr(work, name)
        raw[name] = position_dict(value) if value is not None else None
    return orjson.dumps({"work": raw, "t": time_ms}).decode()


def _work_from(payload: str) -> tuple[Work | None, int, list[dict[str, str]]]:
    raw = orjson.loads(payload)
    if "events" in raw:
        return None, int(raw["t"]), list(raw["events"])
    w = dict(raw["work"])
    for name in ("start", "end", "until"):
        w[name] = position_from(w[name]) if w[name] is not None else None
    return Work(**w), int(raw["t"]), []


SECRET_OPTION = "registry.secret"  # noqa: S105 - an option name, not a password
"""The option holding the converter's registry credentials: Spark redacts options whose
name matches ``spark.redaction.regex`` (``secret``, ``password``, ...) wherever it prints
them."""


def source_options(config: SourceConnectorConfig, allowed: Sequence[str]) -> dict[str, str]:
    """The data source's options: the config without Kafka properties (the reader needs
    none), the allowed filter modules, and the registry's credentials apart."""
    options = {"config": config.model_dump_json(exclude={"kafka"}), "allowed": ",".join(allowed)}
    secret = config.converter.schema_registry_user_info
    if secret is not None:
        options[SECRET_OPTION] = secret.get_secret_value()
    return options


def _config(options: dict[str, str]) -> tuple[SourceConnectorConfig, tuple[str, ...]]:
    raw = orjson.loads(options["config"])
    secret = options.get(SECRET_OPTION)
    if secret is not None:
        raw["converter"]["schema_registry_user_info"] = secret
    config = SourceConnectorConfig.model_validate(raw)
    allowed = tuple(a for a in options.get("allowed", "").split(",") if a)
    return config, allowed


class _AdapterView:
    """``offsets.GridView`` over an open adapter (driver side)."""

    def __init__(self, adapter: GridAdapter, snap_dir: Path) -> None:
        self.adapter = adapter
        self.snap_dir = snap_dir

    def list_caches(self) -> list[str]:
        return self.adapter.list_caches()

    def end_position(self, cache: str) -> Position:
        return self.adapter.end_position(cache)

    def start_position(self, cache: str) -> Position:
        return self.adapter.start_position(cache)

    def check(self, cache: str, position: Position) -> None:
        self.adapter.read_changes(cache, position, 1)

    def snapshot(self, cache: str) -> SnapshotMade:
        before = self.adapter.end_position(cache)
        name, rows, versioned = snapshots.write_snapshot(self.adapter, cache, self.snap_dir)
        after = self.adapter.end_position(cache) if versioned and rows else None
        log.info("snapshot of %s: %d entries in %s", cache, rows, name)
        return SnapshotMade(name, rows, before, after)


class GridStreamReader(DataSourceStreamReader):
    """Plans, reads and commits the source's micro-batches (see the module docstring)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.config, self.allowed = _config(options)
        self.snap_dir = snapshots.snapshot_dir(self.config.checkpoint)
        c = self.config
        self._planner = Planner(policy=c.failover_policy, on_position_lost=c.on_position_lost,
                                load_initial=c.shall_load_initial_data,
                                batch_size=c.batch_size, whitelist=c.cache_whitelist,
                                blacklist=c.cache_blacklist,
                                list_interval_ms=c.cache_list_poll_interval_ms)
        self._adapter: GridAdapter | None = None
        self._planned: SourceOffset | None = None

    def __getstate__(self) -> dict[str, Any]:  # executors get the options only
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    def _grid(self) -> GridAdapter:
        if self._adapter is None:
            adapter = grid_adapter(self.config.grid)
            adapter.open()
            self._adapter = adapter
        return self._adapter

    def initialOffset(self) -> dict[str, Any]:
        return initial_offset()

    def latestOffset(self, start: dict[str, Any], limit: Any = None) -> dict[str, Any]:
        begin = SourceOffset.from_dict(start)
        first = self._planner.first
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                planned = self._planner.plan(begin, _AdapterView(self._grid(), self.snap_dir),
                                             int(time.time() * 1000))
                break
            except PositionLostError:
                raise
            except GridError as exc:  # the grid unreachable for a while: a new connection
                self._reset()
                if attempt == _ATTEMPTS:
                    raise
                log.warning("planning the next batch failed (attempt %d of %d), again in "
                            "%ss: %s", attempt, _ATTEMPTS, _RETRY_S, exc)
                time.sleep(_RETRY_S)
        if first:
            self._acknowledge(begin)
        self._planned = planned
        return planned.to_dict()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, finish = SourceOffset.from_dict(start), SourceOffset.from_dict(end)
        parts: list[InputPartition] = []
        for cache, state in sorted(finish.caches.items()):
            work = batch_work(cache, begin.caches.get(cache), state)
            if work is not None:
                parts.append(CachePartition(_work_json(work, finish.time_ms)))
        if finish.events:
            payload = {"events": [e.to_dict() for e in finish.events], "t": finish.time_ms}
            parts.append(CachePartition(orjson.dumps(payload).decode()))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, CachePartition)
        work, time_ms, events = _work_from(partition.payload)
        if work is None:
            rows = RowBuffer()
            for event in events:
                rows.add(None, None, None, None, "event", event["cache"], event["kind"],
                         orjson.dumps(event).decode())
            yield rows.take()
            return
        maker = _worker_maker(self.config, self.allowed, time_ms)
        yield from read_work(work, lambda fresh: _worker_adapter(self.config, fresh), maker,
                             self.snap_dir)

    def commit(self, end: dict[str, Any]) -> None:
        done = SourceOffset.from_dict(end)
        self._acknowledge(done)
        keep = {s.snap for s in done.caches.values() if s.snap}
        if self._planned is not None:  # a planned batch may be running or re-run next
            keep |= {s.snap for s in self._planned.caches.values() if s.snap}
            snapshots.remove_unused(self.snap_dir, keep)

    def _acknowledge(self, offset: SourceOffset) -> None:
        positions = [s.pos for s in offset.caches.values()]
        if not positions:
            return
        lowest = min(positions, key=lambda p: min(p.next_seqs.values(), default=0))
        if len({p.lineage for p in positions}) != 1 or len(
                {tuple(sorted(p.next_seqs)) for p in positions}) != 1:
            return  # not one stream for all caches (Hazelcast): nothing to acknowledge
        try:
            self._grid().acknowledge(consumer_name(self.config.name), lowest)
        except GridError as exc:
            log.warning("cannot acknowledge the source's position to the grid: %s", exc)

    def _reset(self) -> None:
        adapter, self._adapter = self._adapter, None
        if adapter is not None:
            adapter.close()

    def stop(self) -> None:
        self._reset()


# ---------------------------------------------------------------- per worker process

_LOCK = threading.Lock()
_ADAPTERS: dict[str, GridAdapter] = {}
_MAKERS: dict[str, RecordMaker] = {}


def _grid_key(config: SourceConnectorConfig) -> str:
    return config.grid.model_dump_json()


def _worker_adapter(config: SourceConnectorConfig, fresh: bool = False) -> GridAdapter:
    """This worker's adapter for the config's grid (``fresh``: the old one failed, close
    it and connect again)."""
    if fresh:
        _drop_worker_adapter(config)
    key = _grid_key(config)
    with _LOCK:
        adapter = _ADAPTERS.get(key)
        if adapter is None:
            adapter = grid_adapter(config.grid)
            adapter.open()
            _ADAPTERS[key] = adapter
        return adapter


def _drop_worker_adapter(config: SourceConnectorConfig) -> None:
    with _LOCK:
        adapter = _ADAPTERS.pop(_grid_key(config), None)
    if adapter is not None:
        try:
            adapter.close()
        except Exception:  # noqa: BLE001 - closing an adapter that already failed
            log.debug("closing a failed adapter failed", exc_info=True)


def _worker_maker(config: SourceConnectorConfig, allowed: tuple[str, ...],
                  time_ms: int) -> RecordMaker:
    key = config.model_dump_json() + "|" + ",".join(allowed)
    with _LOCK:
        maker = _MAKERS.get(key)
        if maker is None:
            entry_filter = (load_filter(config.cache_filter, allowed)
                            if config.cache_filter else None)
            maker = RecordMaker(config, build_converter(config.converter),
                                build_chain(config.transforms), entry_filter, time_ms)
            _MAKERS[key] = maker
        maker.time_ms = time_ms
        return maker

